package daemons

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/gantryhq/gantry/internal/daemonplan"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// The scheduling manager: claiming an environment's in-progress slot,
// rolling a deployment out batch by batch and watching it end, and the
// monitors that keep active environments whole. Every step runs in one
// transaction holding the environment's row lock, so two workers never act
// on one environment at once, and a worker killed mid-step leaves nothing:
// its transaction rolls back and the job runs again.

// snapshot is what the planner needs, loaded under the environment's lock.
type snapshot struct {
	input daemonplan.Input
	tasks map[string]*models.DaemonTask // live tasks by ID
}

// clusterInstances holds each cluster's instances as read once in a
// transaction that locks every environment it reconciles (the sweep).
type clusterInstances map[string][]models.DaemonInstance

func (s *Service) snapshot(ctx context.Context, tx jobs.Tx, env *models.DaemonEnvironment, v *models.DaemonVersion, cache clusterInstances) (*snapshot, error) {
	instances, ok := cache[v.Cluster]
	if !ok {
		var err error
		if instances, err = models.DaemonClusterInstances(ctx, tx, v.Cluster); err != nil {
			return nil, err
		}
		if cache != nil {
			cache[v.Cluster] = instances
		}
	}
	tasks, err := models.LiveDaemonTasks(ctx, tx, env.ID)
	if err != nil {
		return nil, err
	}
	crashes, err := models.DaemonCrashLoops(ctx, tx, env.ID)
	if err != nil {
		return nil, err
	}
	snap := &snapshot{tasks: map[string]*models.DaemonTask{}, input: daemonplan.Input{
		Version: v.ID.String(), Attributes: v.Attributes, MinHealthyPercent: v.MinHealthyPercent,
		Crashes: map[string]daemonplan.CrashRecord{}, Backoff: s.Backoff, Now: s.now(),
	}}
	for _, in := range instances {
		snap.input.Instances = append(snap.input.Instances, daemonplan.Instance{ID: in.ID, Status: daemonplan.InstanceStatus(in.Status), Attributes: in.Attributes})
	}
	for i := range tasks {
		t := &tasks[i]
		snap.tasks[t.ID.String()] = t
		snap.input.Tasks = append(snap.input.Tasks, daemonplan.Task{ID: t.ID.String(), InstanceID: t.InstanceID,
			Version: t.VersionID.String(), State: daemonplan.TaskState(t.State), StartedAt: t.CreatedAt})
	}
	for _, c := range crashes {
		snap.input.Crashes[c.InstanceID] = daemonplan.CrashRecord{Failures: c.Failures, LastExit: c.LastExitAt}
	}
	return snap, nil
}

// applied is what one step changed, for the backend once committed.
type applied struct {
	started, stopping []models.DaemonTask
}

