package infra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/runner"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// PlanExecution plans an execution at the merge commit and keeps the plan
// file. A plan with changes goes to its voters; one without changes
// succeeds at once; a failed one fails and aborts what depends on it.
func (s *Service) PlanExecution(ctx context.Context, id int64) error {
	db := s.Queue.DB()
	x, run, repo, err := s.loadStep(ctx, id, models.StepPlanning)
	if err != nil || x == nil {
		return err
	}
	x.PlanStartedAt, x.PlanOutput = ptr(s.now()), ""
	if err := models.UpdateExecution(ctx, db, x, "plan_started_at", "plan_output"); err != nil {
		return err
	}
	s.Metrics.planStarted(x.ReadyAt, *x.PlanStartedAt)
	ws, err := s.workspace("exec-" + x.ExecutionID)
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	planFile := filepath.Join(ws, "plan.tfplan")
	commit, err := executionCommit(ctx, db, x, run) // a rollback's may be older (rollback_runs.go)
	if err != nil {
		return err
	}
	res, runErr := s.run(ctx, ws, unitCommand{
		RepoURL: repo.URL, Commit: commit, Unit: x.CfgPath, Init: x.InitCommand, Main: x.PlanCommand,
		PlanFile: planFile, Role: x.PlanRoleARN, Session: x.ExecutionID, ECS: repo.ECS, PlanObject: planObject(x), Execution: x.ID,
	}, s.outputSink(x.ID, models.StepPlanning))
	if retryable(ctx, runErr) {
		// The worker is stopping, or git or STS failed: River plans again
		// (and after the last attempt the execution fails: GiveUp).
		return fmt.Errorf("planning %s: %w", x.ExecutionID, errors.Join(context.Cause(ctx), runErr))
	}
	ok, changes := planOutcome(x.PlanCommand, res, runErr)
	s.Metrics.command("plan", ok, time.Since(*x.PlanStartedAt))
	var saved []byte
	if ok && changes {
		if saved, err = os.ReadFile(planFile); err != nil {
			ok, runErr = false, fmt.Errorf("the plan command wrote no plan file at {plan_file}: %w", err)
		}
	}
	var beyond error // a rollback's plan destroying more than it says (rollback_scope.go)
	if ok && changes && x.RollbackOf != nil {
		if beyond = s.rollbackScope(ctx, ws, x, repo, commit, planFile); ctx.Err() != nil {
			return fmt.Errorf("checking the destroy plan of %s: %w", x.ExecutionID, context.Cause(ctx)) // River plans again
		}
	}
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		run, err := models.LockRun(ctx, tx, x.RunID)
		if err != nil {
			return err
		}
		if x, err = models.ExecutionByID(ctx, tx, id); err != nil || x.Status != models.ExecRunning || x.Step != models.StepPlanning {
			return err
		}
		x.PlanExitCode = res.mainExit()
		switch {
		case !ok:
			return s.finish(ctx, tx, run, x, false, failure("plan", res, runErr), "gantry")
		case beyond != nil:
			return s.finish(ctx, tx, run, x, false, beyond.Error(), "gantry")
		case !changes:
			x.HasChanges = &changes
			if err := models.UpdateExecution(ctx, tx, x, "plan_exit_code", "has_changes"); err != nil {
				return err
			}
			return s.finish(ctx, tx, run, x, true, "", "gantry")
		}
		a, err := s.Approvals.Open(ctx, tx, ExecutionSubject(x.ExecutionID),
			approval.Policy{Voters: x.Voters, MinApprovals: x.MinApprovalCount, MinRejections: x.MinRejectionCount})
		if err != nil {
			return err
		}
		x.HasChanges, x.PlanFile, x.ApprovalID, x.Step = &changes, saved, &a.ID, models.StepVoting
		if err := models.UpdateExecution(ctx, tx, x, "plan_exit_code", "has_changes", "plan_file", "approval_id", "step"); err != nil {
			return err
		}
		if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventExecutionPlanned, "gantry",
			map[string]any{"cfg_path": x.CfgPath, "voters": x.Voters, "min_approvals": x.MinApprovalCount}); err != nil {
			return err
		}
		for _, v := range x.Voters {
			if err := tx.Enqueue(ctx, jobs.RequestApprovalVoteArgs{Subject: ExecutionSubject(x.ExecutionID).String(), Voter: v, ApprovalID: a.ID}, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// loadStep loads an execution with its run and repository when it is
// running the step; a nil execution means it is not (decided or aborted
// meanwhile, or a duplicate job), and there is nothing to do.
func (s *Service) loadStep(ctx context.Context, id int64, step string) (*models.Execution, *models.Run, *models.Repository, error) {
	db := s.Queue.DB()
	x, err := models.ExecutionByID(ctx, db, id)
	if err != nil || x.Status != models.ExecRunning || x.Step != step {
		return nil, nil, nil, err
	}
	run, err := models.RunByID(ctx, db, x.RunID)
	if err != nil {
		return nil, nil, nil, err
	}
	repo, err := models.RepositoryByName(ctx, db, run.Repository)
	if err != nil {
		return nil, nil, nil, err
	}
	return x, run, repo, nil
}

// outputSink streams a command's output into the execution's row.
func (s *Service) outputSink(id int64, step string) runner.Sink {
	db := s.Queue.DB()
	return runner.SinkFunc(func(ctx context.Context, c runner.Chunk) error {
		return models.AppendExecutionOutput(ctx, db, id, step, c.Text)
	})
}

// finish ends an execution (the caller locked its run) and advances the run.
func (s *Service) finish(ctx context.Context, tx jobs.Tx, run *models.Run, x *models.Execution, succeeded bool, why, actor string) error {
	x.Status, x.Error, x.FinishedAt = models.ExecFailed, why, ptr(s.now())
	event := EventExecutionFailed
	if succeeded {
		x.Status, event = models.ExecSucceeded, EventExecutionSucceeded
	}
	if err := models.UpdateExecution(ctx, tx, x, "status", "error", "finished_at", "plan_exit_code", "apply_exit_code"); err != nil {
		return err
	}
	if err := s.closeVotes(ctx, tx, x); err != nil {
		return err
	}
	detail := map[string]any{"cfg_path": x.CfgPath}
	if why != "" {
		detail["error"] = why
	}
	if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), event, actor, detail); err != nil {
		return err
	}
	if x.RollbackOf != nil {
		if err := s.rollbackEnded(ctx, tx, run, x, succeeded, actor); err != nil {
			return err
		}
	}
	return s.advance(ctx, tx, run, actor)
}

