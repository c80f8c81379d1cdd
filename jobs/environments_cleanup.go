package jobs

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
)

// CleanupEnvironmentArgs restores an environment after an allocation (or an
// operator's retry); CleanupID names that one cleanup.
type CleanupEnvironmentArgs struct {
	EnvironmentID int64     `json:"environment_id"`
	CleanupID     uuid.UUID `json:"cleanup_id"`
	// Requeued is the job whose worker died when a sweep queued this one
	// instead (jobs.PlanExecutionArgs.Requeued says why).
	Requeued int64 `json:"requeued,omitempty"`
}

func (CleanupEnvironmentArgs) Kind() string { return "cleanup_environment" }

func (CleanupEnvironmentArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueEnvironments, MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// CleanupEnvironmentWorker is idempotent: a cleanup that is no longer the
// environment's current one does nothing. Its own time limit is the pool's
// cleanup timeout plus a margin; the CleanupTimeout job decides dirtiness.
type CleanupEnvironmentWorker struct {
	river.WorkerDefaults[CleanupEnvironmentArgs]
	Pools EnvironmentPools
}

func (w *CleanupEnvironmentWorker) Timeout(*river.Job[CleanupEnvironmentArgs]) time.Duration {
	return cleanupJobTimeout
}

func (w *CleanupEnvironmentWorker) Work(ctx context.Context, job *river.Job[CleanupEnvironmentArgs]) error {
	return w.Pools.Clean(ctx, job.Args.EnvironmentID, job.Args.CleanupID)
}

// cleanupJobTimeout bounds one cleanup attempt; the pool's cleanup timeout
// (CleanupTimeoutWorker) decides dirtiness, usually much earlier.
const cleanupJobTimeout = 6 * time.Hour
