package daemons

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/daemonplan"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// The local backend's side in Gantry: `gantry agent` registers its machine
// as an instance, then long-polls for the tasks assigned to it (each poll
// is also its heartbeat) and reports each start and exit at once. An agent
// that says goodbye, or stays silent past the heartbeat TTL, has left: its
// tasks end and the monitors act.

// Registration is what an agent sends when it starts.
type Registration struct {
	ID         string // optional: keep the instance's ID across agent restarts
	Cluster    string
	Hostname   string
	Attributes map[string]string
}

var instanceIDPattern = namePattern

// Register records an agent's machine as an active instance of its
// cluster, and has the active environments on that cluster look at it.
func (s *Service) Register(ctx context.Context, r Registration, actor string) (*models.DaemonInstance, error) {
	bad := apperr.Fields{}
	if !namePattern.MatchString(r.Cluster) {
		bad.Add("cluster", "must be 1–63 lower-case letters, digits, '-' or '_'")
	}
	if r.ID == "" {
		r.ID = "i-" + strings.ToLower(rand.Text()[:12])
	} else if !instanceIDPattern.MatchString(r.ID) {
		bad.Add("id", "must be 1–63 lower-case letters, digits, '-' or '_'")
	}
	for k, v := range r.Attributes {
		if !attributePattern.MatchString(k) || strings.Contains(k, "=") {
			bad.Add("attributes", fmt.Sprintf("%q is not an attribute name", k))
		}
		if len(v) > 256 {
			bad.Add("attributes", fmt.Sprintf("the value of %s is longer than 256 characters", k))
		}
	}
	if err := bad.Err(); err != nil {
		return nil, err
	}
	if b := s.backendFor(r.Cluster); b != nil && b.Name() != BackendLocal {
		return nil, &apperr.Error{Code: apperr.Conflict, Message: fmt.Sprintf("Cluster %s is an %s cluster: its instances come from %s, not from agents.", r.Cluster, b.Name(), b.Name()),
			Fields: map[string]string{"cluster": "is an " + b.Name() + " cluster"}}
	}
	if r.Attributes == nil {
		r.Attributes = map[string]string{}
	}
	now := s.now()
	in := &models.DaemonInstance{ID: r.ID, Cluster: r.Cluster, Backend: BackendLocal, Hostname: r.Hostname,
		Attributes: r.Attributes, Status: string(daemonplan.InstanceActive), RegisteredAt: now, LastSeenAt: now}
	err := s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		if prev, err := models.DaemonInstanceByID(ctx, tx, r.ID); err == nil && prev.Cluster != r.Cluster && prev.Status != "gone" {
			return &apperr.Error{Code: apperr.Conflict, Message: fmt.Sprintf("Instance %s is in cluster %s; it must leave before joining %s.", r.ID, prev.Cluster, r.Cluster),
				Fields: map[string]string{"id": "registered in cluster " + prev.Cluster}}
		}
		if err := models.UpsertDaemonInstance(ctx, tx, in); err != nil {
			return err
		}
		if err := models.AppendLog(ctx, tx, &models.LogEntry{TargetID: "daemons/instances/" + in.ID, Event: EventInstanceRegistered, Actor: actor,
			Detail: map[string]any{"cluster": in.Cluster, "hostname": in.Hostname, "attributes": in.Attributes}}); err != nil {
			return err
		}
		return s.reconcileCluster(ctx, tx, in.Cluster)
	})
	return in, err
}

