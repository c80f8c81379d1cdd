//go:build unix

package main

import (
	"errors"
	"syscall"
	"time"
)

// stopGroup sends SIGTERM to process group pgid and SIGKILL after grace if
// any of it is left (at once when grace is 0).
func stopGroup(pgid int, grace time.Duration) {
	sig := syscall.SIGTERM
	if grace == 0 {
		sig = syscall.SIGKILL
	}
	if err := syscall.Kill(-pgid, sig); errors.Is(err, syscall.ESRCH) || grace == 0 {
		return
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
