package infra

import (
	"context"
	"encoding/json"
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

// Reconcile first hands on the work of jobs whose worker died
// (handOnDeadWork), then finds the work of the area that no job will ever
// move on and ends it, as GiveUp would have: executions planning or applying and runs
// scanning whose job is gone fail (a run releasing its merge lock), plans
// of pull requests whose job is gone fail, and the oldest queued run of a
// repository whose lock is free is started. GiveUp covers a job's last
// attempt failing; this sweep covers a job that ended without running its
// code (River's rescuer discarding it, an administrator cancelling it).
// River's leader runs it every minute; it is idempotent: what it ends is
// no longer found.
func (s *Service) Reconcile(ctx context.Context) error {
	if err := s.handOnDeadWork(ctx); err != nil {
		return err
	}
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

// QuietAfter is how long a plan or apply job's heartbeat may be quiet
// before the sweep takes its worker for dead.
func (s *Service) QuietAfter() time.Duration {
	interval := s.HeartbeatInterval
	if interval <= 0 {
		interval = DefaultHeartbeatInterval
	}
	return jobs.QuietAfter(interval)
}

// handOnDeadWork finds the running plans and applies whose heartbeat went
// quiet (their worker died: kill -9, a lost machine, a worker cut off from
// the database) and hands their work on in minutes, where River's rescue
// would wait for the longest job plus half an hour. An apply that began is
// never run again: it is interrupted for an operator (ResolveInterrupted),
// its partial output kept. A run's scan, a plan, a pull request's plan, and
// an apply that had not begun, and a drift check are queued again. The dead attempt's job is cancelled
// so that River never runs it again, and so that, should its worker be
// alive after all, it stops its command and records nothing.
func (s *Service) handOnDeadWork(ctx context.Context) error {
	quiet := s.QuietAfter()
	dead, err := models.QuietJobs(ctx, s.Queue.DB(), jobs.InfraHeartbeats(), quiet)
	if err != nil {
		return err
	}
	for i := range dead {
		if err := s.handOn(ctx, &dead[i], quiet); err != nil {
			return err
		}
	}
	return nil
}

// ExecutionHeartbeats are the heartbeats of the plan and apply jobs
// running for the executions xs, by execution row id: when each one's
// worker last said it was alive, for the pages saying why a merge lock is
// held.
func (s *Service) ExecutionHeartbeats(ctx context.Context, xs []models.Execution) (map[int64]models.JobHeartbeat, error) {
	var ids []int64
	for i := range xs {
		if xs[i].Status == models.ExecRunning && (xs[i].Step == models.StepPlanning || xs[i].Step == models.StepApplying) {
			ids = append(ids, xs[i].ID)
		}
	}
	return models.HeartbeatsOf(ctx, s.Queue.DB(), []string{jobs.PlanExecutionArgs{}.Kind(), jobs.ApplyExecutionArgs{}.Kind()}, "execution_id", ids)
}

// deadJobArgs are the fields of the arguments of every kind in
// jobs.InfraHeartbeats.
type deadJobArgs struct {
	RunID       int64 `json:"run_id"`
	ExecutionID int64 `json:"execution_id"`
	Superseded  int64 `json:"superseded"`
	Retried     int64 `json:"retried"`
	ApprovalID  int64 `json:"approval_id"`
	PlanID      int64 `json:"plan_id"`
	Generation  int   `json:"generation"`
	CheckID     int64 `json:"check_id"`
}

// handOn hands on the work of one dead job, once: the sweep that claims its
// heartbeat (still quiet) acts, in the same transaction.
func (s *Service) handOn(ctx context.Context, q *models.QuietJob, quiet time.Duration) error {
	var args deadJobArgs
	if err := json.Unmarshal(q.Args, &args); err != nil {
		return fmt.Errorf("reading the arguments of %s job %d: %w", q.Kind, q.JobID, err)
	}
	why := fmt.Sprintf("its worker (%s) stopped: no heartbeat since %s UTC", q.Worker, q.BeatAt.UTC().Format(time.DateTime))
	detail := map[string]any{"job": q.JobID, "worker": q.Worker, "last_heartbeat": q.BeatAt, "reason": why}
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		claimed, err := models.ClaimQuietJob(ctx, tx, q.JobID, q.Attempt, quiet)
		if err != nil || !claimed || !q.Running {
			// Beating again, taken by another sweep, or a row its worker
			// left behind after River had finished with the job.
			return err
		}
		if err := tx.CancelJob(ctx, q.JobID); err != nil {
			return err
		}
		switch q.Kind {
		case jobs.StartRunArgs{}.Kind():
			return s.handOnScan(ctx, tx, q, args, detail)
		case jobs.RunPRPlanArgs{}.Kind():
			return s.handOnPRPlan(ctx, tx, q, args, detail)
		case jobs.DriftPlanArgs{}.Kind():
			return s.handOnDriftCheck(ctx, tx, q, args, detail)
		case jobs.ApplyExecutionArgs{}.Kind():
			return s.handOnExecution(ctx, tx, q, args, models.StepApplying, why, detail)
		}
		return s.handOnExecution(ctx, tx, q, args, models.StepPlanning, why, detail)
	})
}

