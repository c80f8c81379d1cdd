package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"
)

// PlanExecutionArgs plans an execution whose dependencies have succeeded,
// or plans it again after an interrupted apply (Superseded is then the
// approval set aside, so the job is not taken for the first plan's).
type PlanExecutionArgs struct {
	ExecutionID int64 `json:"execution_id"`
	Superseded  int64 `json:"superseded,omitempty"`
	// Requeued is the job whose worker died when a sweep queued this one
	// instead: River lists that one as running until its rescue, and would
	// take this one for its duplicate.
	Requeued int64 `json:"requeued,omitempty"`
	// Retried is the log entry of an operator's retry of a failed
	// rollback: its plan may have failed before any approval, so only
	// this tells the job from the first plan's.
	Retried int64 `json:"retried,omitempty"`
}

func (PlanExecutionArgs) Kind() string                 { return "plan_execution" }
func (PlanExecutionArgs) InsertOpts() river.InsertOpts { return infraOpts(3) }

// PlanExecutionWorker is idempotent: it works only an execution that is
// running at the planning step; a retry plans again from scratch (a plan
// changes nothing) and the outcome is recorded under the run's lock only
// while the execution is still planning.
type PlanExecutionWorker struct {
	river.WorkerDefaults[PlanExecutionArgs]
	Infra Infra
}

func (w *PlanExecutionWorker) Timeout(*river.Job[PlanExecutionArgs]) time.Duration {
	return w.Infra.JobTimeout()
}

func (w *PlanExecutionWorker) Work(ctx context.Context, job *river.Job[PlanExecutionArgs]) error {
	return orGiveUp(ctx, w.Infra, job.JobRow, GiveUp{ExecutionID: job.Args.ExecutionID}, w.Infra.PlanExecution(ctx, job.Args.ExecutionID))
}

// RequestVoteArgs emails one voter a link to vote on an execution's plan.
// Executions now ask through the approvals service's job
// (RequestApprovalVoteArgs); this kind stays one release so that jobs a
// previous release inserted still run during a rolling upgrade.
type RequestVoteArgs struct {
	ExecutionID int64  `json:"execution_id"`
	Voter       string `json:"voter"`
}

func (RequestVoteArgs) Kind() string                 { return "request_vote" }
func (RequestVoteArgs) InsertOpts() river.InsertOpts { return infraOpts(10) }

// RequestVoteWorker sends at least once: nothing is sent once the
// execution is decided or aborted, and a retry after a sent mail may send it
// again (better twice than never); the link it carries is the same vote.
type RequestVoteWorker struct {
	river.WorkerDefaults[RequestVoteArgs]
	Infra Infra
}

func (w *RequestVoteWorker) Work(ctx context.Context, job *river.Job[RequestVoteArgs]) error {
	return w.Infra.RequestVote(ctx, job.Args.ExecutionID, job.Args.Voter)
}

// ApplyExecutionArgs applies an approved execution's saved plan, once: a
// retry after the apply began (its worker died) does not apply again, it
// marks the execution interrupted for an operator to decide. ApprovalID
// is the approval that let it apply (a plan voted on again after an
// interruption is applied by a job of its own).
type ApplyExecutionArgs struct {
	ExecutionID int64 `json:"execution_id"`
	ApprovalID  int64 `json:"approval_id,omitempty"`
	// Requeued: as PlanExecutionArgs's, for an apply that had not begun.
	Requeued int64 `json:"requeued,omitempty"`
}

func (ApplyExecutionArgs) Kind() string                 { return "apply_execution" }
func (ApplyExecutionArgs) InsertOpts() river.InsertOpts { return infraOpts(3) }

// ApplyExecutionWorker is idempotent: it applies only an execution still at
// the applying step, under the run's lock, always the saved plan, and never
// twice: an attempt that finds the apply begun by an earlier one (which
// recorded no outcome) runs nothing and marks it interrupted.
type ApplyExecutionWorker struct {
	river.WorkerDefaults[ApplyExecutionArgs]
	Infra Infra
}

func (w *ApplyExecutionWorker) Timeout(*river.Job[ApplyExecutionArgs]) time.Duration {
	return w.Infra.JobTimeout()
}

func (w *ApplyExecutionWorker) Work(ctx context.Context, job *river.Job[ApplyExecutionArgs]) error {
	return orGiveUp(ctx, w.Infra, job.JobRow, GiveUp{ExecutionID: job.Args.ExecutionID}, w.Infra.ApplyExecution(ctx, job.Args.ExecutionID))
}
