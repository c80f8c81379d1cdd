package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Drift detection: River's leader runs ScheduleDriftArgs every minute; it
// queues a DriftSweepArgs for each repository whose drift schedule is due,
// which scans the trunk and queues a DriftPlanArgs per unit. A drifted unit
// found for the first time queues a NotifyDriftArgs.

// notFinished are the job states a unique drift job is unique among: one
// waits or runs at a time, and a finished one does not keep the next out.
var notFinished = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled,
}

// ScheduleDriftArgs is the sweep that starts the drift checks that are due
// (Infra.ScheduleDrift).
type ScheduleDriftArgs struct{}

func (ScheduleDriftArgs) Kind() string { return "schedule_drift" }

// InsertOpts: one per period, however many leaders came and went.
func (ScheduleDriftArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Minute}}
}

// ScheduleDriftWorker is idempotent: a repository swept is not due again
// before its interval.
type ScheduleDriftWorker struct {
	river.WorkerDefaults[ScheduleDriftArgs]
	Infra Infra
}

func (w *ScheduleDriftWorker) Work(ctx context.Context, _ *river.Job[ScheduleDriftArgs]) error {
	return w.Infra.ScheduleDrift(ctx)
}

// DriftSweepArgs scans a repository's trunk and queues a drift check of
// each unit.
type DriftSweepArgs struct {
	Repository string `json:"repository"`
}

func (DriftSweepArgs) Kind() string { return "drift_sweep" }
func (DriftSweepArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueInfra, MaxAttempts: 5, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: notFinished}}
}

// DriftSweepWorker is idempotent: a unit whose check waits or runs gets no
// second one.
type DriftSweepWorker struct {
	river.WorkerDefaults[DriftSweepArgs]
	Infra Infra
}

func (w *DriftSweepWorker) Work(ctx context.Context, job *river.Job[DriftSweepArgs]) error {
	return w.Infra.SweepDrift(ctx, job.Args.Repository)
}

// DriftPlanArgs plans one unit of the trunk for drift (never applied).
// One job per check; a unit has at most one check waiting or running (a
// unique index of drift_checks), so a slow plan is not stacked. (Unique
// per unit in River would skip a new check's job while River has not yet
// marked the unit's previous job completed, leaving the check stranded.)
type DriftPlanArgs struct {
	CheckID    int64  `json:"check_id"`
	Repository string `json:"repository"`
	Path       string `json:"path"`
	// Requeued is the dead job this one replaces (Infra.Reconcile): River
	// lists that one as running until its rescuer ends it, and the
	// arguments differ so the two are not taken for duplicates.
	Requeued int64 `json:"requeued,omitempty"`
}

func (DriftPlanArgs) Kind() string { return "drift_plan" }
func (DriftPlanArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueInfra, MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: notFinished}}
}

// DriftPlanWorker plans again when retried; after its last attempt the
// check fails with why, shown on /infra.
type DriftPlanWorker struct {
	river.WorkerDefaults[DriftPlanArgs]
	Infra Infra
}

func (w *DriftPlanWorker) Work(ctx context.Context, job *river.Job[DriftPlanArgs]) error {
	err := w.Infra.RunDriftCheck(ctx, job.Args.CheckID)
	if err != nil && lastAttempt(job.JobRow) {
		if ferr := w.Infra.FailDriftCheck(context.WithoutCancel(ctx), job.Args.CheckID, err); ferr != nil {
			return ferr
		}
	}
	return err
}

// Timeout: the plan's own time limit plus the checkout around it.
func (w *DriftPlanWorker) Timeout(*river.Job[DriftPlanArgs]) time.Duration {
	return w.Infra.JobTimeout()
}

// NotifyDriftArgs mails a repository's drift recipients about a unit found
// drifted.
type NotifyDriftArgs struct {
	CheckID int64 `json:"check_id"`
}

func (NotifyDriftArgs) Kind() string { return "notify_drift" }
func (NotifyDriftArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueInfra, MaxAttempts: 8, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// NotifyDriftWorker may mail twice when the mail server took a message
// and the answer was lost; never not at all while attempts remain.
type NotifyDriftWorker struct {
	river.WorkerDefaults[NotifyDriftArgs]
	Infra Infra
}

func (w *NotifyDriftWorker) Work(ctx context.Context, job *river.Job[NotifyDriftArgs]) error {
	return w.Infra.NotifyDrift(ctx, job.Args.CheckID)
}
