package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"
)

// Area is what one area of Gantry adds to the background work: its queue,
// its job kinds and its sweeps. Each area builds its own in its jobs file
// (EnvironmentsArea, InfraArea); the application's assembly hands the list
// to NewClient, so a worker process and a test harness work the same jobs.
type Area struct {
	// Queue is the area's own queue, so a slow area cannot starve another.
	Queue QueueConfig
	// AddWorkers registers the area's workers.
	AddWorkers func(w *river.Workers)
	// Periodic are the area's sweeps; River's elected leader enqueues them.
	Periodic []*river.PeriodicJob
	// LongestJob is the most time one of the area's jobs may legitimately
	// run; River takes a job running longer for lost (its process died) and
	// runs it again, so the rescue waits for the longest of every area.
	LongestJob time.Duration
	// Heartbeats are the kinds whose running attempts keep a heartbeat
	// (the jobs that run commands), so the area's sweep notices in minutes
	// that their worker died (models.QuietJobs).
	Heartbeats []string
	// Stale, when set, says why running one of the area's jobs again would
	// do nothing (what it was for has ended), so that an operator's retry
	// says so rather than quietly doing nothing; "" when it would do work
	// or the kind is not the area's.
	Stale func(ctx context.Context, kind string, args []byte) (string, error)
}

// QueueConfig is one queue and how eagerly workers fetch from it. Zero
// values take River's defaults (a one-second poll) and the process's
// GANTRY_WORKERS.
type QueueConfig struct {
	Name              string
	MaxWorkers        int
	FetchPollInterval time.Duration
	FetchCooldown     time.Duration
}

// Queues every process has whatever its areas: River's default queue and
// the sweeps' maintenance queue.
const (
	QueueDefault     = river.QueueDefault
	QueueMaintenance = "maintenance"
)

// sharedArea is the work that belongs to no area: pruning expired sessions
// and mailing vote requests.
func sharedArea(deps SharedDeps) Area {
	return Area{
		Queue: QueueConfig{Name: QueueMaintenance},
		AddWorkers: func(w *river.Workers) {
			river.AddWorker(w, &PruneSessionsWorker{DB: deps.DB, Logger: deps.Logger})
			if deps.Approvals != nil {
				river.AddWorker(w, &RequestApprovalVoteWorker{Approvals: deps.Approvals})
			}
		},
		Periodic: []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
				func() (river.JobArgs, *river.InsertOpts) { return PruneSessionsArgs{}, nil },
				&river.PeriodicJobOpts{ID: "prune_sessions", RunOnStart: true}),
		},
	}
}
