package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"
)

// StartRunArgs takes the merge lock for a run and scans the merge; a run
// that finds the lock held stays queued until the holder releases it.
type StartRunArgs struct {
	RunID int64 `json:"run_id"`
}

func (StartRunArgs) Kind() string { return "start_run" }

// Not unique: a queued run is started again each time the lock is
// released. The run itself records which job scans it, so a second job
// for it does nothing.
func (StartRunArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueInfra, MaxAttempts: 5}
}

// StartRunWorker is idempotent: only a queued run (or this job's own
// scanning one) is started, under the run's and repository's row locks, and
// the merge lock is taken by a conditional insert.
type StartRunWorker struct {
	river.WorkerDefaults[StartRunArgs]
	Infra Infra
}

func (w *StartRunWorker) Timeout(*river.Job[StartRunArgs]) time.Duration { return w.Infra.JobTimeout() }

func (w *StartRunWorker) Work(ctx context.Context, job *river.Job[StartRunArgs]) error {
	return orGiveUp(ctx, w.Infra, job.JobRow, GiveUp{RunID: job.Args.RunID}, w.Infra.StartRun(ctx, job.Args.RunID, job.ID))
}
