package runner

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// supervisorProcAttr puts the supervisor in a process group of its own, so
// that a terminal's ^C reaches Gantry (which then stops its commands in
// order) rather than the commands directly.
func supervisorProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// commandProcAttr puts the command in a process group of its own, so that it
// and its children can be signalled together, and has the kernel kill it
// should its supervisor die (the supervisor keeps the starting thread).
func commandProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// becomeSubreaper makes the calling process the one that inherits its
// orphaned descendants, instead of PID 1.
func becomeSubreaper() error {
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	if errno != 0 {
		return os.NewSyscallError("prctl(PR_SET_CHILD_SUBREAPER)", errno)
	}
	return nil
}

// treeEnded returns a check of whether anything of the command is left:
// as a subreaper the supervisor is an ancestor of every process the command
// started, so nothing is left when it has no descendant that is not a
// zombie (a zombie is reaped by the supervisor, or by its own parent).
func treeEnded(int) func() bool {
	self := os.Getpid()
	return func() bool { return len(descendants(self)) == 0 }
}

// descendants returns the processes below pid that are not zombies.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := make(map[int][]int)
	live := make(map[int]bool)
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		state, ppid, ok := parseStat(stat)
		if !ok {
			continue
		}
		children[ppid] = append(children[ppid], p)
		live[p] = state != 'Z' && state != 'X'
	}
	var out []int
	queue := children[pid]
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if live[p] {
			out = append(out, p)
		}
		queue = append(queue, children[p]...)
	}
	return out
}

// parseStat returns the state and parent pid from /proc/PID/stat, whose
// second field (the command name, in parentheses) may contain anything.
func parseStat(stat []byte) (state byte, ppid int, ok bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := bytes.Fields(stat[i+1:]) // state ppid pgrp …
	if len(fields) < 2 || len(fields[0]) == 0 {
		return 0, 0, false
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	if err != nil {
		return 0, 0, false
	}
	return fields[0][0], ppid, true
}

// executable is the path that starts Gantry's own executable again (the
// supervisor): /proc/self/exe still does after the file was replaced by an
// upgrade.
func executable() (string, error) { return "/proc/self/exe", nil }
