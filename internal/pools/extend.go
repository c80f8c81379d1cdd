package pools

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// Extend moves an active allocation's expiry by later, to at most the
// pool's max_session after it started; the expiry is read under the
// allocation's lock, so two extensions add up. client (unless empty) must
// hold the allocation. It returns new credentials when the kind issues new
// ones.
func (s *Service) Extend(ctx context.Context, id uuid.UUID, by time.Duration, client, actor string) (*models.Allocation, *Credentials, error) {
	done, err := s.admit(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	var creds *Credentials
	err = s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		a, err := models.LockAllocation(ctx, tx, id)
		if err != nil {
			return allocationNotFound(err, id)
		}
		if client != "" && a.Client != client {
			return allocationNotFound(models.ErrNotFound, id)
		}
		if !a.Active() {
			return apperr.New(apperr.Conflict, "Allocation %s has ended.", id)
		}
		pool, err := models.PoolByNameAny(ctx, tx, a.Pool)
		if err != nil {
			return err
		}
		until := a.ExpiresAt.Add(by)
		limit := a.StartedAt.Add(pool.MaxSession())
		if until.After(limit) {
			return apperr.Field("duration", fmt.Sprintf("the pool allows at most %s per allocation: until %s", pool.MaxSession(), limit.UTC().Format(time.RFC3339)))
		}
		if !until.After(a.ExpiresAt) {
			return apperr.Field("duration", "must move the expiry later than "+a.ExpiresAt.UTC().Format(time.RFC3339))
		}
		env, err := models.EnvironmentByID(ctx, tx, a.EnvironmentID)
		if err != nil {
			return err
		}
		kind, err := s.kind(pool.Kind)
		if err != nil {
			return err
		}
		newCreds, ref, err := kind.Extend(ctx, pool, env, a.CredentialRef, a.ID.String(), until)
		if err != nil {
			return fmt.Errorf("extending credentials of %s: %w", env.Name(), err)
		}
		creds = newCreds
		if ref != a.CredentialRef {
			if err := models.SetCredentialRef(ctx, tx, id, ref); err != nil {
				return err
			}
		}
		if err := models.ExtendAllocation(ctx, tx, id, until); err != nil {
			return err
		}
		return s.log(ctx, tx, env, EventExtended, actor, map[string]any{"allocation": id.String(), "expires_at": until})
	})
	if err != nil {
		return nil, nil, err
	}
	a, err := models.AllocationByID(ctx, s.Queue.DB(), id)
	return a, creds, err
}