// planSummary is terraform's one-line verdict ("Plan: 1 to add, …"), if the
// output has one.
func planSummary(output string) string {
	for _, line := range strings.Split(output, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "Plan:") || strings.HasPrefix(line, "No changes.") {
			return line
		}
	}
	return ""
}

// ApplyExecution applies the saved plan the voters approved, in a fresh
// checkout of the merge commit: never a new plan, and never twice (see
// interrupt).
func (s *Service) ApplyExecution(ctx context.Context, id int64) error {
	x, run, repo, err := s.loadStep(ctx, id, models.StepApplying)
	if err != nil || x == nil {
		return err
	}
	// Under the run's lock, as votes and aborts are: an execution aborted
	// since it was read is not applied.
	// An earlier attempt that began applying and recorded no outcome (its
	// worker died, or was stopped mid-apply) is never applied again: the
	// execution is interrupted, its partial output kept, for an operator.
	applying := false
	err = s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		run, err := models.LockRun(ctx, tx, x.RunID)
		if err != nil {
			return err
		}
		now, err := models.ExecutionByID(ctx, tx, x.ID)
		if err != nil || now.Status != models.ExecRunning || now.Step != models.StepApplying {
			return err
		}
		if now.ApplyStartedAt != nil {
			return s.interrupt(ctx, tx, run, now, "a later attempt of its job found the apply begun and no outcome recorded")
		}
		applying, x.ApplyOutput, x.ApplyStartedAt = true, "", ptr(s.now())
		if err := models.UpdateExecution(ctx, tx, x, "apply_output", "apply_started_at"); err != nil {
			return err
		}
		return s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventExecutionApplyStarted, "gantry",
			map[string]any{"cfg_path": x.CfgPath})
	})
	if err != nil || !applying {
		return err
	}
	ws, err := s.workspace("apply-" + x.ExecutionID)
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	planFile := filepath.Join(ws, "plan.tfplan")
	if err := os.WriteFile(planFile, x.PlanFile, 0o600); err != nil {
		return err
	}
	started := time.Now()
	commit, err := executionCommit(ctx, s.Queue.DB(), x, run) // a rollback's may be older (rollback_runs.go)
	if err != nil {
		return err
	}
	res, runErr := s.run(ctx, ws, unitCommand{
		RepoURL: repo.URL, Commit: commit, Unit: x.CfgPath, Init: x.InitCommand, Main: x.ApplyCommand,
		PlanFile: planFile, Role: x.ApplyRoleARN, Session: x.ExecutionID, ECS: repo.ECS, PlanObject: planObject(x), Execution: x.ID,
	}, s.outputSink(x.ID, models.StepApplying))
	if retryable(ctx, runErr) {
		// The worker is stopping, or git or STS failed. Before the apply
		// command started, River simply tries again; once it started, the
		// next attempt finds it interrupted and runs nothing.
		if !res.Main {
			if err := models.ClearApplyStarted(context.WithoutCancel(ctx), s.Queue.DB(), x.ID); err != nil {
				runErr = errors.Join(runErr, err)
			}
		}
		return fmt.Errorf("applying %s: %w", x.ExecutionID, errors.Join(context.Cause(ctx), runErr))
	}
	s.Metrics.command("apply", runErr == nil && res.Success(), time.Since(started))
	var created *models.NewResources // rollback.go
	var left []string                // rollback_runs.go: what a failed rollback left
	var leftUnknown string
	var rippled *rippleFound // ripple.go
	switch {
	case x.RollbackOf != nil && !(runErr == nil && res.Success()):
		left, leftUnknown = s.rollbackLeft(ctx, ws, x, repo, commit)
	case x.RollbackOf == nil && runErr == nil && res.Success():
		// A rollback's destroy records nothing and ripples nothing: its run
		// has failed, and its readers were never told of the resources.
		created, rippled = s.afterApply(ctx, ws, x, run, repo, planFile)
	case x.RollbackOf == nil && res.Main:
		// A failed apply may have created some of what it introduced:
		// recorded like a successful one's, the run's rollback destroys it.
		plan, state, err := s.showPlanAndState(ctx, ws, x, run, repo, planFile)
		created = newResourcesOf(x, plan, state, err)
	}
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		run, err := models.LockRun(ctx, tx, x.RunID)
		if err != nil {
			return err
		}
		if x, err = models.ExecutionByID(ctx, tx, id); err != nil || x.Status != models.ExecRunning || x.Step != models.StepApplying {
			return err
		}
		x.ApplyExitCode = res.mainExit()
		if runErr != nil || !res.Success() {
			if x.RollbackOf != nil {
				if err := recordRollbackLeft(ctx, tx, x.ID, left, leftUnknown); err != nil {
					return err
				}
			}
			if created != nil {
				if err := s.recordNewResources(ctx, tx, run, x, created); err != nil {
					return err
				}
			}
			return s.finish(ctx, tx, run, x, false, failure("apply", res, runErr), "gantry")
		}
		if created != nil {
			if err := s.recordNewResources(ctx, tx, run, x, created); err != nil {
				return err
			}
		}
		if err := s.ripple(ctx, tx, run, repo, x, rippled); err != nil {
			return err
		}
		return s.finish(ctx, tx, run, x, true, "", "gantry")
	})
}
