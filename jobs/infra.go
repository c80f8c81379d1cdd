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
	// PostPlanComment writes the pull request's plan-summary comment.
	PostPlanComment(ctx context.Context, repo string, number int) error
	// Drift detection (jobs/infra_drift.go).
	ScheduleDrift(ctx context.Context) error
	SweepDrift(ctx context.Context, repo string) error
	RunDriftCheck(ctx context.Context, checkID int64) error
	FailDriftCheck(ctx context.Context, checkID int64, why error) error
	NotifyDrift(ctx context.Context, checkID int64) error
	// NotifyRollbackHeld mails the operators of a failed rollback
	// (jobs/infra_rollback.go).
	NotifyRollbackHeld(ctx context.Context, executionID int64) error
	// GiveUp ends what a job was doing when its last attempt failed: the
	// plan, execution or run fails with why, and a run releases its merge
	// lock, instead of waiting forever for a job that will not come back.
	GiveUp(ctx context.Context, what GiveUp, why error) error
	// Reconcile ends the work no job will move on any more (a sweep).
	Reconcile(ctx context.Context) error
	// StaleJob says why running one of the area's jobs again would do
	// nothing (jobs.Area.Stale).
	StaleJob(ctx context.Context, kind string, args []byte) (string, error)
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

// QueueInfra is the infrastructure area's queue.
const QueueInfra = "infra"

// An execution's plan job is inserted the moment its last dependency
// succeeds. River sends at most one insert notification per queue per
// FetchCooldown, so a job inserted right after another waits for the next
// poll: a short poll keeps each step of a run under a fifth of a second
// instead of a second, and a short cooldown lets a notified job be fetched
// at once (docs/performance.md). InfraPollInterval costs one small indexed
// query per worker process each time.
const (
	InfraPollInterval  = 200 * time.Millisecond
	InfraFetchCooldown = 20 * time.Millisecond
)

// InfraArea is the infrastructure area's background work.
func InfraArea(infra Infra) Area {
	return Area{
		Queue: QueueConfig{Name: QueueInfra, FetchPollInterval: InfraPollInterval, FetchCooldown: InfraFetchCooldown},
		AddWorkers: func(w *river.Workers) {
			river.AddWorker(w, &HandleDeliveryWorker{Infra: infra})
			river.AddWorker(w, &PlanPullRequestWorker{Infra: infra})
			river.AddWorker(w, &RunPRPlanWorker{Infra: infra})
			river.AddWorker(w, &StartRunWorker{Infra: infra})
			river.AddWorker(w, &PlanExecutionWorker{Infra: infra})
			river.AddWorker(w, &RequestVoteWorker{Infra: infra})
			river.AddWorker(w, &ApplyExecutionWorker{Infra: infra})
			river.AddWorker(w, &PostStatusWorker{Infra: infra})
			river.AddWorker(w, &RefreshMergeLockWorker{Infra: infra})
			river.AddWorker(w, &PostPlanCommentWorker{Infra: infra})
			river.AddWorker(w, &ScheduleDriftWorker{Infra: infra})
			river.AddWorker(w, &DriftSweepWorker{Infra: infra})
			river.AddWorker(w, &DriftPlanWorker{Infra: infra})
			river.AddWorker(w, &NotifyDriftWorker{Infra: infra})
			river.AddWorker(w, &NotifyRollbackHeldWorker{Infra: infra})
			river.AddWorker(w, &ReconcileInfraWorker{Infra: infra})
		},
		Periodic: []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(time.Minute),
				func() (river.JobArgs, *river.InsertOpts) { return ReconcileInfraArgs{}, nil },
				&river.PeriodicJobOpts{ID: "reconcile_infra", RunOnStart: true}),
			river.NewPeriodicJob(river.PeriodicInterval(time.Minute),
				func() (river.JobArgs, *river.InsertOpts) { return ScheduleDriftArgs{}, nil },
				&river.PeriodicJobOpts{ID: "schedule_drift", RunOnStart: true}),
		},
		LongestJob: infra.JobTimeout(),
		Heartbeats: InfraHeartbeats(),
		Stale:      infra.StaleJob,
	}
}

// InfraHeartbeats are the infrastructure job kinds that run commands (a
// run's scan runs git, and plans with scan: plan), so keep heartbeats for
// the sweep (Infra.Reconcile).
func InfraHeartbeats() []string {
	return []string{StartRunArgs{}.Kind(), RunPRPlanArgs{}.Kind(), PlanExecutionArgs{}.Kind(), ApplyExecutionArgs{}.Kind(), DriftPlanArgs{}.Kind()}
}

func infraOpts(maxAttempts int) river.InsertOpts {
	return river.InsertOpts{Queue: QueueInfra, MaxAttempts: maxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}
