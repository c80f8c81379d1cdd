//go:build unix && !linux

package main

import "syscall"

// taskProcAttr puts a task in a process group of its own (see the Linux
// version; these systems cannot signal a task when its agent dies).
func taskProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
