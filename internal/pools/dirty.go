package pools

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// RetryCleanup is the operator's "clean this dirty environment again".
func (s *Service) RetryCleanup(ctx context.Context, envID int64, actor string) error {
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		env, err := models.LockEnvironment(ctx, tx, envID)
		if err != nil {
			return apperr.New(apperr.NotFound, "No environment with id %d.", envID)
		}
		if env.Status != models.EnvDirty {
			return apperr.New(apperr.Conflict, "Environment %s is %s, not dirty.", env.Name(), env.Status)
		}
		pool, err := models.PoolByNameAny(ctx, tx, env.Pool)
		if err != nil {
			return err
		}
		if err := s.startCleanup(ctx, tx, pool, env, uuid.New()); err != nil {
			return err
		}
		return s.log(ctx, tx, env, EventCleanupRetried, actor, nil)
	})
}

// MarkClean is the operator's "this dirty environment is fine as it is". It
// returns the environment as it is now: available, or deregistered when it
// was removed from gantry.yaml meanwhile.
func (s *Service) MarkClean(ctx context.Context, envID int64, actor string) (*models.Environment, error) {
	var env *models.Environment
	err := s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		var err error
		env, err = models.MarkClean(ctx, tx, envID)
		if errors.Is(err, models.ErrNotFound) {
			return apperr.New(apperr.Conflict, "Environment %d is not dirty.", envID)
		}
		if err != nil {
			return err
		}
		return s.log(ctx, tx, env, EventMarkedClean, actor, map[string]any{"status": env.Status})
	})
	if err != nil {
		return nil, err
	}
	return env, nil
}
