package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/gantryhq/gantry/models"
)

// PruneSessionsArgs removes browser sessions past their expiry, and sign-in
// attempts too old to count for throttling.
type PruneSessionsArgs struct{}

func (PruneSessionsArgs) Kind() string { return "prune_sessions" }

// InsertOpts makes overlapping sweeps collapse into one: pruning twice at
// once would only waste a query, but the rule is "a sweep runs once".
func (PruneSessionsArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:      QueueMaintenance,
		UniqueOpts: river.UniqueOpts{ByPeriod: 5 * time.Minute},
	}
}

// PruneSessionsWorker is idempotent: deleting what is already deleted is a no-op.
type PruneSessionsWorker struct {
	river.WorkerDefaults[PruneSessionsArgs]
	DB     *models.DB
	Logger *slog.Logger
}

func (w *PruneSessionsWorker) Timeout(*river.Job[PruneSessionsArgs]) time.Duration {
	return time.Minute
}

func (w *PruneSessionsWorker) Work(ctx context.Context, _ *river.Job[PruneSessionsArgs]) error {
	n, err := models.DeleteExpiredSessions(ctx, w.DB.Bun)
	if err != nil {
		return fmt.Errorf("pruning sessions: %w", err)
	}
	if n > 0 {
		w.Logger.InfoContext(ctx, "pruned expired sessions", "count", n)
	}
	n, err = models.DeleteExpiredLoginAttempts(ctx, w.DB.Bun)
	if err != nil {
		return fmt.Errorf("pruning sign-in attempts: %w", err)
	}
	if n > 0 {
		w.Logger.InfoContext(ctx, "pruned old sign-in attempts", "count", n)
	}
	return nil
}
