package jobs

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
)

// Daemons is what the daemons workers need; the daemons service implements
// it (declared here to keep jobs free of the areas).
type Daemons interface {
	ClaimDeployment(ctx context.Context, id uuid.UUID) error
	StepDeployment(ctx context.Context, id uuid.UUID) (time.Duration, error)
	ReconcileEnvironment(ctx context.Context, envID int64) error
	Sweep(ctx context.Context) error
}

// QueueDaemons is the daemons area's queue.
const QueueDaemons = "daemons"

// DaemonsArea is the daemons area's background work; sweepEvery is how
// often River's leader runs the full reconcile.
func DaemonsArea(d Daemons, sweepEvery time.Duration) Area {
	return Area{
		Queue: QueueConfig{Name: QueueDaemons},
		AddWorkers: func(w *river.Workers) {
			river.AddWorker(w, &DaemonClaimDeploymentWorker{Daemons: d})
			river.AddWorker(w, &DaemonDeploymentStepWorker{Daemons: d})
			river.AddWorker(w, &DaemonReconcileWorker{Daemons: d})
			river.AddWorker(w, &DaemonSweepWorker{Daemons: d})
		},
		Periodic: []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(sweepEvery),
				func() (river.JobArgs, *river.InsertOpts) { return DaemonSweepArgs{}, nil },
				&river.PeriodicJobOpts{ID: "daemon_sweep", RunOnStart: true}),
		},
		LongestJob: daemonJobTimeout,
	}
}

// daemonJobTimeout bounds one daemons job: each is one transaction.
const daemonJobTimeout = 5 * time.Minute