// apply carries out a plan as deployment d: starts (and replacements, when
// replace) become launching tasks, replaced and stopped tasks stopping.
func (s *Service) apply(ctx context.Context, tx jobs.Tx, env *models.DaemonEnvironment, d *models.DaemonDeployment, snap *snapshot, p daemonplan.Plan, replace bool, out *applied) error {
	now := s.now()
	var stopIDs []uuid.UUID
	stop := func(id, reason string) error {
		t := snap.tasks[id]
		stopIDs = append(stopIDs, t.ID)
		out.stopping = append(out.stopping, *t)
		return logTask(ctx, tx, env.Name, t, EventTaskStopping, Actor, map[string]any{"reason": reason, "by_deployment": d.ID.String()})
	}
	// A start on an instance whose newest task failed replaces that task
	// (for the death-to-running metric).
	var empty []string
	for _, st := range p.Start {
		empty = append(empty, st.InstanceID)
	}
	newest, err := models.NewestDaemonTasksOn(ctx, tx, env.ID, empty)
	if err != nil {
		return err
	}
	dead := map[string]uuid.UUID{}
	for _, t := range newest {
		if t.State == string(daemonplan.TaskFailed) {
			dead[t.InstanceID] = t.ID
		}
	}
	var starts []models.DaemonTask
	start := func(instance, reason string) error {
		t := models.DaemonTask{ID: uuid.New(), EnvironmentID: env.ID, InstanceID: instance, VersionID: d.VersionID,
			DeploymentID: d.ID, State: string(daemonplan.TaskLaunching), CreatedAt: now}
		if id, ok := dead[instance]; ok {
			t.Replaces = &id
		}
		starts = append(starts, t)
		return logTask(ctx, tx, env.Name, &t, EventTaskStarting, Actor, map[string]any{"reason": reason})
	}
	if err := s.stopTasks(ctx, tx, env, snap, p.Stop, "stopped by deployment "+d.ID.String(), out); err != nil {
		return err
	}
	for _, st := range p.Start {
		if err := start(st.InstanceID, string(st.Reason)); err != nil {
			return err
		}
	}
	if replace {
		for _, r := range p.Replace {
			if err := stop(r.TaskID, "replaced"); err != nil {
				return err
			}
			if err := start(r.InstanceID, "replace"); err != nil {
				return err
			}
		}
	}
	if err := models.StopDaemonTasks(ctx, tx, stopIDs, "stopped by deployment "+d.ID.String(), now); err != nil {
		return err
	}
	if err := models.InsertDaemonTasks(ctx, tx, starts); err != nil {
		return fmt.Errorf("starting tasks: %w", err)
	}
	out.started = append(out.started, starts...)
	return nil
}

// ClaimDeployment moves a pending deployment to in-progress when its
// environment has none in progress, and enqueues its first step. A
// deployment that cannot start yet stays pending: the deployment in its
// way enqueues the claim of the next one when it ends.
func (s *Service) ClaimDeployment(ctx context.Context, id uuid.UUID) error {
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		d, err := models.DaemonDeploymentByID(ctx, tx, id)
		if errors.Is(err, models.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		env, err := models.LockDaemonEnvironmentByID(ctx, tx, d.EnvironmentID)
		if err != nil {
			return err
		}
		return s.claim(ctx, tx, env, d)
	})
}

func (s *Service) claim(ctx context.Context, tx jobs.Tx, env *models.DaemonEnvironment, d *models.DaemonDeployment) error {
	v, err := models.DaemonVersionByID(ctx, tx, d.VersionID)
	if err != nil {
		return err
	}
	now := s.now()
	if d.Type == models.DaemonUserCreated {
		// A user's deployment plans for the whole environment, new and
		// dead instances included: it supersedes a monitor's deployment in
		// progress (which may be waiting on an instance that vanished).
		open, err := models.OpenDaemonDeployments(ctx, tx, env.ID)
		if err != nil {
			return err
		}
		for i := range open {
			o := &open[i]
			if o.State != models.DaemonInProgress || o.Type == models.DaemonUserCreated {
				continue
			}
			reason := "superseded by deployment " + d.ID.String()
			if _, err := models.EndDaemonDeployment(ctx, tx, o, models.DaemonStopped, reason, now, models.DaemonInProgress); err != nil {
				return err
			}
			if err := logEnv(ctx, tx, env.Name, o.ID, o.VersionID, EventDeploymentStopped, Actor, map[string]any{"reason": reason}); err != nil {
				return err
			}
		}
	}
	ok, err := models.ClaimDaemonDeployment(ctx, tx, d, now, now.Add(time.Duration(v.TimeoutSeconds)*time.Second))
	if err != nil || !ok {
		return err
	}
	env.Active, env.DeployedVersionID = true, &v.ID
	if err := models.UpdateDaemonEnvironment(ctx, tx, env); err != nil {
		return err
	}
	if err := logEnv(ctx, tx, env.Name, d.ID, v.ID, EventDeploymentStarted, Actor, map[string]any{"type": d.Type, "version": v.Number}); err != nil {
		return err
	}
	return tx.Enqueue(ctx, jobs.DaemonDeploymentStepArgs{DeploymentID: d.ID}, nil)
}

