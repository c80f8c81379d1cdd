package infra

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// reconcileGrace is how long work may go without a live job before the
// sweep steps in: far longer than a job takes to be inserted and picked
// up, so only work whose job is really gone is touched.
const reconcileGrace = 2 * time.Minute

// errJobGone is why the sweep ends work: its job will never run again.
var errJobGone = errors.New("its job is gone (cancelled by an administrator, or discarded after its worker died during its last attempt)")

// Reconcile finds the work of the area that no job will ever move on and
// ends it, as GiveUp would have: executions planning or applying and runs
// scanning whose job is gone fail (a run releasing its merge lock), plans
// of pull requests whose job is gone fail, and the oldest queued run of a
// repository whose lock is free is started. GiveUp covers a job's last
// attempt failing; this sweep covers a job that ended without running its
// code (River's rescuer discarding it, an administrator cancelling it).
// River's leader runs it every minute; it is idempotent: what it ends is
// no longer found.
func (s *Service) Reconcile(ctx context.Context) error {
	db := s.Queue.DB()
	before := s.now().Add(-reconcileGrace)
	xs, err := models.StrandedExecutions(ctx, db, []string{jobs.PlanExecutionArgs{}.Kind(), jobs.ApplyExecutionArgs{}.Kind()}, before)
	if err != nil {
		return err
	}
	for _, id := range xs {
		if err := s.GiveUp(ctx, jobs.GiveUp{ExecutionID: id}, errJobGone); err != nil {
			return err
		}
	}
	runs, err := models.StrandedRuns(ctx, db, jobs.StartRunArgs{}.Kind(), before)
	if err != nil {
		return err
	}
	for _, id := range runs {
		if err := s.GiveUp(ctx, jobs.GiveUp{RunID: id}, errJobGone); err != nil {
			return err
		}
	}
	plans, err := models.StrandedPlans(ctx, db, jobs.RunPRPlanArgs{}.Kind(), before)
	if err != nil {
		return err
	}
	for _, p := range plans {
		if err := s.GiveUp(ctx, jobs.GiveUp{PRPlanID: p.ID, Generation: p.Generation}, errJobGone); err != nil {
			return err
		}
	}
	waiting, err := models.WaitingRuns(ctx, db, jobs.StartRunArgs{}.Kind(), before)
	if err != nil || len(waiting) == 0 {
		return err
	}
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		for _, id := range waiting {
			if err := tx.Enqueue(ctx, jobs.StartRunArgs{RunID: id}, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// AbortRun ends a run that is not over, for an operator: nobody casts the
// votes, or the change should not go out after all. Every execution not
// yet ended is aborted (a plan or apply under way is stopped: its job is
// cancelled, which stops its command wherever it runs), the run fails and
// releases the merge lock, and the next queued run starts.
func (s *Service) AbortRun(ctx context.Context, runID int64, actor, reason string) error {
	reason = strings.TrimSpace(reason)
	if len(reason) > approvals.MaxComment {
		return apperr.Field("reason", fmt.Sprintf("is %d bytes; at most %d", len(reason), approvals.MaxComment))
	}
	why := "aborted by " + actor
	if reason != "" {
		why += ": " + reason
	}
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		run, err := models.LockRun(ctx, tx, runID)
		if err != nil {
			return notFound(err, fmt.Sprintf("run %d", runID))
		}
		if run.Ended() {
			return apperr.New(apperr.Conflict, "Run %d is %s already.", run.ID, run.Status)
		}
		if run.Status == models.RunScanning {
			return apperr.New(apperr.Conflict, "Run %d is scanning the merge; abort it once its executions are listed.", run.ID)
		}
		xs, err := models.ExecutionsOfRun(ctx, tx, run.ID)
		if err != nil {
			return err
		}
		now := s.now()
		kinds := []string{jobs.PlanExecutionArgs{}.Kind(), jobs.ApplyExecutionArgs{}.Kind()}
		for i := range xs {
			x := &xs[i]
			if x.Ended() {
				continue
			}
			if x.Status == models.ExecRunning {
				ids, err := models.LiveJobsOf(ctx, tx, kinds, "execution_id", x.ID)
				if err != nil {
					return err
				}
				for _, id := range ids {
					if err := tx.CancelJob(ctx, id); err != nil {
						return err
					}
				}
			}
			x.Status, x.FinishedAt, x.Error = models.ExecAborted, &now, why
			if err := models.UpdateExecution(ctx, tx, x, "status", "finished_at", "error"); err != nil {
				return err
			}
			if err := s.closeVotes(ctx, tx, x); err != nil {
				return err
			}
			if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventExecutionAborted, actor, map[string]any{"cfg_path": x.CfgPath, "reason": reason}); err != nil {
				return err
			}
		}
		if run.Status == models.RunQueued {
			// It never took the lock: nothing to release, but nothing
			// may start it either.
			run.Error, run.Status, run.FinishedAt = why, models.RunFailed, &now
			if err := models.UpdateRun(ctx, tx, run, "status", "finished_at", "error"); err != nil {
				return err
			}
			return s.log(ctx, tx, run, RunTarget(run.ID), EventRunAborted, actor, map[string]any{"reason": reason})
		}
		run.Error = why
		if err := s.log(ctx, tx, run, RunTarget(run.ID), EventRunAborted, actor, map[string]any{"reason": reason}); err != nil {
			return err
		}
		return s.endRun(ctx, tx, run, false)
	})
}
