package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"
)

// PlanPullRequestArgs finds the changed units of a pull request's head and
// queues a plan of each.
type PlanPullRequestArgs struct {
	Repository string `json:"repository"`
	Number     int    `json:"number"`
	HeadSHA    string `json:"head_sha"`
}

func (PlanPullRequestArgs) Kind() string { return "plan_pull_request" }

// Not unique: a reopened pull request plans its head again.
func (PlanPullRequestArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueInfra, MaxAttempts: 5}
}

// PlanPullRequestWorker is idempotent: it plans only while the pull request
// is open at the same head, and the plans it records are keyed by head.
type PlanPullRequestWorker struct {
	river.WorkerDefaults[PlanPullRequestArgs]
	Infra Infra
}

func (w *PlanPullRequestWorker) Work(ctx context.Context, job *river.Job[PlanPullRequestArgs]) error {
	return w.Infra.PlanPullRequest(ctx, job.Args.Repository, job.Args.Number, job.Args.HeadSHA)
}

// RunPRPlanArgs plans one unit of a pull request. A plan queued again
// (the pull request was reopened) has a new generation, and so a job of
// its own whatever became of the old one.
type RunPRPlanArgs struct {
	PlanID     int64 `json:"plan_id"`
	Generation int   `json:"generation"`
	// Requeued: as PlanExecutionArgs's.
	Requeued int64 `json:"requeued,omitempty"`
}

func (RunPRPlanArgs) Kind() string                 { return "run_pr_plan" }
func (RunPRPlanArgs) InsertOpts() river.InsertOpts { return infraOpts(3) }

// RunPRPlanWorker is idempotent: a plan starts only at its generation
// (StartPRPlan's conditional update); a superseded or finished plan is left
// alone.
type RunPRPlanWorker struct {
	river.WorkerDefaults[RunPRPlanArgs]
	Infra Infra
}

func (w *RunPRPlanWorker) Timeout(*river.Job[RunPRPlanArgs]) time.Duration {
	return w.Infra.JobTimeout()
}

func (w *RunPRPlanWorker) Work(ctx context.Context, job *river.Job[RunPRPlanArgs]) error {
	what := GiveUp{PRPlanID: job.Args.PlanID, Generation: job.Args.Generation}
	return orGiveUp(ctx, w.Infra, job.JobRow, what, w.Infra.RunPRPlan(ctx, job.Args.PlanID, job.Args.Generation))
}