// claimNextInTx enqueues the claim of the environment's oldest pending
// deployment, once the in-progress one has ended.
func (s *Service) claimNextInTx(ctx context.Context, tx jobs.Tx, envID int64) error {
	open, err := models.OpenDaemonDeployments(ctx, tx, envID)
	if err != nil {
		return err
	}
	for _, d := range open {
		if d.State == models.DaemonPending {
			return tx.Enqueue(ctx, jobs.DaemonClaimDeploymentArgs{DeploymentID: d.ID}, nil)
		}
	}
	return nil
}

// StepDeployment moves an in-progress deployment on: it ends it (complete,
// unhealthy when one of its tasks failed, timed-out past its deadline) or
// starts what the planner allows now (the next batch once the previous one
// runs). It returns how long until the next look, 0 when the deployment
// has ended.
func (s *Service) StepDeployment(ctx context.Context, id uuid.UUID) (time.Duration, error) {
	var next time.Duration
	var done applied
	err := s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		next, done = 0, applied{}
		d, err := models.DaemonDeploymentByID(ctx, tx, id)
		if errors.Is(err, models.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		env, err := models.LockDaemonEnvironmentByID(ctx, tx, d.EnvironmentID)
		if err != nil {
			return err
		}
		if d, err = models.DaemonDeploymentByID(ctx, tx, id); err != nil || d.State != models.DaemonInProgress {
			return err
		}
		next, err = s.step(ctx, tx, env, d, nil, &done)
		return err
	})
	if err != nil {
		return 0, err
	}
	s.dispatch(ctx, done.started, done.stopping)
	return next, nil
}

// step is StepDeployment inside the caller's transaction, which holds the
// environment's lock.
func (s *Service) step(ctx context.Context, tx jobs.Tx, env *models.DaemonEnvironment, d *models.DaemonDeployment, cache clusterInstances, done *applied) (time.Duration, error) {
	v, err := models.DaemonVersionByID(ctx, tx, d.VersionID)
	if err != nil {
		return 0, err
	}
	own, err := models.DeploymentDaemonTasks(ctx, tx, d.ID)
	if err != nil {
		return 0, err
	}
	for _, t := range own {
		if t.State == string(daemonplan.TaskFailed) {
			return 0, s.end(ctx, tx, env, d, models.DaemonUnhealthy, failureReason(&t))
		}
	}
	now := s.now()
	if d.DeadlineAt != nil && now.After(*d.DeadlineAt) {
		return 0, s.end(ctx, tx, env, d, models.DaemonTimedOut, fmt.Sprintf("not done within %ds", v.TimeoutSeconds))
	}
	snap, err := s.snapshot(ctx, tx, env, v, cache)
	if err != nil {
		return 0, err
	}
	p := daemonplan.Make(snap.input)
	if err := retryAfterBackoff(ctx, tx, env, p); err != nil {
		return 0, err
	}
	userCreated := d.Type == models.DaemonUserCreated
	if settled(p, own, userCreated) {
		return 0, s.end(ctx, tx, env, d, models.DaemonComplete, "")
	}
	// The next batch of replacements starts only once the previous one is
	// healthy: while a task this deployment started is still launching, the
	// budget counts what runs now, and the rest of a batch would be taken for
	// a new one. Tasks for empty or failed instances replace nothing healthy
	// and do not wait.
	if len(p.Replace) > 0 && anyLaunching(own) {
		return s.stepInterval(), models.StepDaemonDeployment(ctx, tx, d.ID, d.Batches, now)
	}
	before := len(done.started)
	if err := s.apply(ctx, tx, env, d, snap, p, userCreated, done); err != nil {
		return 0, err
	}
	batches := d.Batches
	if len(done.started) > before {
		batches++
		if err := logEnv(ctx, tx, env.Name, d.ID, v.ID, EventDeploymentBatch, Actor, map[string]any{
			"batch": batches, "tasks": len(done.started) - before, "matching": p.Matching, "waiting": len(p.Waiting)}); err != nil {
			return 0, err
		}
	}
	return s.stepInterval(), models.StepDaemonDeployment(ctx, tx, d.ID, batches, now)
}

