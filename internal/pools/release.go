package pools

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// Release ends an allocation: its credentials stop working at once, the
// environment starts cleaning. Releasing an ended allocation is harmless;
// ended says whether this call ended it. A non-empty client may release only
// its own allocations; others read as not found.
func (s *Service) Release(ctx context.Context, id uuid.UUID, client, by, outcome, actor string) (a *models.Allocation, ended bool, err error) {
	if len(outcome) > 1024 {
		return nil, false, apperr.Field("outcome", "must be at most 1024 characters")
	}
	done, err := s.admit(ctx)
	if err != nil {
		return nil, false, err
	}
	defer done()
	err = s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		ended = false
		var pool *models.Pool
		a, pool, err = models.EndActiveAllocation(ctx, tx, id, client, by, outcome)
		if errors.Is(err, models.ErrNotFound) {
			// Not active, or not this client's: an ended allocation is
			// released again harmlessly, others are not found.
			a, err = models.AllocationByID(ctx, tx, id)
			if err != nil || (client != "" && a.Client != client) {
				return allocationNotFound(models.ErrNotFound, id)
			}
			if a.Active() {
				return fmt.Errorf("releasing allocation %s: its pool %s is not registered", id, a.Pool)
			}
			return nil
		}
		if err != nil {
			return err
		}
		env := a.Environment
		kind, err := s.kind(pool.Kind)
		if err != nil {
			return err
		}
		// Revoked before the transaction commits: a 200 means the
		// credentials no longer work.
		if err := kind.Revoke(ctx, pool, env, a.CredentialRef, time.Now()); err != nil {
			return fmt.Errorf("revoking credentials of %s: %w", env.Name(), err)
		}
		released := logEntry(env, EventReleased, actor, map[string]any{
			"allocation": a.ID.String(), "ended_by": by, "outcome": outcome, "requester": a.Requester,
		})
		ended = true
		if !kind.NeedsCleanup(pool) {
			return s.returnEnvironment(ctx, tx, env, released)
		}
		if err := s.startCleanup(ctx, tx, pool, env, a.ID); err != nil {
			return err
		}
		return models.AppendLog(ctx, tx, released)
	})
	if err != nil {
		return nil, false, err
	}
	return a, ended, nil
}

// returnEnvironment makes an environment that needs no cleaning available
// again (or deregistered) and logs its release, in the releasing
// transaction.
func (s *Service) returnEnvironment(ctx context.Context, tx jobs.Tx, env *models.Environment, released *models.LogEntry) error {
	status, err := models.ReturnEnvironment(ctx, tx, env.ID, []*models.LogEntry{released})
	if err != nil || status != models.EnvDeregistered {
		return err
	}
	env.Status = status
	return s.log(ctx, tx, env, EventDeregistered, "gantry:release", nil)
}

// Expire is the allocation timeout: it releases the allocation on behalf of
// the test, or says how long to wait when the allocation was extended.
func (s *Service) Expire(ctx context.Context, id uuid.UUID) (time.Duration, error) {
	a, err := models.AllocationByID(ctx, s.Queue.DB(), id)
	if errors.Is(err, models.ErrNotFound) {
		return 0, nil // pruned long ago
	}
	if err != nil || !a.Active() {
		return 0, err
	}
	if wait := time.Until(a.ExpiresAt); wait > 0 {
		return wait, nil
	}
	_, _, err = s.Release(ctx, id, "", models.EndedByTimeout, "timeout", "gantry:allocation-timeout")
	return 0, err
}
