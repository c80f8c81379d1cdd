package jobs

import (
	"context"
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
	// HandOnDeadCleanups queues again the cleanups whose worker died.
	HandOnDeadCleanups(ctx context.Context) error
}

// QueueEnvironments is the environment pools area's queue.
const QueueEnvironments = "environments"

// EnvironmentsArea is the environment pools area's background work.
func EnvironmentsArea(pools EnvironmentPools, logger *slog.Logger) Area {
	return Area{
		Queue: QueueConfig{Name: QueueEnvironments},
		AddWorkers: func(w *river.Workers) {
			river.AddWorker(w, &AllocationTimeoutWorker{Pools: pools})
			river.AddWorker(w, &CleanupEnvironmentWorker{Pools: pools})
			river.AddWorker(w, &CleanupTimeoutWorker{Pools: pools})
			river.AddWorker(w, &NotifyDirtyWorker{Pools: pools})
			river.AddWorker(w, &PruneAllocationsWorker{Pools: pools, Logger: logger})
			river.AddWorker(w, &SweepDeadCleanupsWorker{Pools: pools})
		},
		Periodic: []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(6*time.Hour),
				func() (river.JobArgs, *river.InsertOpts) { return PruneAllocationsArgs{}, nil },
				&river.PeriodicJobOpts{ID: "prune_allocations", RunOnStart: true}),
			river.NewPeriodicJob(river.PeriodicInterval(time.Minute),
				func() (river.JobArgs, *river.InsertOpts) { return SweepDeadCleanupsArgs{}, nil },
				&river.PeriodicJobOpts{ID: "sweep_dead_cleanups", RunOnStart: true}),
		},
		// A cleanup's worker says it is alive, so the sweep notices in
		// minutes that it died.
		Heartbeats: []string{CleanupEnvironmentArgs{}.Kind()},
		// A cleanup runs up to its pool's cleanup timeout, past which the
		// environment is dirty (CleanupEnvironmentWorker.Timeout).
		LongestJob: cleanupJobTimeout,
	}
}