// settled says whether a deployment has nothing left to do: nothing to
// start or stop, nothing waiting for a restart, every task it started
// running, and for a user-created one no task of another version left.
func settled(p daemonplan.Plan, own []models.DaemonTask, userCreated bool) bool {
	if len(p.Start) > 0 || len(p.Stop) > 0 {
		return false
	}
	// A monitor's deployment does not wait out a crash-loop backoff: the
	// restart is a later reconcile's (retryAfterBackoff).
	if userCreated && (len(p.Backoff) > 0 || len(p.Replace) > 0 || len(p.Waiting) > 0 || p.InFlight > 0) {
		return false
	}
	return !anyLaunching(own)
}

func anyLaunching(tasks []models.DaemonTask) bool {
	for _, t := range tasks {
		if t.State == string(daemonplan.TaskLaunching) {
			return true
		}
	}
	return false
}

func failureReason(t *models.DaemonTask) string {
	why := t.Reason
	if why == "" && t.ExitCode != nil {
		why = fmt.Sprintf("exited with code %d", *t.ExitCode)
	}
	return fmt.Sprintf("task %s on %s failed: %s", t.ID, t.InstanceID, why)
}

// end finishes an in-progress deployment and lets the next pending one in.
func (s *Service) end(ctx context.Context, tx jobs.Tx, env *models.DaemonEnvironment, d *models.DaemonDeployment, state, reason string) error {
	ok, err := models.EndDaemonDeployment(ctx, tx, d, state, reason, s.now(), models.DaemonInProgress)
	if err != nil || !ok {
		return err
	}
	event := map[string]string{models.DaemonComplete: EventDeploymentComplete, models.DaemonUnhealthy: EventDeploymentUnhealthy,
		models.DaemonTimedOut: EventDeploymentTimedOut}[state]
	if err := logEnv(ctx, tx, env.Name, d.ID, d.VersionID, event, Actor, map[string]any{"reason": reason, "batches": d.Batches, "type": d.Type}); err != nil {
		return err
	}
	s.Metrics.deploymentEnded(d.Type, state)
	return s.claimNextInTx(ctx, tx, env.ID)
}

// ReconcileEnvironment is the monitor of one active environment with no
// deployment in progress: matching instances without a task get one (a
// new-instance deployment, or health-repair when only dead tasks are
// restarted; one deployment for everything found at once), and tasks on
// instances that left or no longer match are stopped. Tasks of another
// version are left to user-created deployments.
func (s *Service) ReconcileEnvironment(ctx context.Context, envID int64) error {
	var done applied
	err := s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		done = applied{}
		env, err := models.LockDaemonEnvironmentByID(ctx, tx, envID)
		if err != nil {
			return err
		}
		return s.reconcile(ctx, tx, env, nil, &done)
	})
	if err != nil {
		return err
	}
	s.dispatch(ctx, done.started, done.stopping)
	return nil
}

