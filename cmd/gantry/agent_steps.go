package main

import (
	"context"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/gantryhq/gantry/client"
)

// Pipeline steps (runs_on: agent) come in the same long poll as daemon
// tasks, in their own list: each runs once, in the agent's working
// directory, to its end or its timeout, and the agent reports how it
// ended with the tail of its output.

// stepOutputTail is how much of a step's output the agent sends back.
const stepOutputTail = 64 << 10

// runSteps starts the steps not started yet.
func (a *agent) runSteps(ctx context.Context, steps []client.AgentStep) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, st := range steps {
		if a.steps[st.ID] {
			continue
		}
		a.steps[st.ID] = true
		a.stepsRunning.Add(1)
		go func() {
			defer a.stepsRunning.Done()
			a.runStep(ctx, st)
		}()
	}
}

// runStep runs one step and reports its end. Stopping the agent stops the
// step too, and says so.
func (a *agent) runStep(ctx context.Context, st client.AgentStep) {
	a.logf("step %s on %s (attempt %d): running %q", st.Event, st.Target, st.Attempt, st.Command)
	report := a.execStep(ctx, st)
	reportCtx := ctx
	if ctx.Err() != nil { // shutting down: still say so
		var cancel context.CancelFunc
		reportCtx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
	}
	for {
		err := a.api.ReportStep(reportCtx, a.instanceID(), st.ID, report)
		var apiErr *client.APIError
		switch {
		case err == nil:
			a.logf("step %s on %s ended: %s", st.Event, st.Target, firstNonEmpty(report.Reason, stepEnd(report)))
			return
		case errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound:
			a.logf("step %s on %s: Gantry no longer has it for this agent (%s)", st.Event, st.Target, apiErr.Message)
			return
		}
		a.logf("reporting step %s on %s: %v", st.Event, st.Target, err)
		if !sleep(reportCtx, 2*time.Second) {
			return
		}
	}
}

// execStep runs the step's command in its own process group, stopped at
// the step's timeout or when the agent stops.
func (a *agent) execStep(ctx context.Context, st client.AgentStep) client.AgentStepReport {
	if len(st.Command) == 0 {
		return client.AgentStepReport{Reason: "the step has no command"}
	}
	out := &tailBuffer{max: stepOutputTail}
	cmd := exec.Command(st.Command[0], st.Command[1:]...)
	cmd.Env = a.stepEnv(st)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = taskProcAttr()
	cmd.WaitDelay = 5 * time.Second // a grandchild holding the output open
	if err := cmd.Start(); err != nil {
		return client.AgentStepReport{Reason: err.Error()}
	}
	pid := cmd.Process.Pid
	timeout := time.Duration(st.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Hour
	}
	timedOut, stopped := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		select {
		case <-time.After(timeout):
			close(timedOut)
			stopGroup(pid, taskStopGrace)
		case <-ctx.Done():
			close(stopped)
			stopGroup(pid, taskStopGrace)
		case <-done:
		}
	}()
	err := cmd.Wait()
	close(done)
	stopGroup(pid, 0) // what the step left behind in its group
	r := client.AgentStepReport{Output: out.String()}
	select {
	case <-timedOut:
		r.TimedOut = true
		return r
	case <-stopped:
		r.Reason = "the agent was stopped while running the step"
		return r
	default:
	}
	if code := cmd.ProcessState.ExitCode(); code >= 0 {
		r.ExitCode = &code
	} else if err != nil {
		r.Signal = strings.TrimPrefix(err.Error(), "signal: ")
	}
	return r
}

// stepEnv is a step's whole environment: PATH, HOME and LANG from the
// agent, the step's own (GANTRY_PIPELINE, GANTRY_HOST, …), and the
// instance running it.
func (a *agent) stepEnv(st client.AgentStep) []string {
	env := []string{}
	for _, name := range []string{"PATH", "HOME", "LANG"} {
		for _, kv := range a.environ {
			if strings.HasPrefix(kv, name+"=") {
				env = append(env, kv)
			}
		}
	}
	for k, v := range st.Env {
		env = append(env, k+"="+v)
	}
	return append(env, "GANTRY_AGENT_INSTANCE="+a.instanceID())
}

func stepEnd(r client.AgentStepReport) string {
	switch {
	case r.TimedOut:
		return "timed out"
	case r.Signal != "":
		return "signal " + r.Signal
	case r.ExitCode != nil && *r.ExitCode == 0:
		return "exit status 0"
	}
	return "failed"
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.ToValidUTF8(string(b.buf), "")
}
