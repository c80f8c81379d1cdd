package infra

import (
	"context"
	"fmt"
	"strings"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// What an operator may choose for an interrupted apply.
const (
	ChoiceFailed    = "failed"     // mark as failed: what depends on it is aborted
	ChoiceApplied   = "applied"    // mark as applied: what depends on it starts
	ChoicePlanAgain = "plan-again" // plan again at the merge commit, and vote again
)

// InterruptedExplanation is what pages say of an interrupted apply.
const InterruptedExplanation = "The apply was interrupted (its worker stopped) and its outcome is unknown: " +
	"Gantry will not apply it again on its own. Check the infrastructure, then choose."

// interrupt holds an execution whose apply began and recorded no outcome
// (the caller locked its run): it stays running at the step interrupted,
// its partial apply output kept, its run waiting (the merge lock held)
// until an operator chooses with ResolveInterrupted.
func (s *Service) interrupt(ctx context.Context, tx jobs.Tx, run *models.Run, x *models.Execution, why string) error {
	x.Step = models.StepInterrupted
	if err := models.UpdateExecution(ctx, tx, x, "step"); err != nil {
		return err
	}
	return s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventExecutionInterrupted, "gantry",
		map[string]any{"cfg_path": x.CfgPath, "reason": why, "apply_started_at": x.ApplyStartedAt})
}

// ResolveInterrupted is an operator's choice for an interrupted apply:
// ChoiceFailed fails it (what depends on it is aborted, and a run with
// nothing left ends failed), ChoiceApplied succeeds it (what depends on it
// starts), ChoicePlanAgain plans it again at the merge commit (the old
// votes set aside, the voters asked again). The choice is logged with who
// made it and why, under the run's lock as votes and aborts are.
func (s *Service) ResolveInterrupted(ctx context.Context, executionID, choice, actor, reason string) error {
	if choice != ChoiceFailed && choice != ChoiceApplied && choice != ChoicePlanAgain {
		return apperr.Field("choice", fmt.Sprintf("must be %s, %s or %s", ChoiceFailed, ChoiceApplied, ChoicePlanAgain))
	}
	return s.operatorChoice(ctx, executionID, reason, func(ctx context.Context, tx jobs.Tx, run *models.Run, x *models.Execution, reason string) error {
		if x.Status != models.ExecRunning || x.Step != models.StepInterrupted {
			return apperr.New(apperr.Conflict, "Execution %s is %s: only an interrupted apply waits for this choice.", x.ExecutionID, describe(x))
		}
		if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventExecutionResolved, actor,
			map[string]any{"cfg_path": x.CfgPath, "choice": choice, "reason": reason}); err != nil {
			return err
		}
		why := "the interrupted apply was marked as " + choice + " by " + actor
		if reason != "" {
			why += ": " + reason
		}
		switch choice {
		case ChoiceFailed:
			return s.finish(ctx, tx, run, x, false, why, actor)
		case ChoiceApplied:
			return s.finish(ctx, tx, run, x, true, "", actor)
		}
		return s.planAgain(ctx, tx, run, x, actor, 0)
	})
}

// operatorChoice is the frame of an operator's choice on an execution (an
// interrupted apply, a failed rollback): the reason checked, then, under the
// run's lock as votes and aborts are, choose with the run and the
// execution as they are now.
func (s *Service) operatorChoice(ctx context.Context, executionID, reason string,
	choose func(ctx context.Context, tx jobs.Tx, run *models.Run, x *models.Execution, reason string) error) error {
	reason = strings.TrimSpace(reason)
	if len(reason) > approvals.MaxComment {
		return apperr.Field("reason", fmt.Sprintf("is %d bytes; at most %d", len(reason), approvals.MaxComment))
	}
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		x, err := models.ExecutionByExecutionID(ctx, tx, executionID)
		if err != nil {
			return notFound(err, "execution "+executionID)
		}
		run, err := models.LockRun(ctx, tx, x.RunID)
		if err != nil {
			return err
		}
		if x, err = models.ExecutionByID(ctx, tx, x.ID); err != nil {
			return err
		}
		return choose(ctx, tx, run, x, reason)
	})
}

// planAgain sends an interrupted execution back to planning: its old
// approval is set aside (closed, its votes kept), its plan cleared, and a
// fresh plan job queued; the new plan goes to the voters as the first did.
// The interrupted apply's output stays until the next apply begins.
// retried is the log entry of a rollback's retry (else 0): a rollback
// whose plan failed has no approval to set aside, and without it the job
// would be the first plan's, which River's uniqueness skips.
func (s *Service) planAgain(ctx context.Context, tx jobs.Tx, run *models.Run, x *models.Execution, actor string, retried int64) error {
	var superseded int64
	if x.ApprovalID != nil {
		superseded = *x.ApprovalID
		if err := models.SupersedeApproval(ctx, tx, ExecutionSubject(x.ExecutionID).String()); err != nil {
			return err
		}
	}
	x.Step, x.PlanOutput, x.PlanExitCode, x.HasChanges, x.PlanFile = models.StepPlanning, "", nil, nil, nil
	x.ApprovalID, x.ApplyStartedAt, x.ApplyExitCode, x.PlanStartedAt = nil, nil, nil, nil
	if err := models.UpdateExecution(ctx, tx, x, "step", "plan_output", "plan_exit_code", "has_changes", "plan_file",
		"approval_id", "apply_started_at", "apply_exit_code", "plan_started_at"); err != nil {
		return err
	}
	if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventExecutionStarted, actor,
		map[string]any{"cfg_path": x.CfgPath, "account": x.AccountName, "planned_again": true}); err != nil {
		return err
	}
	return tx.Enqueue(ctx, jobs.PlanExecutionArgs{ExecutionID: x.ID, Superseded: superseded, Retried: retried}, nil)
}
