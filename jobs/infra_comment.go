package jobs

import (
	"context"

	"github.com/riverqueue/river"
)

// PostPlanCommentArgs writes (or updates in place) the comment that sums up
// a pull request's plans. The jobs of one pull request write one at a time
// (Infra.PostPlanComment holds a lock per pull request) and work the body
// out when they run, so several plans finishing together make one update
// and the jobs after it send nothing. (River's uniqueness would not do: it
// counts a job that just returned as running until its completion is
// flushed, and would skip the job of a plan finishing in that moment.)
type PostPlanCommentArgs struct {
	Repository string `json:"repository"`
	Number     int    `json:"number"`
}

func (PostPlanCommentArgs) Kind() string { return "post_plan_comment" }

func (PostPlanCommentArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueInfra, MaxAttempts: 8}
}

// PostPlanCommentWorker is idempotent: the comment is worked out from the
// plans when sent, and an unchanged body is not sent again.
type PostPlanCommentWorker struct {
	river.WorkerDefaults[PostPlanCommentArgs]
	Infra Infra
}

func (w *PostPlanCommentWorker) Work(ctx context.Context, job *river.Job[PostPlanCommentArgs]) error {
	return w.Infra.PostPlanComment(ctx, job.Args.Repository, job.Args.Number)
}
