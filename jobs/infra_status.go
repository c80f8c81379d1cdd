package jobs

import (
	"context"

	"github.com/riverqueue/river"
)

// PostStatusArgs posts one commit status to GitHub; on its own so that
// GitHub being down retries the status, not the plan. The status of a plan
// and the merge-lock status are worked out when they are sent, from the
// rows as they are then, so a retried job never posts a stale state over a
// newer one; a scan error is sent as given.
type PostStatusArgs struct {
	Repository string `json:"repository"`
	SHA        string `json:"sha"`
	Of         string `json:"of"` // StatusOfPlan, StatusOfMergeLock or StatusAsGiven
	PlanID     int64  `json:"plan_id,omitempty"`
	PRNumber   int    `json:"pr_number,omitempty"`
	// As given (a scan error).
	State       string `json:"state,omitempty"`
	Context     string `json:"context,omitempty"`
	Description string `json:"description,omitempty"`
	TargetURL   string `json:"target_url,omitempty"`
}

// The kinds of PostStatusArgs.
const (
	StatusOfPlan      = "plan"
	StatusOfMergeLock = "merge_lock"
	StatusAsGiven     = "given"
)

func (PostStatusArgs) Kind() string { return "post_commit_status" }
func (PostStatusArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueInfra, MaxAttempts: 8}
}

// PostStatusWorker is idempotent: the state is worked out from the rows when
// sent, so a retry posts the current state, never an older one over it.
type PostStatusWorker struct {
	river.WorkerDefaults[PostStatusArgs]
	Infra Infra
}

func (w *PostStatusWorker) Work(ctx context.Context, job *river.Job[PostStatusArgs]) error {
	return w.Infra.PostStatus(ctx, job.Args)
}

// RefreshMergeLockArgs posts the merge-lock status on the head of every
// open pull request of a repository, after the lock changed hands.
type RefreshMergeLockArgs struct {
	Repository string `json:"repository"`
}

func (RefreshMergeLockArgs) Kind() string { return "refresh_merge_lock" }
func (RefreshMergeLockArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueInfra, MaxAttempts: 8}
}

// RefreshMergeLockWorker is idempotent: it posts the lock's current state on
// every open head; posting it twice changes nothing on GitHub.
type RefreshMergeLockWorker struct {
	river.WorkerDefaults[RefreshMergeLockArgs]
	Infra Infra
}

func (w *RefreshMergeLockWorker) Work(ctx context.Context, job *river.Job[RefreshMergeLockArgs]) error {
	return w.Infra.RefreshMergeLock(ctx, job.Args.Repository)
}