// reconcileCluster enqueues a reconcile of every active environment on
// cluster (their instances changed).
func (s *Service) reconcileCluster(ctx context.Context, tx jobs.Tx, cluster string) error {
	envs, err := models.DaemonEnvironments(ctx, tx)
	if err != nil {
		return err
	}
	for _, e := range envs {
		if !e.Active || e.DeployedVersionID == nil {
			continue
		}
		v, err := models.DaemonVersionByID(ctx, tx, *e.DeployedVersionID)
		if err != nil {
			return err
		}
		if v.Cluster == cluster {
			if err := tx.Enqueue(ctx, jobs.DaemonReconcileArgs{EnvironmentID: e.ID}, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// AgentTask is one task an agent must run or stop.
type AgentTask struct {
	ID          uuid.UUID
	Environment string
	Version     int
	Run         bool // false: stop it
	Command     []string
	Env         map[string]string
}

// AgentStep is a pipeline host step for an agent to run once, to its
// end: its command with the placeholders filled in, run with Env and
// stopped after Timeout (docs/areas/pipelines.md).
type AgentStep struct {
	ID      uuid.UUID
	Event   string
	Target  string
	Host    string
	Attempt int
	Command []string
	Env     map[string]string
	Timeout time.Duration
}

// AgentTasks is an agent's whole assignment; Tag changes whenever it does.
// Steps are apart from Tasks so that an agent older than them ignores
// them rather than running them as daemons.
type AgentTasks struct {
	Tasks             []AgentTask
	Steps             []AgentStep
	Tag               string
	HeartbeatInterval time.Duration
}

// pollEvery is how often a long poll looks at the database for changes.
const pollEvery = 200 * time.Millisecond

// Poll is an agent's heartbeat and long poll: it returns the instance's
// tasks as soon as they differ from tag, or after wait. 404 when the
// instance has left (the agent registers again).
func (s *Service) Poll(ctx context.Context, instanceID, tag string, wait time.Duration) (*AgentTasks, error) {
	wait = min(max(wait, 0), time.Minute)
	deadline := time.Now().Add(wait)
	var lastBeat time.Time
	db := s.Queue.DB()
	host := ""
	if in, err := models.DaemonInstanceByID(ctx, db, instanceID); err == nil {
		host = in.Attributes[models.AgentHostAttribute]
	}
	for {
		if time.Since(lastBeat) >= s.heartbeatInterval()/2 {
			if err := models.TouchDaemonInstance(ctx, db, instanceID, s.now()); errors.Is(err, models.ErrNotFound) {
				return nil, apperr.New(apperr.NotFound, "Instance %s is not in any cluster (it left or was never registered): register again.", instanceID)
			} else if err != nil {
				return nil, err
			}
			lastBeat = time.Now()
		}
		out, err := s.assignment(ctx, instanceID, host)
		if err != nil {
			return nil, err
		}
		if out.Tag != tag || !time.Now().Before(deadline) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, nil
		case <-time.After(pollEvery):
		}
	}
}

func (s *Service) assignment(ctx context.Context, instanceID, host string) (*AgentTasks, error) {
	db := s.Queue.DB()
	tasks, err := models.InstanceDaemonTasks(ctx, db, instanceID)
	if err != nil {
		return nil, err
	}
	out := &AgentTasks{HeartbeatInterval: s.heartbeatInterval()}
	h := sha256.New()
	versions := map[uuid.UUID]*models.DaemonVersion{}
	envs := map[int64]string{}
	for _, t := range tasks {
		v := versions[t.VersionID]
		if v == nil {
			if v, err = models.DaemonVersionByID(ctx, db, t.VersionID); err != nil {
				return nil, err
			}
			versions[t.VersionID] = v
		}
		if _, ok := envs[t.EnvironmentID]; !ok {
			e, err := models.LockDaemonEnvironmentByID(ctx, db, t.EnvironmentID)
			if err != nil {
				return nil, err
			}
			envs[t.EnvironmentID] = e.Name
		}
		run := t.State != string(daemonplan.TaskStopping)
		out.Tasks = append(out.Tasks, AgentTask{ID: t.ID, Environment: envs[t.EnvironmentID], Version: v.Number, Run: run,
			Command: v.Command, Env: v.TaskEnv})
		fmt.Fprintf(h, "%s:%t;", t.ID, run)
	}
	// The pipeline steps of the agent's host (attribute host=<name>): the
	// waiting ones become this agent's as it polls.
	steps, err := models.TakeAgentSteps(ctx, db, instanceID, host, s.now())
	if err != nil {
		return nil, err
	}
	for _, st := range steps {
		out.Steps = append(out.Steps, AgentStep{ID: st.ID, Event: st.Event, Target: st.Target, Host: st.Host, Attempt: st.Attempt,
			Command: st.Argv, Env: st.Env, Timeout: st.Timeout()})
		fmt.Fprintf(h, "step:%s;", st.ID)
	}
	out.Tag = hex.EncodeToString(h.Sum(nil))[:16]
	return out, nil
}

// Report is what an agent says happened to a task.
type Report struct {
	State    string // "running", "exited" (on its own) or "stopped" (on purpose)
	PID      *int
	ExitCode *int
	Reason   string // why it exited or could not start ("exec: …: not found")
}

// ReportTask records a task's start or exit as its agent reports it.
func (s *Service) ReportTask(ctx context.Context, instanceID string, taskID uuid.UUID, r Report, actor string) error {
	var state daemonplan.TaskState
	switch r.State {
	case "running":
		state = daemonplan.TaskRunning
	case "exited":
		state = daemonplan.TaskFailed // a task that was stopping ends stopped (transition)
	case "stopped":
		state = daemonplan.TaskStopped
	default:
		return apperr.Field("state", "must be running, exited or stopped")
	}
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		t, err := models.LockDaemonTask(ctx, tx, taskID)
		if errors.Is(err, models.ErrNotFound) || (err == nil && t.InstanceID != instanceID) {
			return apperr.New(apperr.NotFound, "No task %s on instance %s.", taskID, instanceID)
		}
		if err != nil {
			return err
		}
		return s.transition(ctx, tx, t, state, r.PID, r.ExitCode, r.Reason, actor)
	})
}

// transition moves a task to what was observed of it: running, or ended
// (stopped when it was asked to stop, failed otherwise). A failed task is
// counted for the crash-loop backoff and its environment reconciled, which
// restarts it.
func (s *Service) transition(ctx context.Context, tx jobs.Tx, t *models.DaemonTask, state daemonplan.TaskState, pid, exitCode *int, reason, actor string) error {
	env, err := models.LockDaemonEnvironmentByID(ctx, tx, t.EnvironmentID)
	if err != nil {
		return err
	}
	now := s.now()
	switch {
	case !daemonplan.TaskState(t.State).Live():
		return nil // already ended; a late or repeated report
	case state == daemonplan.TaskRunning:
		if t.State != string(daemonplan.TaskLaunching) {
			return nil
		}
		t.State, t.RunningAt, t.PID = string(state), &now, pid
		if err := models.UpdateDaemonTask(ctx, tx, t); err != nil {
			return err
		}
		if t.Replaces != nil {
			if dead, err := models.LockDaemonTask(ctx, tx, *t.Replaces); err == nil && dead.EndedAt != nil {
				s.Metrics.replaced(now.Sub(*dead.EndedAt))
			}
		}
		if err := logTask(ctx, tx, env.Name, t, EventTaskRunning, actor, map[string]any{"pid": pid}); err != nil {
			return err
		}
	case state == daemonplan.TaskFailed || state == daemonplan.TaskStopped:
		t.EndedAt, t.ExitCode = &now, exitCode
		if reason != "" {
			t.Reason = reason
		}
		event := EventTaskStopped
		if t.State == string(daemonplan.TaskStopping) || state == daemonplan.TaskStopped {
			t.State = string(daemonplan.TaskStopped)
		} else {
			t.State, event = string(daemonplan.TaskFailed), EventTaskFailed
			if err := models.RecordDaemonCrash(ctx, tx, t.EnvironmentID, t.InstanceID, now, s.CrashReset); err != nil {
				return err
			}
		}
		if err := models.UpdateDaemonTask(ctx, tx, t); err != nil {
			return err
		}
		if err := logTask(ctx, tx, env.Name, t, event, actor, map[string]any{"exit_code": exitCode, "reason": reason}); err != nil {
			return err
		}
	default:
		return nil
	}
	return tx.Enqueue(ctx, jobs.DaemonReconcileArgs{EnvironmentID: env.ID}, nil)
}

// Leave is an agent saying goodbye: its instance leaves the cluster.
func (s *Service) Leave(ctx context.Context, instanceID, actor string) error {
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		if _, err := models.DaemonInstanceByID(ctx, tx, instanceID); errors.Is(err, models.ErrNotFound) {
			return apperr.New(apperr.NotFound, "No instance %s.", instanceID)
		}
		return s.leave(ctx, tx, instanceID, "its agent left", actor)
	})
}

