package infra

import (
	"context"

	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// The commit statuses of a rollback after it ended or was held: each
// change of what the rollback waits for is posted, so that
// gantry/rollback: <path> never stays pending or asks an operator for a
// choice already made.

// rollbackAbortStatus posts, as AbortRun ends the run, the status of
// rollback x (x as it was before the abort): one not yet ended is aborted;
// one held for an operator is no longer retried or resolved in Gantry.
func (s *Service) rollbackAbortStatus(ctx context.Context, tx jobs.Tx, run *models.Run, x *models.Execution, actor string) error {
	if x.RollbackOf == nil || x.Status == models.ExecSucceeded || x.Status == models.ExecAborted {
		return nil
	}
	state, description := github.StateError, "rollback aborted by "+actor+": what it had not destroyed is left"
	if x.Status == models.ExecFailed {
		rb, err := models.RollbackByExecution(ctx, tx, x.ID)
		if err != nil || rb.Resolved() {
			return err
		}
		state, description = github.StateFailure, "rollback failed and its run was aborted by "+actor+": destroy what is left by hand"
	}
	return s.rollbackStatus(ctx, tx, run, x, state, description)
}

// rollbackStatus is queueRollbackStatus reading the run's repository.
func (s *Service) rollbackStatus(ctx context.Context, tx jobs.Tx, run *models.Run, x *models.Execution, state github.State, description string) error {
	repo, err := models.RepositoryByName(ctx, tx, run.Repository)
	if err != nil {
		return err
	}
	return s.queueRollbackStatus(ctx, tx, repo, run, x, state, description)
}