// handOnExecution interrupts an execution whose apply began under a dead
// worker, and queues again its plan, or its apply that had not begun.
func (s *Service) handOnExecution(ctx context.Context, tx jobs.Tx, q *models.QuietJob, args deadJobArgs, step, why string, detail map[string]any) error {
	x, err := models.ExecutionByID(ctx, tx, args.ExecutionID)
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	run, err := models.LockRun(ctx, tx, x.RunID)
	if err != nil {
		return err
	}
	if x, err = models.ExecutionByID(ctx, tx, x.ID); err != nil || x.Status != models.ExecRunning || x.Step != step {
		return err // it moved on (or ended) meanwhile
	}
	if step == models.StepApplying && x.ApplyStartedAt != nil {
		return s.interrupt(ctx, tx, run, x, why)
	}
	detail["cfg_path"], detail["step"] = x.CfgPath, step
	if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventExecutionRequeued, "gantry", detail); err != nil {
		return err
	}
	if step == models.StepApplying {
		return tx.Enqueue(ctx, jobs.ApplyExecutionArgs{ExecutionID: x.ID, ApprovalID: args.ApprovalID, Requeued: q.JobID}, nil)
	}
	return tx.Enqueue(ctx, jobs.PlanExecutionArgs{ExecutionID: x.ID, Superseded: args.Superseded, Retried: args.Retried, Requeued: q.JobID}, nil)
}

// handOnScan queues again the scan of a run whose worker died, and makes
// the new job the run's scanner (StartRun scans only for the job the run
// names), unless the scan ended meanwhile.
func (s *Service) handOnScan(ctx context.Context, tx jobs.Tx, q *models.QuietJob, args deadJobArgs, detail map[string]any) error {
	run, err := models.LockRun(ctx, tx, args.RunID)
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	if err != nil || run.Status != models.RunScanning || run.ScanJobID == nil || *run.ScanJobID != q.JobID {
		return err
	}
	id, err := tx.EnqueueJob(ctx, jobs.StartRunArgs{RunID: run.ID}, nil)
	if err != nil {
		return err
	}
	run.ScanJobID = &id
	if err := models.UpdateRun(ctx, tx, run, "scan_job_id"); err != nil {
		return err
	}
	return s.log(ctx, tx, run, RunTarget(run.ID), EventRunRequeued, "gantry", detail)
}

// handOnPRPlan queues again a pull request's plan whose worker died, unless
// a newer push or the end of the plan came first.
func (s *Service) handOnPRPlan(ctx context.Context, tx jobs.Tx, q *models.QuietJob, args deadJobArgs, detail map[string]any) error {
	p, err := models.PRPlanByID(ctx, tx, args.PlanID)
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if p.Generation != args.Generation || (p.Status != models.PlanQueued && p.Status != models.PlanRunning) {
		return nil
	}
	if err := s.logPlan(ctx, tx, p, EventPlanRequeued, detail); err != nil {
		return err
	}
	// The plan names its job, so that a newer push cancels this one.
	id, err := tx.EnqueueJob(ctx, jobs.RunPRPlanArgs{PlanID: p.ID, Generation: p.Generation, Requeued: q.JobID}, nil)
	if err != nil {
		return err
	}
	return models.SetPRPlanJob(ctx, tx, p.ID, id)
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
			if err := s.rollbackAbortStatus(ctx, tx, run, x, actor); err != nil { // rollback_statuses.go
				return err
			}
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
