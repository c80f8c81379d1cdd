package infra

import (
	"context"
	"fmt"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// GiveUp ends what a job was for after its last attempt failed (git
// unreachable for the whole retry window, the database gone mid-apply, a
// worker killed once too often): a pull request's plan fails, an execution
// fails and aborts what depends on it, a run that could not scan fails and
// releases the merge lock. Nothing waits forever for a job that is gone.
// An apply that began is the exception: its outcome is unknown, so it is
// interrupted and waits for an operator (ResolveInterrupted).
func (s *Service) GiveUp(ctx context.Context, what jobs.GiveUp, why error) error {
	reason := fmt.Sprintf("gave up after the last retry: %v", why)
	db := s.Queue.DB()
	switch {
	case what.PRPlanID != 0:
		p, err := models.PRPlanByID(ctx, db, what.PRPlanID)
		if err != nil {
			return err
		}
		repo, err := models.RepositoryByName(ctx, db, p.Repository)
		if err != nil {
			return err
		}
		p.Status, p.Error = models.PlanFailed, reason
		return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			finished, err := models.ForceFinishPRPlan(ctx, tx, p, what.Generation)
			if err != nil || !finished {
				return err // canceled by a newer push, or queued again since
			}
			if err := s.logPlan(ctx, tx, p, EventPlanFailed, map[string]any{"error": reason}); err != nil {
				return err
			}
			if err := s.queuePlanComment(ctx, tx, repo, p.PRNumber); err != nil {
				return err
			}
			return s.queuePlanStatus(ctx, tx, repo, p)
		})
	case what.ExecutionID != 0:
		return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			x, err := models.ExecutionByID(ctx, tx, what.ExecutionID)
			if err != nil {
				return err
			}
			run, err := models.LockRun(ctx, tx, x.RunID)
			if err != nil {
				return err
			}
			if x, err = models.ExecutionByID(ctx, tx, x.ID); err != nil || x.Ended() || x.Step == models.StepInterrupted {
				return err
			}
			if x.Step == models.StepApplying && x.ApplyStartedAt != nil {
				// The apply began: its outcome is unknown, so a human decides.
				return s.interrupt(ctx, tx, run, x, reason)
			}
			return s.finish(ctx, tx, run, x, false, reason, "gantry")
		})
	case what.RunID != 0:
		return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			run, err := models.LockRun(ctx, tx, what.RunID)
			if err != nil || run.Status != models.RunScanning {
				return err
			}
			run.Error = reason
			return s.endRun(ctx, tx, run, false)
		})
	}
	return nil
}
