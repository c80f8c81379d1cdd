//go:build unix

package runner

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// groupPoll is how often a stopping process group is checked for survivors.
const groupPoll = 50 * time.Millisecond

// stopGroup sends SIGTERM to the process group pgid and waits until the
// group's leader has exited and no other member is left, or until grace has
// passed; then it sends SIGKILL to whatever is left.
func stopGroup(pgid int, grace time.Duration, exited <-chan struct{}) {
	if err := syscall.Kill(-pgid, syscall.SIGTERM); errors.Is(err, syscall.ESRCH) {
		return // nobody left
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(groupPoll)
	defer tick.Stop()
	for {
		select {
		case <-exited:
			exited = nil
		case <-tick.C:
		case <-deadline.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return
		}
		if exited == nil && !groupAlive(pgid) {
			return
		}
	}
}

// signalName names the signal that ended the process, if one did.
func signalName(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return ""
}
