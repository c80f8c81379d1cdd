package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"
)

// SweepDeadCleanupsArgs is the sweep that queues again the cleanups whose
// worker died (EnvironmentPools.HandOnDeadCleanups); River's leader
// enqueues it every minute.
type SweepDeadCleanupsArgs struct{}

func (SweepDeadCleanupsArgs) Kind() string { return "sweep_dead_cleanups" }

// InsertOpts: one sweep per period, however many leaders came and went.
func (SweepDeadCleanupsArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Minute}}
}

// SweepDeadCleanupsWorker is idempotent: a dead cleanup it handed on is not
// found again (its heartbeat is claimed in the same transaction).
type SweepDeadCleanupsWorker struct {
	river.WorkerDefaults[SweepDeadCleanupsArgs]
	Pools EnvironmentPools
}

func (w *SweepDeadCleanupsWorker) Work(ctx context.Context, _ *river.Job[SweepDeadCleanupsArgs]) error {
	return w.Pools.HandOnDeadCleanups(ctx)
}
