package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
)

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
