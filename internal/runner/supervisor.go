//go:build unix

package runner

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// A command does not run as Gantry's child but as the child of a small
// supervisor: Gantry's own executable started again in a hidden mode
// (supervisorEnv). The supervisor outlives Gantry by as long as it takes to
// stop the command, which is what a parent-death signal alone cannot do: a
// signal reaches only the direct child, and terraform's own children (a
// local-exec `sh -c …`) would run on as orphans after a kill -9 of the
// worker. The supervisor
//   - is a child subreaper (Linux), so every descendant that is orphaned —
//     also one that called setsid() to leave the command's process group —
//     becomes its child rather than init's, and is stopped and reaped by it;
//   - starts the command in a process group of its own, with a parent-death
//     signal (SIGKILL) in case the supervisor itself is killed;
//   - stops the whole tree (SIGTERM to the group and to every descendant,
//     SIGKILL after the grace) when Gantry asks, when Gantry dies (the
//     control pipe ends: the kernel closes Gantry's end, also on kill -9),
//     when it is signalled, and when the command exits leaving processes
//     behind;
//   - reports the command's pid and, once nothing of it is left, its exit
//     status on the report pipe, then exits.
//
// Gantry's death is detected by the control pipe rather than by a
// parent-death signal on the supervisor: Linux sends that signal when the
// OS thread that started the child exits, which in a Go program is not the
// process exiting.

// supervisorEnv marks a process started by Run as a command's supervisor. It
// is removed from the environment the command gets.
const supervisorEnv = "GANTRY_RUNNER_SUPERVISOR"

// supervisorName is the supervisor's argv[0], what ps shows.
const supervisorName = "gantry-supervise"

// The supervisor's inherited files: ExtraFiles 0 and 1 of Run's exec.Cmd.
const (
	controlFD = 3 // read end: "stop" lines from Gantry; EOF when Gantry is gone
	reportFD  = 4 // write end: supervisorReport lines to Gantry
)

// stopRequest is the line Gantry writes on the control pipe to stop the
// command.
const stopRequest = "stop"

// supervisorReport is one line the supervisor writes on the report pipe:
// first the command's pid (or why it could not start), then how it ended.
type supervisorReport struct {
	PID      int    `json:"pid,omitempty"`
	StartErr string `json:"start_error,omitempty"`
	Exited   bool   `json:"exited,omitempty"`
	ExitCode int    `json:"exit_code,omitempty"`
	Signal   int    `json:"signal,omitempty"`
}

// A binary that runs commands through Run is also their supervisor: when
// started in the hidden mode it supervises and exits before main runs.
// It exits with syscall.Exit: there is nothing to flush, and os.Exit would
// let a race-detector build linger a second at exit, on every command.
func init() {
	if os.Getenv(supervisorEnv) == "1" {
		syscall.Exit(supervise(os.Args[1:]))
	}
}

// supervisorArgs is the supervisor's command line: its name, the kill grace,
// the executable's path, then the command's argv.
func supervisorArgs(grace time.Duration, path string, argv []string) []string {
	return append([]string{supervisorName, grace.String(), path}, argv...)
}

// supervise runs the command given by args (grace, path, argv...) and
// returns the supervisor's exit code: 0 once it reported how the command
// ended, 2 when it could not even report.
func supervise(args []string) int {
	// The command's parent-death signal is tied to the thread that starts
	// it: this one, kept for the supervisor's whole life.
	runtime.LockOSThread()
	control := os.NewFile(controlFD, "control")
	reportTo := os.NewFile(reportFD, "report")
	syscall.CloseOnExec(controlFD)
	syscall.CloseOnExec(reportFD)
	report := func(r supervisorReport) {
		b, _ := json.Marshal(r)
		_, _ = reportTo.Write(append(b, '\n'))
	}
	if len(args) < 3 {
		report(supervisorReport{StartErr: "supervisor: want grace, path and argv"})
		return 2
	}
	grace, err := time.ParseDuration(args[0])
	if err != nil {
		report(supervisorReport{StartErr: "supervisor: " + err.Error()})
		return 2
	}
	if err := becomeSubreaper(); err != nil {
		report(supervisorReport{StartErr: "supervisor: " + err.Error()})
		return 2
	}
	// Asked to stop by a signal too (an operator's kill, a terminal's ^C).
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, supervisorEnv+"=") })
	pid, err := syscall.ForkExec(args[1], args[2:], &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys:   commandProcAttr(),
	})
	if err != nil {
		report(supervisorReport{StartErr: err.Error()})
		return 0
	}
	report(supervisorReport{PID: pid})

	stop := make(chan struct{}, 2)
	go func() {
		// Either a stop request or the end of the pipe: Gantry is gone.
		sc := bufio.NewScanner(control)
		for sc.Scan() && sc.Text() != stopRequest {
		}
		stop <- struct{}{}
	}()
	ended := treeEnded(pid)
	exited := reap(pid)

	var status syscall.WaitStatus
	commandExited := false
	stopping, killing := false, false
	var kill <-chan time.Time
	// Polling starts once there is something to poll for: the command
	// exited (is anything of it left?) or is being stopped.
	ticker := time.NewTicker(groupPoll)
	defer ticker.Stop()
	var tick <-chan time.Time
	beginStop := func() {
		if stopping {
			return
		}
		stopping, tick = true, ticker.C
		signalTree(pid, syscall.SIGTERM)
		kill = time.After(grace)
	}
	for {
		select {
		case ws, ok := <-exited:
			if !ok {
				exited = nil
				break
			}
			status, commandExited, tick = ws, true, ticker.C
			// Whatever the command left behind is stopped too.
			if !ended() {
				beginStop()
			}
		case <-stop:
			beginStop()
		case <-signals:
			beginStop()
		case <-kill:
			kill, killing = nil, true
			signalTree(pid, syscall.SIGKILL)
		case <-tick:
			if killing {
				// Descendants orphaned since the last round.
				signalTree(pid, syscall.SIGKILL)
			}
		}
		if commandExited && exited == nil && ended() {
			break
		}
	}
	r := supervisorReport{Exited: true, ExitCode: status.ExitStatus()}
	if status.Signaled() {
		r.ExitCode, r.Signal = -1, int(status.Signal())
	}
	report(r)
	return 0
}

// reap waits for every child of the supervisor: the command, and each
// descendant orphaned to it. It sends the command's wait status on the
// channel it returns, which is closed when no child is left.
func reap(command int) <-chan syscall.WaitStatus {
	out := make(chan syscall.WaitStatus, 1)
	go func() {
		defer close(out)
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, 0, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil {
				return // ECHILD: nobody left
			}
			if pid == command {
				out <- ws
			}
		}
	}()
	return out
}

// signalTree sends sig to the command's process group and to every other
// descendant of the supervisor (one that left the group).
func signalTree(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig)
	for _, pid := range descendants(os.Getpid()) {
		_ = syscall.Kill(pid, sig)
	}
}

// result turns the supervisor's last report into the command's exit code
// and the name of the signal that ended it.
func (r supervisorReport) result() (exitCode int, signal string) {
	if r.Signal != 0 {
		return -1, syscall.Signal(r.Signal).String()
	}
	return r.ExitCode, ""
}

// errNoReport is why Run fails when the supervisor ended without saying how
// the command did.
var errNoReport = errors.New("its supervisor ended without reporting how the command ended")
