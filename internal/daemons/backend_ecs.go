package daemons

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/daemonplan"
	"github.com/gantryhq/gantry/internal/ecsdaemon"
	"github.com/gantryhq/gantry/models"
)

// ECSBackend is the `ecs` backend: a cluster is an Amazon ECS cluster, an
// instance one of its container instances (Gantry's instance ID is the
// container instance's id, its hostname the EC2 instance), and a task an
// ECS task started with StartTask on that one instance, startedBy = the
// deployment and group = "daemon:" + the environment
// (docs/areas/daemons-ecs.md, "Fitting the daemons area's Backend").
//
// ECS keeps no Gantry task id, so an ECS task is matched to Gantry's task
// by (environment, instance, deployment): the database allows one
// launching or running task per (environment, instance). A STOPPED ECS
// task is only that Gantry task's end when it stopped after the Gantry task
// was created; an earlier one is a predecessor of the same deployment (a
// restart), whose end was already recorded.
type ECSBackend struct {
	Client *ecsdaemon.Client
	DB     bun.IDB
	Logger *slog.Logger // nil: failures to stop stray tasks are not logged
}

// BackendECS is the ECS backend's name.
const BackendECS = "ecs"

// ecsGroupPrefix marks a daemon environment's ECS tasks, as ECS's own
// groups are family:… and service:….
const ecsGroupPrefix = "daemon:"

// ECSGroup is the ECS task group of an environment's tasks.
func ECSGroup(environment string) string { return ecsGroupPrefix + environment }

func (b *ECSBackend) Name() string { return BackendECS }

// lastPart is the id at the end of an ECS ARN (or the id itself).
func lastPart(arn string) string { return arn[strings.LastIndex(arn, "/")+1:] }

// Observe lists the cluster's container instances and every task of the
// cluster once (ECS cannot list by group), keeping the daemon
// environments' tasks and matching them to Gantry's.
func (b *ECSBackend) Observe(ctx context.Context, cluster string) (*ClusterView, error) {
	instances, err := b.Client.Instances(ctx, cluster, nil) // Gantry filters attributes itself
	if err != nil {
		return nil, err
	}
	view := &ClusterView{}
	for _, in := range instances {
		// A DRAINING (or registering, deregistering) instance gets no new
		// task and its tasks are stopped. One whose agent is disconnected
		// stays active: ECS keeps its tasks, and a start there fails with
		// AGENT, which is retried (Dispatch).
		status := daemonplan.InstanceActive
		if in.Status != "ACTIVE" {
			status = daemonplan.InstanceDraining
		}
		view.Instances = append(view.Instances, ObservedInstance{ID: in.ID, Hostname: in.EC2InstanceID,
			Attributes: in.Attributes, Status: status})
	}
	ecsTasks, err := b.Client.ClusterTasks(ctx, cluster)
	if err != nil {
		return nil, err
	}
	live, err := liveTasksOnCluster(ctx, b.DB, cluster)
	if err != nil {
		return nil, err
	}
	// The ECS tasks of each (environment, instance, deployment).
	type key struct{ env, instance, deployment string }
	byKey := map[key][]ecsdaemon.Task{}
	for _, t := range ecsTasks {
		env, ok := strings.CutPrefix(t.Group, ecsGroupPrefix)
		if !ok {
			continue // not a daemon environment's task
		}
		k := key{env, lastPart(t.Instance), t.StartedBy}
		byKey[k] = append(byKey[k], t)
	}
	owned := map[string]bool{} // ECS task ARNs that are a live Gantry task
	for _, lt := range live {
		et, found := ownECSTask(byKey[key{lt.environment, lt.task.InstanceID, lt.task.DeploymentID.String()}], lt.task)
		if found {
			owned[et.ARN] = true
		}
		switch {
		case found && et.LastStatus == "STOPPED":
			reason := et.StoppedReason
			if et.StopCode != "" && reason == "" {
				reason = et.StopCode
			}
			view.Tasks = append(view.Tasks, ObservedTask{ID: lt.task.ID.String(), State: daemonplan.TaskFailed,
				ExitCode: et.ExitCode, Reason: "ECS: " + reason})
		case found && et.Running():
			view.Tasks = append(view.Tasks, ObservedTask{ID: lt.task.ID.String(), State: daemonplan.TaskRunning})
		case !found && lt.task.State == string(daemonplan.TaskRunning):
			// ECS has forgotten it (stopped over an hour ago, or its
			// instance went): it is dead.
			view.Tasks = append(view.Tasks, ObservedTask{ID: lt.task.ID.String(), State: daemonplan.TaskFailed,
				Reason: "ECS no longer has this task"})
		case !found && lt.task.State == string(daemonplan.TaskStopping):
			// Never started in ECS (or forgotten): nothing left to stop.
			view.Tasks = append(view.Tasks, ObservedTask{ID: lt.task.ID.String(), State: daemonplan.TaskStopped,
				Reason: "not running in ECS"})
		}
	}
	// A stray that could not be stopped now is stopped by a later pass; the
	// view is good either way.
	if err := b.stopStrays(ctx, cluster, ecsTasks, owned); err != nil && b.Logger != nil {
		b.Logger.Warn("stopping stray ECS tasks", "cluster", cluster, "err", err)
	}
	return view, nil
}

