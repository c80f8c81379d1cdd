//go:build unix && !linux

package runner

import (
	"errors"
	"os"
	"syscall"
)

// supervisorProcAttr puts the supervisor in a process group of its own, so
// that a terminal's ^C reaches Gantry rather than the commands directly.
func supervisorProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// commandProcAttr puts the command in a process group of its own, so that it
// and its children can be signalled together.
func commandProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// becomeSubreaper does nothing here: only Linux has subreapers, so a
// descendant that leaves the command's process group is not followed.
func becomeSubreaper() error { return nil }

// treeEnded returns a check of whether the command's process group pgid
// has a member left.
func treeEnded(pgid int) func() bool {
	return func() bool { return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) }
}

// descendants is unknown without /proc: the process group is all there is.
func descendants(int) []int { return nil }

// executable is the path of Gantry's own executable (the supervisor).
func executable() (string, error) { return os.Executable() }
