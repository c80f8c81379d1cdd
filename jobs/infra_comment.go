package jobs

import (
	"context"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// PostPlanCommentArgs writes (or updates in place) the comment that sums up
// a pull request's plans. One job per pull request waits at a time
// (unique by args until it ran), so several plans finishing together make
// one update.
type PostPlanCommentArgs struct {
	Repository string `json:"repository"`
	Number     int    `json:"number"`
}

func (PostPlanCommentArgs) Kind() string { return "post_plan_comment" }

// InsertOpts: unique among the jobs not yet finished (River requires the
// running state in the set: PostPlanComment itself looks again after
// writing, so a plan finishing while it runs is not missed).
func (PostPlanCommentArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueInfra, MaxAttempts: 8, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
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