// reconcile is ReconcileEnvironment inside the caller's transaction, which
// holds env's lock.
func (s *Service) reconcile(ctx context.Context, tx jobs.Tx, env *models.DaemonEnvironment, cache clusterInstances, done *applied) error {
	if env.DeletedAt != nil || !env.Active || env.DeployedVersionID == nil {
		return nil
	}
	open, err := models.OpenDaemonDeployments(ctx, tx, env.ID)
	if err != nil {
		return err
	}
	for i := range open {
		if open[i].State == models.DaemonInProgress {
			// Its steps plan for the whole environment: take one now
			// rather than wait for its next look.
			_, err := s.step(ctx, tx, env, &open[i], cache, done)
			return err
		}
	}
	v, err := models.DaemonVersionByID(ctx, tx, *env.DeployedVersionID)
	if err != nil {
		return err
	}
	snap, err := s.snapshot(ctx, tx, env, v, cache)
	if err != nil {
		return err
	}
	p := daemonplan.Make(snap.input)
	if err := retryAfterBackoff(ctx, tx, env, p); err != nil {
		return err
	}
	if len(p.Start) == 0 && len(p.Stop) == 0 {
		return nil
	}
	if len(p.Start) == 0 {
		// Only cleanup: no deployment, the stops are logged per task.
		return s.applyStops(ctx, tx, env, snap, p, done)
	}
	d := &models.DaemonDeployment{ID: uuid.New(), EnvironmentID: env.ID, VersionID: v.ID, Type: models.DaemonHealthRepair, CreatedBy: Actor}
	for _, st := range p.Start {
		if st.Reason == daemonplan.StartNew {
			d.Type = models.DaemonNewInstance
		}
	}
	now := s.now()
	d.StartedAt, d.SteppedAt, d.Batches = &now, &now, 1
	deadline := now.Add(time.Duration(v.TimeoutSeconds) * time.Second)
	d.DeadlineAt = &deadline
	ok, err := models.InsertDaemonDeploymentInProgress(ctx, tx, d)
	if err != nil || !ok {
		return err
	}
	if err := logEnv(ctx, tx, env.Name, d.ID, v.ID, EventDeploymentStarted, Actor, map[string]any{"type": d.Type, "version": v.Number, "instances": len(p.Start)}); err != nil {
		return err
	}
	if err := s.apply(ctx, tx, env, d, snap, p, false, done); err != nil {
		return err
	}
	return tx.Enqueue(ctx, jobs.DaemonDeploymentStepArgs{DeploymentID: d.ID}, nil)
}

// retryAfterBackoff schedules a reconcile for when the first crash-loop
// backoff of the plan ends, so the restart happens then rather than at the
// next sweep.
func retryAfterBackoff(ctx context.Context, tx jobs.Tx, env *models.DaemonEnvironment, p daemonplan.Plan) error {
	if len(p.Backoff) == 0 {
		return nil
	}
	first := p.Backoff[0].Until
	for _, b := range p.Backoff[1:] {
		if b.Until.Before(first) {
			first = b.Until
		}
	}
	opts := jobs.DaemonReconcileArgs{}.InsertOpts()
	opts.ScheduledAt = first
	opts.UniqueOpts = river.UniqueOpts{ByArgs: true, ByPeriod: time.Second}
	return tx.Enqueue(ctx, jobs.DaemonReconcileArgs{EnvironmentID: env.ID}, &opts)
}

// applyStops stops tasks on instances that left or no longer match.
func (s *Service) applyStops(ctx context.Context, tx jobs.Tx, env *models.DaemonEnvironment, snap *snapshot, p daemonplan.Plan, out *applied) error {
	return s.stopTasks(ctx, tx, env, snap, p.Stop, "instance no longer matches", out)
}

// stopTasks stops the planner's stops: a task on an instance that is
// still in the cluster is asked to stop (stopping); one on an instance that
// has left (or never was) ends at once, since nothing can run it there.
func (s *Service) stopTasks(ctx context.Context, tx jobs.Tx, env *models.DaemonEnvironment, snap *snapshot, stops []daemonplan.Stop, reason string, out *applied) error {
	present := map[string]bool{}
	for _, in := range snap.input.Instances {
		present[in.ID] = true
	}
	var stopping, ended []uuid.UUID
	for _, st := range stops {
		t := snap.tasks[st.TaskID]
		event := EventTaskStopping
		if present[st.InstanceID] {
			stopping = append(stopping, t.ID)
			out.stopping = append(out.stopping, *t)
		} else {
			ended = append(ended, t.ID)
			event = EventTaskStopped
		}
		if err := logTask(ctx, tx, env.Name, t, event, Actor, map[string]any{"reason": string(st.Reason)}); err != nil {
			return err
		}
	}
	now := s.now()
	if err := models.EndDaemonTasks(ctx, tx, ended, "its instance left the cluster", now); err != nil {
		return err
	}
	return models.StopDaemonTasks(ctx, tx, stopping, reason, now)
}

