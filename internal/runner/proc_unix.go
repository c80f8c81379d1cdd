//go:build unix

package runner

import (
	"os"
	"syscall"
	"time"
)

// groupPoll is how often a stopping command's processes are checked for
// survivors.
const groupPoll = 50 * time.Millisecond

// signalName names the signal that ended the process, if one did.
func signalName(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return ""
}

// killSupervised kills a supervisor that did not stop its command in time,
// and the command's process group.
func killSupervised(supervisor *os.Process, pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	_ = supervisor.Kill()
}
