package jobs

import (
	"context"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
)

// NotifyDirtyArgs tells the pool's operators (email, webhook) that an
// environment needs a human: the seed's ticket.
type NotifyDirtyArgs struct {
	EnvironmentID int64     `json:"environment_id"`
	CleanupID     uuid.UUID `json:"cleanup_id"`
	Reason        string    `json:"reason"`
}

func (NotifyDirtyArgs) Kind() string { return "notify_dirty_environment" }

func (NotifyDirtyArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueEnvironments, MaxAttempts: 8, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// NotifyDirtyWorker sends at least once; unique args keep one job per dirty
// episode. Retries past a sent email may repeat it: better twice than never.
type NotifyDirtyWorker struct {
	river.WorkerDefaults[NotifyDirtyArgs]
	Pools EnvironmentPools
}

func (w *NotifyDirtyWorker) Work(ctx context.Context, job *river.Job[NotifyDirtyArgs]) error {
	return w.Pools.NotifyDirty(ctx, job.Args.EnvironmentID, job.Args.CleanupID, job.Args.Reason)
}
