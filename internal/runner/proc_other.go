//go:build unix && !linux

package runner

import (
	"errors"
	"syscall"
)

// sysProcAttr puts the command in a process group of its own, so that it and
// its children can be signalled together.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupAlive reports whether the process group pgid has a member left.
func groupAlive(pgid int) bool {
	return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}
