package pools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// HandOnDeadCleanups queues again, in minutes, each cleanup whose worker
// died (its heartbeat went quiet: kill -9, a lost machine): as when a worker
// is stopped mid-cleanup and River retries it, the cleanup runs again from
// the start (cleanups are made to be run again), and the pool's cleanup
// timeout still bounds the whole, after which the environment is dirty.
// The dead attempt's job is cancelled, so River never runs it again and,
// should its worker be alive after all, it stops. River's leader runs this
// every minute; it is idempotent: a claimed heartbeat is gone.
func (s *Service) HandOnDeadCleanups(ctx context.Context) error {
	interval := s.HeartbeatInterval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	quiet := jobs.QuietAfter(interval)
	dead, err := models.QuietJobs(ctx, s.Queue.DB(), []string{jobs.CleanupEnvironmentArgs{}.Kind()}, quiet)
	if err != nil {
		return err
	}
	for i := range dead {
		if err := s.handOnCleanup(ctx, &dead[i], quiet); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) handOnCleanup(ctx context.Context, q *models.QuietJob, quiet time.Duration) error {
	var args jobs.CleanupEnvironmentArgs
	if err := json.Unmarshal(q.Args, &args); err != nil {
		return fmt.Errorf("reading the arguments of cleanup job %d: %w", q.JobID, err)
	}
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		claimed, err := models.ClaimQuietJob(ctx, tx, q.JobID, q.Attempt, quiet)
		if err != nil || !claimed || !q.Running {
			return err
		}
		if err := tx.CancelJob(ctx, q.JobID); err != nil {
			return err
		}
		env, err := models.EnvironmentByID(ctx, tx, args.EnvironmentID)
		if errors.Is(err, models.ErrNotFound) {
			return nil
		}
		if err != nil || env.Status != models.EnvCleaning || env.CleanupID == nil || *env.CleanupID != args.CleanupID {
			return err // timed out, retried or marked clean meanwhile
		}
		why := fmt.Sprintf("its worker (%s) stopped: no heartbeat since %s UTC", q.Worker, q.BeatAt.UTC().Format(time.DateTime))
		if err := models.AppendCleanupOutput(ctx, tx, env.ID, args.CleanupID, "\n[gantry] "+why+"; the cleanup runs again.\n"); err != nil {
			return err
		}
		if err := s.log(ctx, tx, env, EventCleanupRequeued, "gantry:cleanup",
			map[string]any{"job": q.JobID, "worker": q.Worker, "last_heartbeat": q.BeatAt, "reason": why}); err != nil {
			return err
		}
		return tx.Enqueue(ctx, jobs.CleanupEnvironmentArgs{EnvironmentID: env.ID, CleanupID: args.CleanupID, Requeued: q.JobID}, nil)
	})
}
