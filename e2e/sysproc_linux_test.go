package e2e

import "syscall"

// childProcAttr makes a process under test die with the test binary, should
// that be killed before its cleanups run.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
