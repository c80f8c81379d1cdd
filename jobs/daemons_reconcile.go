package jobs

import (
	"context"

	"github.com/riverqueue/river"
)

// DaemonReconcileArgs has one daemon environment look at its cluster after
// something changed there (an instance joined or left, a task ended).
type DaemonReconcileArgs struct {
	EnvironmentID int64 `json:"environment_id"`
}

func (DaemonReconcileArgs) Kind() string { return "daemon_reconcile" }

// InsertOpts: not unique, since River's uniqueness would also drop a
// reconcile asked for while one runs, and the change that asked could be
// missed; each run is cheap when there is nothing to do.
func (DaemonReconcileArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueDaemons}
}

// DaemonReconcileWorker is idempotent: it plans from the database's state
// under the environment's lock, so two at once act one after the other and
// the second finds nothing to do.
type DaemonReconcileWorker struct {
	river.WorkerDefaults[DaemonReconcileArgs]
	Daemons Daemons
}

func (w *DaemonReconcileWorker) Work(ctx context.Context, job *river.Job[DaemonReconcileArgs]) error {
	return w.Daemons.ReconcileEnvironment(ctx, job.Args.EnvironmentID)
}

// DaemonSweepArgs is the periodic full reconcile of every cluster and
// active environment, with the stale-lock sweep.
type DaemonSweepArgs struct{}

func (DaemonSweepArgs) Kind() string { return "daemon_sweep" }

func (DaemonSweepArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueDaemons, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// DaemonSweepWorker is idempotent: every part of the sweep reads the
// database's state and acts through the same locked, conditional steps as
// the event-driven jobs.
type DaemonSweepWorker struct {
	river.WorkerDefaults[DaemonSweepArgs]
	Daemons Daemons
}

func (w *DaemonSweepWorker) Work(ctx context.Context, _ *river.Job[DaemonSweepArgs]) error {
	return w.Daemons.Sweep(ctx)
}
