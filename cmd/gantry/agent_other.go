//go:build !unix

package main

import (
	"os"
	"syscall"
	"time"
)

// Without process groups a task is stopped as one process: gantry agent is
// meant for Unix machines.
func taskProcAttr() *syscall.SysProcAttr { return nil }

func stopGroup(pid int, _ time.Duration) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
