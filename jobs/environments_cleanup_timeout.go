package jobs

import (
	"context"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
)

// CleanupTimeoutArgs marks an environment dirty when its cleanup is still
// running at the pool's cleanup timeout.
type CleanupTimeoutArgs struct {
	EnvironmentID int64     `json:"environment_id"`
	CleanupID     uuid.UUID `json:"cleanup_id"`
}

func (CleanupTimeoutArgs) Kind() string { return "cleanup_timeout" }

func (CleanupTimeoutArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueEnvironments, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// CleanupTimeoutWorker is idempotent: it changes only an environment still
// cleaning under the same cleanup.
type CleanupTimeoutWorker struct {
	river.WorkerDefaults[CleanupTimeoutArgs]
	Pools EnvironmentPools
}

func (w *CleanupTimeoutWorker) Work(ctx context.Context, job *river.Job[CleanupTimeoutArgs]) error {
	return w.Pools.CleanupTimedOut(ctx, job.Args.EnvironmentID, job.Args.CleanupID)
}
