package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantryhq/gantry/client"
)

func (c *cli) agentCommand() *cobra.Command {
	conn := &serverConn{cli: c, tokenHint: "a token with the agent scope, which can do nothing else " +
		"(gantry admin token create --user EMAIL --name agents --scopes agent)"}
	var cluster, id string
	var attrs []string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "agent --cluster CLUSTER [--attr NAME=VALUE …]",
		Short: "Run this machine's daemon tasks (the daemons area's local backend)",
		Long: `gantry agent makes this machine an instance of a daemons cluster: it registers
with its attributes, long-polls Gantry for the tasks of the daemon environments
whose instance group matches it, runs each as a child process in its own process
group, reports every start and exit at once, and stops the tasks it is told to.
Each poll is also its heartbeat: an agent silent past the heartbeat TTL has left
the cluster and its tasks are replaced elsewhere or cleaned up. On SIGINT or
SIGTERM it stops its tasks and leaves the cluster.

  GANTRY_SERVER  Gantry's URL (or --server)
  GANTRY_TOKEN   a token with the agent scope (or --token)

Tasks get PATH, HOME and LANG from the agent, their environment version's env,
and GANTRY_DAEMON_TASK_ID, GANTRY_DAEMON_ENVIRONMENT and GANTRY_DAEMON_INSTANCE.

With --attr host=NAME the agent also runs the pipeline steps of host NAME
whose gantry.yaml says runs_on: agent: each once, in the agent's working
directory, stopped at the step's timeout, its exit and output tail reported.
Steps get PATH, HOME and LANG, GANTRY_PIPELINE, GANTRY_REVISION, GANTRY_STAGE,
GANTRY_HOST_GROUP, GANTRY_HOST, GANTRY_ARTIFACT and GANTRY_AGENT_INSTANCE.

  gantry agent --cluster web --attr role=web --attr zone=a
  gantry agent --cluster deploy --attr host=web-1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			attributes := map[string]string{}
			for _, a := range attrs {
				name, value, _ := strings.Cut(a, "=")
				if name == "" {
					return fmt.Errorf("--attr %q: use NAME or NAME=VALUE", a)
				}
				attributes[name] = value
			}
			api, err := conn.tokenClient()
			if err != nil {
				return err
			}
			host, _ := os.Hostname()
			a := &agent{api: api, log: c.stderr, wait: wait, environ: c.environ,
				reg:   client.AgentRegistration{ID: id, Cluster: cluster, Hostname: host, Attributes: attributes},
				procs: map[string]*taskProc{}, reported: map[string]bool{}, steps: map[string]bool{}}
			return a.run(cmd.Context())
		},
	}
	conn.addFlags(cmd, false)
	cmd.Flags().StringVar(&cluster, "cluster", "", "the cluster this machine joins (required)")
	cmd.Flags().StringArrayVar(&attrs, "attr", nil, "an attribute of this machine, NAME=VALUE or NAME (repeatable)")
	cmd.Flags().StringVar(&id, "id", "", "keep this instance ID across restarts (default: a new one each start)")
	cmd.Flags().DurationVar(&wait, "poll", 20*time.Second, "how long each long poll waits for a change")
	_ = cmd.MarkFlagRequired("cluster")
	return cmd
}

// agent runs one machine's daemon tasks.
type agent struct {
	api     *client.Client
	log     io.Writer
	wait    time.Duration
	environ []string
	reg     client.AgentRegistration

	mu       sync.Mutex
	instance string
	assigned []client.AgentTask   // the last assignment, applied again when a process exits
	procs    map[string]*taskProc // running processes by task ID
	reported map[string]bool      // tasks whose exit was reported (never started again)
	steps    map[string]bool      // pipeline steps started (each runs once: agent_steps.go)

	stepsRunning sync.WaitGroup
}

// taskProc is one task's process.
type taskProc struct {
	task     client.AgentTask
	cmd      *exec.Cmd
	stopping bool
	done     chan struct{}
}

func (a *agent) logf(format string, args ...any) {
	fmt.Fprintf(a.log, "agent: "+format+"\n", args...)
}

func (a *agent) run(ctx context.Context) error {
	if err := a.register(ctx); err != nil {
		return err
	}
	tag := ""
	for ctx.Err() == nil {
		got, err := a.api.PollAgent(ctx, a.instanceID(), tag, a.wait)
		var apiErr *client.APIError
		switch {
		case ctx.Err() != nil:
		case errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound:
			// Silent past the heartbeat TTL: Gantry has ended our tasks.
			a.logf("instance %s has left the cluster (%s); stopping its tasks and registering again", a.instanceID(), apiErr.Message)
			a.stopAll()
			if err := a.register(ctx); err != nil {
				return err
			}
			tag = ""
		case err != nil:
			a.logf("polling: %v", err)
			sleep(ctx, time.Second)
		default:
			tag = got.Tag
			a.apply(ctx, got.Tasks)
			a.runSteps(ctx, got.Steps)
		}
	}
	// Shutting down: stop every task, report, leave.
	leaveCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a.stopAll()
	a.waitAll(leaveCtx)
	a.stepsRunning.Wait() // each stopped with the context, and reported
	if err := a.api.LeaveAgent(leaveCtx, a.instanceID()); err != nil {
		return fmt.Errorf("leaving the cluster: %w", err)
	}
	a.logf("instance %s left cluster %s", a.instanceID(), a.reg.Cluster)
	return nil
}

func (a *agent) instanceID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.instance
}

func (a *agent) register(ctx context.Context) error {
	for {
		got, err := a.api.RegisterAgent(ctx, a.reg)
		if err == nil {
			a.mu.Lock()
			a.instance = got.InstanceID
			a.mu.Unlock()
			a.logf("registered as instance %s of cluster %s", got.InstanceID, got.Cluster)
			return nil
		}
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && apiErr.Status < 500 && apiErr.Status != http.StatusTooManyRequests {
			return fmt.Errorf("registering: %w", err)
		}
		a.logf("registering: %v", err)
		if !sleep(ctx, 2*time.Second) {
			return ctx.Err()
		}
	}
}

// apply makes the processes match an assignment: start what should run,
// stop what should not.
func (a *agent) apply(ctx context.Context, tasks []client.AgentTask) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.assigned = tasks
	wanted := map[string]bool{}
	for _, t := range tasks {
		wanted[t.ID] = t.Run
	}
	for id, p := range a.procs {
		if !wanted[id] {
			a.stopLocked(p)
		}
	}
	for _, t := range tasks {
		if t.Run || a.procs[t.ID] != nil || a.reported[t.ID] {
			continue
		}
		// Asked to stop a task this agent does not run (it restarted):
		// nothing runs, so say so.
		a.reported[t.ID] = true
		go a.report(ctx, t.ID, client.AgentReport{State: "exited", Reason: "not running on this agent"})
	}
	for _, t := range tasks {
		if !t.Run || a.procs[t.ID] != nil || a.reported[t.ID] || a.busyLocked(t.Environment) {
			continue
		}
		a.startLocked(ctx, t)
	}
}

// busyLocked says whether a process of env still runs here: a replacement
// starts once its predecessor has exited (one copy per instance).
func (a *agent) busyLocked(env string) bool {
	for _, p := range a.procs {
		if p.task.Environment == env {
			return true
		}
	}
	return false
}

func (a *agent) startLocked(ctx context.Context, t client.AgentTask) {
	if len(t.Command) == 0 {
		a.reported[t.ID] = true
		go a.report(ctx, t.ID, client.AgentReport{State: "exited", Reason: "the task definition has no command"})
		return
	}
	cmd := exec.Command(t.Command[0], t.Command[1:]...)
	cmd.Env = a.taskEnvLocked(t)
	cmd.Stdout, cmd.Stderr = a.log, a.log
	cmd.SysProcAttr = taskProcAttr()
	if err := cmd.Start(); err != nil {
		a.logf("task %s (%s v%d) could not start: %v", t.ID, t.Environment, t.Version, err)
		a.reported[t.ID] = true
		go a.report(ctx, t.ID, client.AgentReport{State: "exited", Reason: err.Error()})
		return
	}
	p := &taskProc{task: t, cmd: cmd, done: make(chan struct{})}
	a.procs[t.ID] = p
	pid := cmd.Process.Pid
	a.logf("task %s (%s v%d) running as pid %d", t.ID, t.Environment, t.Version, pid)
	go a.report(ctx, t.ID, client.AgentReport{State: "running", PID: &pid})
	go a.watch(ctx, p)
}

// watch waits for a task's process, reports its exit at once and applies
// the last assignment again (a replacement may have been waiting).
func (a *agent) watch(ctx context.Context, p *taskProc) {
	err := p.cmd.Wait()
	stopGroup(p.cmd.Process.Pid, 0) // what the task left behind in its group
	code := p.cmd.ProcessState.ExitCode()
	reason := ""
	if err != nil {
		reason = err.Error() // "exit status 3", "signal: killed"
	}
	a.mu.Lock()
	delete(a.procs, p.task.ID)
	a.reported[p.task.ID] = true
	a.mu.Unlock()
	close(p.done)
	a.logf("task %s (%s) exited: %s", p.task.ID, p.task.Environment, firstNonEmpty(reason, "exit status 0"))
	a.mu.Lock()
	stopped := p.stopping
	a.mu.Unlock()
	// A task stopped on purpose (Gantry asked, or the agent is shutting
	// down) is stopped, not failed: it is not restarted.
	report := client.AgentReport{State: "exited", Reason: reason}
	if stopped {
		report.State = "stopped"
	}
	if code >= 0 {
		report.ExitCode = &code
	}
	reportCtx := ctx
	if ctx.Err() != nil { // shutting down: still say so
		var cancel context.CancelFunc
		reportCtx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
	}
	a.report(reportCtx, p.task.ID, report)
	if ctx.Err() == nil {
		a.mu.Lock()
		tasks := a.assigned
		a.mu.Unlock()
		a.apply(ctx, tasks)
	}
}

func (a *agent) report(ctx context.Context, taskID string, r client.AgentReport) {
	if err := a.api.ReportTask(ctx, a.instanceID(), taskID, r); err != nil {
		a.logf("reporting task %s %s: %v", taskID, r.State, err)
	}
}

// taskStopGrace is how long a task has between SIGTERM and SIGKILL.
const taskStopGrace = 10 * time.Second

// stopLocked asks a task's process group to stop.
func (a *agent) stopLocked(p *taskProc) {
	if p.stopping {
		return
	}
	p.stopping = true
	a.logf("stopping task %s (%s)", p.task.ID, p.task.Environment)
	go stopGroup(p.cmd.Process.Pid, taskStopGrace)
}

// stopAll stops every process.
func (a *agent) stopAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.procs {
		a.stopLocked(p)
	}
}

// waitAll waits until every process has exited and been reported.
func (a *agent) waitAll(ctx context.Context) {
	a.mu.Lock()
	var done []chan struct{}
	for _, p := range a.procs {
		done = append(done, p.done)
	}
	a.mu.Unlock()
	for _, d := range done {
		select {
		case <-d:
		case <-ctx.Done():
			return
		}
	}
}

// taskEnvLocked is a task's whole environment: nothing of the agent's own
// but PATH, HOME and LANG (its token stays with it).
func (a *agent) taskEnvLocked(t client.AgentTask) []string {
	env := []string{}
	for _, name := range []string{"PATH", "HOME", "LANG"} {
		for _, kv := range a.environ {
			if strings.HasPrefix(kv, name+"=") {
				env = append(env, kv)
			}
		}
	}
	for k, v := range t.Env {
		env = append(env, k+"="+v)
	}
	return append(env, "GANTRY_DAEMON_TASK_ID="+t.ID, "GANTRY_DAEMON_ENVIRONMENT="+t.Environment,
		"GANTRY_DAEMON_INSTANCE="+a.instance)
}

// sleep waits d or until ctx ends, reporting whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