// leave marks an instance gone: its tasks end (nothing runs there any
// more) and its cluster's environments are reconciled.
func (s *Service) leave(ctx context.Context, tx jobs.Tx, instanceID, reason, actor string) error {
	now := s.now()
	in, err := models.DaemonInstanceByID(ctx, tx, instanceID)
	if err != nil {
		return err
	}
	left, err := models.SetDaemonInstanceGone(ctx, tx, instanceID, now)
	if err != nil || !left {
		return err
	}
	ended, err := models.EndDaemonTasksOn(ctx, tx, instanceID, "instance left: "+reason, now)
	if err != nil {
		return err
	}
	// Lock the environments in id order, as the sweep does.
	names := map[int64]string{}
	for _, t := range ended {
		names[t.EnvironmentID] = ""
	}
	for _, id := range slices.Sorted(maps.Keys(names)) {
		e, err := models.LockDaemonEnvironmentByID(ctx, tx, id)
		if err != nil {
			return err
		}
		names[id] = e.Name
	}
	for i := range ended {
		t := &ended[i]
		if err := logTask(ctx, tx, names[t.EnvironmentID], t, EventTaskStopped, actor, map[string]any{"reason": "instance left: " + reason}); err != nil {
			return err
		}
	}
	if err := models.AppendLog(ctx, tx, &models.LogEntry{TargetID: "daemons/instances/" + instanceID, Event: EventInstanceLeft, Actor: actor,
		Detail: map[string]any{"cluster": in.Cluster, "reason": reason, "tasks_ended": len(ended)}}); err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(names)) {
		if err := tx.Enqueue(ctx, jobs.DaemonReconcileArgs{EnvironmentID: id}, nil); err != nil {
			return err
		}
	}
	return nil
}