// Sweep is the periodic pass River's leader runs: refresh every cluster's
// view from the backend (instances past their heartbeat TTL leave), start
// the pending deployments nothing is in the way of, re-enqueue steps of
// in-progress deployments nobody has stepped for long (their job was lost:
// the stale-lock sweep), and reconcile every active environment.
func (s *Service) Sweep(ctx context.Context) error {
	began := time.Now()
	db := s.Queue.DB()
	clusters, err := models.DaemonClusters(ctx, db)
	if err != nil {
		return err
	}
	refresh := map[string]bool{}
	for _, c := range clusters {
		if b := s.backendFor(c.Name); b != nil && c.Backend == b.Name() {
			refresh[c.Name] = true
		}
	}
	for name := range s.ClusterBackends {
		refresh[name] = true // an ECS cluster is known before Gantry has seen it
	}
	// A cluster that cannot be read now (ECS throttling or down) keeps its
	// last view, shown as stale; the others and the reconcile go on.
	var refreshErrs []error
	for _, name := range slices.Sorted(maps.Keys(refresh)) {
		if err := s.RefreshCluster(ctx, name); err != nil {
			refreshErrs = append(refreshErrs, fmt.Errorf("refreshing cluster %s: %w", name, err))
		}
	}
	stale, err := models.StaleDaemonDeployments(ctx, db, s.now().Add(-staleAfter(s.stepInterval())))
	if err != nil {
		return err
	}
	pending, err := models.PendingDaemonDeployments(ctx, db)
	if err != nil {
		return err
	}
	err = s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		for _, d := range stale {
			if err := tx.Enqueue(ctx, jobs.DaemonDeploymentStepArgs{DeploymentID: d.ID}, nil); err != nil {
				return err
			}
		}
		for _, d := range pending {
			if err := tx.Enqueue(ctx, jobs.DaemonClaimDeploymentArgs{DeploymentID: d.ID}, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	envs, err := models.DaemonEnvironments(ctx, db)
	if err != nil {
		return err
	}
	slices.SortFunc(envs, func(a, b models.DaemonEnvironment) int { return cmp.Compare(a.ID, b.ID) })
	// One transaction locks every active environment in id order (as
	// every other path locks one, no deadlock) and reads each cluster's
	// instances once for all of them.
	var done applied
	err = s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		done = applied{}
		cache := clusterInstances{}
		for _, e := range envs {
			if !e.Active {
				continue
			}
			env, err := models.LockDaemonEnvironmentByID(ctx, tx, e.ID)
			if err != nil {
				return err
			}
			if err := s.reconcile(ctx, tx, env, cache, &done); err != nil {
				return fmt.Errorf("reconciling %s: %w", e.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.dispatch(ctx, done.started, done.stopping)
	s.Metrics.reconciled(time.Since(began))
	return errors.Join(refreshErrs...)
}

// staleAfter is how long an in-progress deployment may go unstepped before
// the sweep takes its step job for lost.
func staleAfter(step time.Duration) time.Duration { return 10*step + 30*time.Second }

// RefreshCluster brings Gantry's view of a cluster up to date from the
// backend: instances missing from the backend's view leave (their tasks
// end), instances new to Gantry join and changed ones are recorded (for
// backends Gantry does not hear from by registration, such as ECS),
// observed task states are applied; then what is still launching or
// stopping there is dispatched again (the backend's Dispatch is
// idempotent), so a start lost to throttling or a crash is retried.
func (s *Service) RefreshCluster(ctx context.Context, cluster string) error {
	b := s.backendFor(cluster)
	view, err := b.Observe(ctx, cluster)
	if err != nil {
		return err
	}
	seen := map[string]ObservedInstance{}
	for _, in := range view.Instances {
		seen[in.ID] = in
	}
	why := "missed its heartbeat TTL"
	if b.Name() != BackendLocal {
		why = "no longer in the " + b.Name() + " cluster"
	}
	err = s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		known, err := models.DaemonClusterInstances(ctx, tx, cluster)
		if err != nil {
			return err
		}
		now := s.now()
		var leaving []string
		for _, in := range known {
			if _, ok := seen[in.ID]; !ok {
				leaving = append(leaving, in.ID)
			}
		}
		if len(leaving)+len(view.Tasks) > 0 {
			// Task changes lock the task, then its environment; the
			// steps and reconciles lock the environment, then its
			// tasks. Lock every environment with a live task here
			// first, in id order as they do, so several tasks changed
			// in one transaction cannot deadlock with them.
			if err := lockClusterEnvironments(ctx, tx, cluster); err != nil {
				return err
			}
		}
		changed := len(leaving) > 0
		for _, id := range leaving {
			if err := s.leave(ctx, tx, id, why, Actor); err != nil {
				return err
			}
		}
		if b.Name() != BackendLocal {
			byID := map[string]models.DaemonInstance{}
			for _, in := range known {
				byID[in.ID] = in
			}
			for _, o := range view.Instances {
				prev, ok := byID[o.ID]
				if ok && prev.Status == string(o.Status) && maps.Equal(prev.Attributes, o.Attributes) {
					continue
				}
				changed = true
				in := &models.DaemonInstance{ID: o.ID, Cluster: cluster, Backend: b.Name(), Hostname: o.Hostname,
					Attributes: o.Attributes, Status: string(o.Status), RegisteredAt: now, LastSeenAt: now}
				if err := models.UpsertDaemonInstance(ctx, tx, in); err != nil {
					return err
				}
				if !ok {
					if err := models.AppendLog(ctx, tx, &models.LogEntry{TargetID: "daemons/instances/" + in.ID, Event: EventInstanceRegistered, Actor: Actor,
						Detail: map[string]any{"cluster": cluster, "hostname": in.Hostname, "attributes": in.Attributes, "backend": b.Name()}}); err != nil {
						return err
					}
				}
			}
		}
		for _, t := range view.Tasks {
			if err := s.observeTask(ctx, tx, t); err != nil {
				return err
			}
		}
		if changed {
			if err := s.reconcileCluster(ctx, tx, cluster); err != nil {
				return err
			}
		}
		return models.RefreshDaemonCluster(ctx, tx, cluster, b.Name(), now)
	})
	if err != nil || b.Name() == BackendLocal {
		return err
	}
	live, err := liveTasksOnCluster(ctx, s.Queue.DB(), cluster)
	if err != nil {
		return err
	}
	var start, stop []models.DaemonTask
	for _, lt := range live {
		switch daemonplan.TaskState(lt.task.State) {
		case daemonplan.TaskLaunching:
			start = append(start, lt.task)
		case daemonplan.TaskStopping:
			stop = append(stop, lt.task)
		}
	}
	s.dispatch(ctx, start, stop)
	return nil
}

// lockClusterEnvironments locks, in id order, the environments with a live
// task on the cluster.
func lockClusterEnvironments(ctx context.Context, tx jobs.Tx, cluster string) error {
	_, names, err := models.ClusterDaemonTasks(ctx, tx, cluster)
	if err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(names)) {
		if _, err := models.LockDaemonEnvironmentByID(ctx, tx, id); err != nil {
			return err
		}
	}
	return nil
}

// observeTask applies a task state the backend reports.
func (s *Service) observeTask(ctx context.Context, tx jobs.Tx, o ObservedTask) error {
	id, err := uuid.Parse(o.ID)
	if err != nil {
		return nil // not one of Gantry's tasks
	}
	t, err := models.LockDaemonTask(ctx, tx, id)
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.transition(ctx, tx, t, o.State, nil, o.ExitCode, o.Reason, Actor)
}
