package main

import "syscall"

// taskProcAttr puts a task in a process group of its own, so that stopping
// it stops whatever it started too and a signal to the agent's terminal
// group does not reach it; and the task gets SIGTERM if the agent dies, so
// an agent started again never finds an unknown copy still running (one
// copy per instance).
func taskProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