// stopStrays stops the ECS tasks of Gantry's environments that are no live
// Gantry task: a duplicate (a StartTask ECS carried out twice, or one that
// timed out and was retried) or one whose Gantry task has ended. Only
// environments this Gantry knows are touched, so another installation's
// daemons on the same cluster are left alone.
func (b *ECSBackend) stopStrays(ctx context.Context, cluster string, ecsTasks []ecsdaemon.Task, owned map[string]bool) error {
	envs, err := models.DaemonEnvironments(ctx, b.DB)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, e := range envs {
		known[ECSGroup(e.Name)] = true
	}
	var errs []error
	for _, t := range ecsTasks {
		if !known[t.Group] || owned[t.ARN] || t.LastStatus == "STOPPED" || t.DesiredStatus == "STOPPED" {
			continue
		}
		_, err := b.Client.StopTask(ctx, cluster, t.ARN, "gantry: not a task of this daemon environment (a duplicate, or its Gantry task ended)")
		if err != nil && !errors.Is(err, ecsdaemon.ErrTaskNotFound) {
			errs = append(errs, err)
			if errors.Is(err, ecsdaemon.ErrThrottled) {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// ownECSTask picks, among the ECS tasks of a Gantry task's (environment,
// instance, deployment), the one that is that Gantry task: one not stopped
// (a running one first, then the longest running, so that of a duplicate
// pair the established task is kept), else one that stopped after the
// Gantry task was created.
func ownECSTask(candidates []ecsdaemon.Task, t models.DaemonTask) (ecsdaemon.Task, bool) {
	var live, stopped *ecsdaemon.Task
	for i := range candidates {
		c := &candidates[i]
		if c.LastStatus != "STOPPED" {
			if live == nil || better(c, live) {
				live = c
			}
			continue
		}
		if (c.StoppedAt.IsZero() || !c.StoppedAt.Before(t.CreatedAt)) && (stopped == nil || c.StoppedAt.After(stopped.StoppedAt)) {
			stopped = c
		}
	}
	switch {
	case live != nil:
		return *live, true
	case stopped != nil:
		return *stopped, true
	}
	return ecsdaemon.Task{}, false
}

// better says whether a is more the established task than b.
func better(a, b *ecsdaemon.Task) bool {
	if a.Running() != b.Running() {
		return a.Running()
	}
	if !a.StartedAt.Equal(b.StartedAt) {
		return a.StartedAt.Before(b.StartedAt)
	}
	return a.ARN < b.ARN
}

// liveTask is a live Gantry task with its environment's name.
type liveTask struct {
	environment string
	task        models.DaemonTask
}

// liveTasksOnCluster are the live tasks (launching, running, stopping) of
// every environment on the cluster's instances.
func liveTasksOnCluster(ctx context.Context, db bun.IDB, cluster string) ([]liveTask, error) {
	ts, names, err := models.ClusterDaemonTasks(ctx, db, cluster)
	if err != nil {
		return nil, err
	}
	out := make([]liveTask, 0, len(ts))
	for _, t := range ts {
		out = append(out, liveTask{environment: names[t.EnvironmentID], task: t})
	}
	return out, nil
}

// StartFailures are the tasks a backend could not start for a reason that
// will not pass by retrying (ECS: RESOURCE:MEMORY, ATTRIBUTE, …): each
// task's failure reason, by task ID. The service records them as failed.
type StartFailures struct {
	Reasons map[uuid.UUID]string
	Err     error // the other errors of the same dispatch, if any
}

func (f *StartFailures) Error() string {
	msg := fmt.Sprintf("%d tasks could not start", len(f.Reasons))
	if f.Err != nil {
		msg += "; " + f.Err.Error()
	}
	return msg
}

func (f *StartFailures) Unwrap() error { return f.Err }

// Dispatch starts and stops the tasks of ECS instances (others' are
// skipped). Starts are idempotent: per deployment, the tasks it already
// has in ECS are listed once (TasksStartedBy), and an instance that has
// its task there gets no second. Throttling ends the dispatch at once (the
// next pass retries the tasks still launching or stopping, rather than
// adding to the storm); other errors are collected and the rest carries on.
func (b *ECSBackend) Dispatch(ctx context.Context, start, stop []models.DaemonTask) error {
	d := ecsDispatch{b: b, instances: map[string]*models.DaemonInstance{}, envs: map[int64]string{},
		versions: map[uuid.UUID]*models.DaemonVersion{}, started: map[string][]ecsdaemon.Task{}}
	failures := map[uuid.UUID]string{}
	var errs []error
	for _, t := range start {
		reason, err := d.start(ctx, t)
		if reason != "" {
			failures[t.ID] = reason
		}
		if err != nil {
			errs = append(errs, err)
			if errors.Is(err, ecsdaemon.ErrThrottled) {
				break
			}
		}
	}
	for _, t := range stop {
		if errors.Is(errors.Join(errs...), ecsdaemon.ErrThrottled) {
			break
		}
		if err := d.stop(ctx, t); err != nil {
			errs = append(errs, err)
		}
	}
	err := errors.Join(errs...)
	if len(failures) > 0 {
		return &StartFailures{Reasons: failures, Err: err}
	}
	return err
}

// ecsDispatch is one Dispatch call's lookups, each made once.
type ecsDispatch struct {
	b         *ECSBackend
	instances map[string]*models.DaemonInstance
	envs      map[int64]string
	versions  map[uuid.UUID]*models.DaemonVersion
	started   map[string][]ecsdaemon.Task // by cluster + " " + deployment
}

// where is the task's instance when it is an ECS one, and its
// environment's name.
func (d *ecsDispatch) where(ctx context.Context, t models.DaemonTask) (*models.DaemonInstance, string, error) {
	in, ok := d.instances[t.InstanceID]
	if !ok {
		var err error
		if in, err = models.DaemonInstanceByID(ctx, d.b.DB, t.InstanceID); err != nil {
			return nil, "", err
		}
		d.instances[t.InstanceID] = in
	}
	if in.Backend != BackendECS {
		return nil, "", nil
	}
	name, ok := d.envs[t.EnvironmentID]
	if !ok {
		// By id, deleted ones included (a deleted environment's tasks are
		// stopped); outside a transaction the row lock ends at once.
		e, err := models.LockDaemonEnvironmentByID(ctx, d.b.DB, t.EnvironmentID)
		if err != nil {
			return nil, "", err
		}
		name = e.Name
		d.envs[t.EnvironmentID] = name
	}
	return in, name, nil
}

// tasksOf is what ECS has of a deployment in a cluster, listed once.
func (d *ecsDispatch) tasksOf(ctx context.Context, cluster string, deployment uuid.UUID) ([]ecsdaemon.Task, error) {
	k := cluster + " " + deployment.String()
	if ts, ok := d.started[k]; ok {
		return ts, nil
	}
	ts, err := d.b.Client.TasksStartedBy(ctx, cluster, deployment.String())
	if err != nil {
		return nil, err
	}
	d.started[k] = ts
	return ts, nil
}

// start starts t unless ECS already has it; a refusal that retrying will
// not cure is returned as the task's failure reason.
func (d *ecsDispatch) start(ctx context.Context, t models.DaemonTask) (string, error) {
	in, env, err := d.where(ctx, t)
	if err != nil || in == nil {
		return "", err
	}
	existing, err := d.tasksOf(ctx, in.Cluster, t.DeploymentID)
	if err != nil {
		return "", err
	}
	var mine []ecsdaemon.Task
	for _, et := range existing {
		if lastPart(et.Instance) == in.ID && et.Group == ECSGroup(env) {
			mine = append(mine, et)
		}
	}
	if _, ok := ownECSTask(mine, t); ok {
		return "", nil // started by an earlier dispatch
	}
	// No surge, as with agents: a replacement starts once the task it
	// replaces has stopped (the refresh that sees it stopped dispatches
	// this start again).
	onInstance, err := models.InstanceDaemonTasks(ctx, d.b.DB, in.ID)
	if err != nil {
		return "", err
	}
	for _, other := range onInstance {
		if other.EnvironmentID == t.EnvironmentID && other.State == string(daemonplan.TaskStopping) {
			return "", nil
		}
	}
	v, ok := d.versions[t.VersionID]
	if !ok {
		if v, err = models.DaemonVersionByID(ctx, d.b.DB, t.VersionID); err != nil {
			return "", err
		}
		d.versions[t.VersionID] = v
	}
	_, err = d.b.Client.StartTask(ctx, in.Cluster, in.ID, v.TaskDefinition, t.DeploymentID.String(), ECSGroup(env))
	var refused *ecsdaemon.StartFailure
	if errors.As(err, &refused) {
		switch refused.Reason {
		case "AGENT", "MISSING":
			// The agent reconnects, or the next Observe no longer lists
			// the instance: the task stays launching.
			return "", fmt.Errorf("starting task %s on %s: %w", t.ID, in.ID, err)
		}
		reason := "ECS refused to start it: " + refused.Reason
		if refused.Detail != "" {
			reason += " (" + refused.Detail + ")"
		}
		return reason, nil
	}
	if err != nil {
		return "", fmt.Errorf("starting task %s on %s: %w", t.ID, in.ID, err)
	}
	return "", nil
}

// stop stops the ECS task of t; one ECS no longer knows is gone already.
func (d *ecsDispatch) stop(ctx context.Context, t models.DaemonTask) error {
	in, env, err := d.where(ctx, t)
	if err != nil || in == nil {
		return err
	}
	existing, err := d.tasksOf(ctx, in.Cluster, t.DeploymentID)
	if err != nil {
		return err
	}
	for _, et := range existing {
		if lastPart(et.Instance) != in.ID || et.Group != ECSGroup(env) || et.LastStatus == "STOPPED" || et.DesiredStatus == "STOPPED" {
			continue
		}
		_, err := d.b.Client.StopTask(ctx, in.Cluster, et.ARN, "gantry: "+t.Reason)
		if err != nil && !errors.Is(err, ecsdaemon.ErrTaskNotFound) {
			return fmt.Errorf("stopping task %s on %s: %w", t.ID, in.ID, err)
		}
	}
	return nil
}
