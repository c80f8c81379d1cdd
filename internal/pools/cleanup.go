package pools

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// startCleanup marks env cleaning under cleanupID and schedules the cleanup
// and its timeout, in the caller's transaction.
func (s *Service) startCleanup(ctx context.Context, tx jobs.Tx, pool *models.Pool, env *models.Environment, cleanupID uuid.UUID) error {
	if err := models.StartCleaning(ctx, tx, env.ID, cleanupID); err != nil {
		return err
	}
	if err := tx.Enqueue(ctx, jobs.CleanupEnvironmentArgs{EnvironmentID: env.ID, CleanupID: cleanupID}, nil); err != nil {
		return err
	}
	return tx.Enqueue(ctx, jobs.CleanupTimeoutArgs{EnvironmentID: env.ID, CleanupID: cleanupID},
		&river.InsertOpts{ScheduledAt: time.Now().Add(pool.CleanupTimeout())})
}

// Clean runs the cleanup cleanupID of an environment. It does nothing when
// that cleanup is no longer the current one (it timed out, or an operator
// retried), so a redelivered job cannot undo a later decision.
func (s *Service) Clean(ctx context.Context, envID int64, cleanupID uuid.UUID) error {
	db := s.Queue.DB()
	env, err := models.EnvironmentByID(ctx, db, envID)
	if err != nil {
		return err
	}
	if env.Status != models.EnvCleaning || env.CleanupID == nil || *env.CleanupID != cleanupID {
		return nil
	}
	pool, err := models.PoolByNameAny(ctx, db, env.Pool)
	if err != nil {
		return err
	}
	kind, err := s.kind(pool.Kind)
	if err != nil {
		return err
	}
	out := func(text string) {
		if err := models.AppendCleanupOutput(context.WithoutCancel(ctx), db, envID, cleanupID, text); err != nil {
			s.Logger.Warn("recording cleanup output", "environment", env.Key, "error", err)
		}
	}
	started := time.Now()
	cleanErr := kind.Clean(ctx, pool, env, out)
	if errors.Is(cleanErr, context.Canceled) && ctx.Err() != nil {
		return ctx.Err() // the worker is stopping: River retries the job
	}
	if cleanErr != nil {
		out("cleanup failed: " + cleanErr.Error() + "\n")
	}
	return s.Queue.InTx(context.WithoutCancel(ctx), func(ctx context.Context, tx jobs.Tx) error {
		after, current, err := models.FinishCleaning(ctx, tx, envID, cleanupID, cleanErr == nil)
		if err != nil || !current {
			return err
		}
		s.Metrics.cleanup(pool.Name, cleanErr == nil, time.Since(started))
		if cleanErr == nil {
			event := EventCleaned
			if after.Status == models.EnvDeregistered {
				event = EventDeregistered
			}
			return s.log(ctx, tx, after, event, "gantry:cleanup", nil)
		}
		if err := s.log(ctx, tx, after, EventCleanupFailed, "gantry:cleanup", map[string]any{"error": cleanErr.Error()}); err != nil {
			return err
		}
		return tx.Enqueue(ctx, jobs.NotifyDirtyArgs{EnvironmentID: envID, CleanupID: cleanupID, Reason: "cleanup failed: " + cleanErr.Error()}, nil)
	})
}

// CleanupTimedOut marks an environment dirty when its cleanup cleanupID is
// still running at the pool's cleanup timeout.
func (s *Service) CleanupTimedOut(ctx context.Context, envID int64, cleanupID uuid.UUID) error {
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		after, current, err := models.FinishCleaning(ctx, tx, envID, cleanupID, false)
		if err != nil || !current {
			return err
		}
		if err := s.log(ctx, tx, after, EventCleanupTimedOut, "gantry:cleanup-timeout", nil); err != nil {
			return err
		}
		return tx.Enqueue(ctx, jobs.NotifyDirtyArgs{EnvironmentID: envID, CleanupID: cleanupID, Reason: "cleanup did not finish in time"}, nil)
	})
}
