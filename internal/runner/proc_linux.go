package runner

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// sysProcAttr puts the command in a process group of its own, so that it and
// its children can be signalled together, and asks the kernel to send it
// SIGTERM should Gantry die first (so that, for example, terraform releases
// its state lock instead of running on unattended).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// groupAlive reports whether the process group pgid has a member that is not
// a zombie. Zombies count as gone: an orphan's zombie waits for PID 1 to reap
// it, and in a container PID 1 may never do so.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		state, pgrp, ok := parseStat(stat)
		if ok && pgrp == pgid && state != 'Z' && state != 'X' {
			return true
		}
	}
	return false
}

// parseStat returns the state and process group from /proc/PID/stat, whose
// second field (the command name, in parentheses) may contain anything.
func parseStat(stat []byte) (state byte, pgrp int, ok bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := bytes.Fields(stat[i+1:]) // state ppid pgrp …
	if len(fields) < 3 || len(fields[0]) == 0 {
		return 0, 0, false
	}
	pgrp, err := strconv.Atoi(string(fields[2]))
	if err != nil {
		return 0, 0, false
	}
	return fields[0][0], pgrp, true
}
