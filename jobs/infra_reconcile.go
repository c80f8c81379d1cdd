package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"
)

// ReconcileInfraArgs is the sweep that ends infrastructure work whose job
// is gone (Infra.Reconcile); River's leader enqueues it every minute.
type ReconcileInfraArgs struct{}

func (ReconcileInfraArgs) Kind() string { return "reconcile_infra" }

// InsertOpts: one sweep per period, however many leaders came and went.
func (ReconcileInfraArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Minute}}
}

// ReconcileInfraWorker is idempotent: what it ends is not found again.
type ReconcileInfraWorker struct {
	river.WorkerDefaults[ReconcileInfraArgs]
	Infra Infra
}

func (w *ReconcileInfraWorker) Work(ctx context.Context, _ *river.Job[ReconcileInfraArgs]) error {
	return w.Infra.Reconcile(ctx)
}
