package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
)

// EnvironmentPools is what the environment pools workers need; the pools
// service implements it (declared here to keep jobs free of the areas).
type EnvironmentPools interface {
	Expire(ctx context.Context, allocationID uuid.UUID) (time.Duration, error)
	Clean(ctx context.Context, envID int64, cleanupID uuid.UUID) error
	CleanupTimedOut(ctx context.Context, envID int64, cleanupID uuid.UUID) error
	NotifyDirty(ctx context.Context, envID int64, cleanupID uuid.UUID, reason string) error
	PruneHistory(ctx context.Context) (int64, error)
}

// AllocationTimeoutArgs releases an allocation its test forgot, at its
// expiry. One per allocation, inserted with it; an extension adds none (the
// job snoozes to the new expiry), so no unique insert is needed: it would
// only cost a hash and an index entry on every allocation.
type AllocationTimeoutArgs struct {
	AllocationID uuid.UUID `json:"allocation_id"`
}

func (AllocationTimeoutArgs) Kind() string { return "allocation_timeout" }

func (AllocationTimeoutArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueEnvironments}
}

// AllocationTimeoutWorker is idempotent: an ended allocation is left alone,
// and an extended one snoozes until its new expiry.
type AllocationTimeoutWorker struct {
	river.WorkerDefaults[AllocationTimeoutArgs]
	Pools EnvironmentPools
}

func (w *AllocationTimeoutWorker) Work(ctx context.Context, job *river.Job[AllocationTimeoutArgs]) error {
	wait, err := w.Pools.Expire(ctx, job.Args.AllocationID)
	if err != nil {
		return err
	}
	if wait > 0 {
		return river.JobSnooze(wait)
	}
	return nil
}

// CleanupEnvironmentArgs restores an environment after an allocation (or an
// operator's retry); CleanupID names that one cleanup.
type CleanupEnvironmentArgs struct {
	EnvironmentID int64     `json:"environment_id"`
	CleanupID     uuid.UUID `json:"cleanup_id"`
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
	return 6 * time.Hour
}

func (w *CleanupEnvironmentWorker) Work(ctx context.Context, job *river.Job[CleanupEnvironmentArgs]) error {
	return w.Pools.Clean(ctx, job.Args.EnvironmentID, job.Args.CleanupID)
}

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

// PruneAllocationsArgs deletes allocation history past its retention.
type PruneAllocationsArgs struct{}

func (PruneAllocationsArgs) Kind() string { return "prune_allocations" }

func (PruneAllocationsArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, UniqueOpts: river.UniqueOpts{ByPeriod: 5 * time.Minute}}
}

// PruneAllocationsWorker is idempotent: deleting old rows twice is a no-op.
type PruneAllocationsWorker struct {
	river.WorkerDefaults[PruneAllocationsArgs]
	Pools  EnvironmentPools
	Logger *slog.Logger
}

func (w *PruneAllocationsWorker) Work(ctx context.Context, _ *river.Job[PruneAllocationsArgs]) error {
	n, err := w.Pools.PruneHistory(ctx)
	if err != nil {
		return fmt.Errorf("pruning allocation history: %w", err)
	}
	if n > 0 {
		w.Logger.InfoContext(ctx, "pruned allocation history", "count", n)
	}
	return nil
}
