package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Infra is what the infrastructure delivery workers need; the infra service
// implements it (declared here to keep jobs free of the areas).
type Infra interface {
	HandleDelivery(ctx context.Context, deliveryID string) error
	PlanPullRequest(ctx context.Context, repo string, number int, headSHA string) error
	RunPRPlan(ctx context.Context, planID int64, generation int) error
	StartRun(ctx context.Context, runID, jobID int64) error
	PlanExecution(ctx context.Context, executionID int64) error
	RequestVote(ctx context.Context, executionID int64, voter string) error
	ApplyExecution(ctx context.Context, executionID int64) error
	PostStatus(ctx context.Context, args PostStatusArgs) error
	RefreshMergeLock(ctx context.Context, repo string) error
	// GiveUp ends what a job was doing when its last attempt failed: the
	// plan, execution or run fails with why, and a run releases its merge
	// lock, instead of waiting forever for a job that will not come back.
	GiveUp(ctx context.Context, what GiveUp, why error) error
	// Reconcile ends the work no job will move on any more (a sweep).
	Reconcile(ctx context.Context) error
	// JobTimeout bounds a job that runs commands: the command's own time
	// limit plus the checkouts around it, so that a job ends with its
	// command's outcome rather than River's timeout.
	JobTimeout() time.Duration
}

// GiveUp names what a failed job was for (one of its fields is set; a
// plan's with its generation).
type GiveUp struct {
	PRPlanID    int64
	Generation  int
	RunID       int64
	ExecutionID int64
}

// lastAttempt reports whether River will not retry job after an error.
func lastAttempt(job *rivertype.JobRow) bool { return job.Attempt >= job.MaxAttempts }

// orGiveUp returns err, giving up on what first when this was the job's
// last attempt.
func orGiveUp(ctx context.Context, infra Infra, job *rivertype.JobRow, what GiveUp, err error) error {
	if err == nil || !lastAttempt(job) {
		return err
	}
	if gerr := infra.GiveUp(context.WithoutCancel(ctx), what, err); gerr != nil {
		return errors.Join(err, gerr)
	}
	return err
}

func infraOpts(maxAttempts int) river.InsertOpts {
	return river.InsertOpts{Queue: QueueInfra, MaxAttempts: maxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// HandleDeliveryArgs does the work of one GitHub delivery, recorded by the
// webhook in the same transaction.
type HandleDeliveryArgs struct {
	DeliveryID string `json:"delivery_id"`
}

func (HandleDeliveryArgs) Kind() string                 { return "github_delivery" }
func (HandleDeliveryArgs) InsertOpts() river.InsertOpts { return infraOpts(10) }

type HandleDeliveryWorker struct {
	river.WorkerDefaults[HandleDeliveryArgs]
	Infra Infra
}

func (w *HandleDeliveryWorker) Work(ctx context.Context, job *river.Job[HandleDeliveryArgs]) error {
	return w.Infra.HandleDelivery(ctx, job.Args.DeliveryID)
}

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
}

func (RunPRPlanArgs) Kind() string                 { return "run_pr_plan" }
func (RunPRPlanArgs) InsertOpts() river.InsertOpts { return infraOpts(3) }

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

// StartRunArgs takes the merge lock for a run and scans the merge; a run
// that finds the lock held stays queued until the holder releases it.
type StartRunArgs struct {
	RunID int64 `json:"run_id"`
}

func (StartRunArgs) Kind() string { return "start_run" }

// Not unique: a queued run is started again each time the lock is
// released. The run itself records which job scans it, so a second job
// for it does nothing.
func (StartRunArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueInfra, MaxAttempts: 5}
}

type StartRunWorker struct {
	river.WorkerDefaults[StartRunArgs]
	Infra Infra
}

func (w *StartRunWorker) Timeout(*river.Job[StartRunArgs]) time.Duration { return w.Infra.JobTimeout() }

func (w *StartRunWorker) Work(ctx context.Context, job *river.Job[StartRunArgs]) error {
	return orGiveUp(ctx, w.Infra, job.JobRow, GiveUp{RunID: job.Args.RunID}, w.Infra.StartRun(ctx, job.Args.RunID, job.ID))
}

// PlanExecutionArgs plans an execution whose dependencies have succeeded.
type PlanExecutionArgs struct {
	ExecutionID int64 `json:"execution_id"`
}

func (PlanExecutionArgs) Kind() string                 { return "plan_execution" }
func (PlanExecutionArgs) InsertOpts() river.InsertOpts { return infraOpts(3) }

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
type RequestVoteArgs struct {
	ExecutionID int64  `json:"execution_id"`
	Voter       string `json:"voter"`
}

func (RequestVoteArgs) Kind() string                 { return "request_vote" }
func (RequestVoteArgs) InsertOpts() river.InsertOpts { return infraOpts(10) }

type RequestVoteWorker struct {
	river.WorkerDefaults[RequestVoteArgs]
	Infra Infra
}

func (w *RequestVoteWorker) Work(ctx context.Context, job *river.Job[RequestVoteArgs]) error {
	return w.Infra.RequestVote(ctx, job.Args.ExecutionID, job.Args.Voter)
}

// ApplyExecutionArgs applies an approved execution's saved plan. A retry
// after a crash applies the same saved plan, which terraform refuses once
// state moved on ("saved plan is stale"): the execution then fails, it
// never applies something nobody saw.
type ApplyExecutionArgs struct {
	ExecutionID int64 `json:"execution_id"`
}

func (ApplyExecutionArgs) Kind() string                 { return "apply_execution" }
func (ApplyExecutionArgs) InsertOpts() river.InsertOpts { return infraOpts(3) }

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

type RefreshMergeLockWorker struct {
	river.WorkerDefaults[RefreshMergeLockArgs]
	Infra Infra
}

func (w *RefreshMergeLockWorker) Work(ctx context.Context, job *river.Job[RefreshMergeLockArgs]) error {
	return w.Infra.RefreshMergeLock(ctx, job.Args.Repository)
}

// ReconcileInfraArgs is the sweep that ends infrastructure work whose job
// is gone (Infra.Reconcile); River's leader enqueues it every minute.
type ReconcileInfraArgs struct{}

func (ReconcileInfraArgs) Kind() string { return "reconcile_infra" }

// InsertOpts: one sweep per period, however many leaders came and went.
func (ReconcileInfraArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Minute}}
}

// ReconcileInfraWorker is idempotent: what it ends is not found again.
type ReconcileInfraWorker struct {
	river.WorkerDefaults[ReconcileInfraArgs]
	Infra Infra
}

func (w *ReconcileInfraWorker) Work(ctx context.Context, _ *river.Job[ReconcileInfraArgs]) error {
	return w.Infra.Reconcile(ctx)
}
