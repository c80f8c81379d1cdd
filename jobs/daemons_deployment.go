package jobs

import (
	"context"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
)

// DaemonClaimDeploymentArgs starts a pending daemon deployment when its
// environment has none in progress.
type DaemonClaimDeploymentArgs struct {
	DeploymentID uuid.UUID `json:"deployment_id"`
}

func (DaemonClaimDeploymentArgs) Kind() string { return "daemon_claim_deployment" }

func (DaemonClaimDeploymentArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueDaemons, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// DaemonClaimDeploymentWorker is idempotent: the claim is a conditional
// update from pending (under the environment's lock, backed by the unique
// index on in-progress deployments), so a second run finds nothing pending.
type DaemonClaimDeploymentWorker struct {
	river.WorkerDefaults[DaemonClaimDeploymentArgs]
	Daemons Daemons
}

func (w *DaemonClaimDeploymentWorker) Work(ctx context.Context, job *river.Job[DaemonClaimDeploymentArgs]) error {
	return w.Daemons.ClaimDeployment(ctx, job.Args.DeploymentID)
}

// DaemonDeploymentStepArgs moves an in-progress daemon deployment on:
// the next batch, or its end.
type DaemonDeploymentStepArgs struct {
	DeploymentID uuid.UUID `json:"deployment_id"`
}

func (DaemonDeploymentStepArgs) Kind() string { return "daemon_deployment_step" }

func (DaemonDeploymentStepArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueDaemons, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// DaemonDeploymentStepWorker is idempotent: each step is one transaction
// under the environment's lock that plans from the database's current
// state, so a repeated or interrupted step starts nothing twice (and the
// unique index on live tasks refuses a second task on an instance). It
// snoozes until the deployment has ended.
type DaemonDeploymentStepWorker struct {
	river.WorkerDefaults[DaemonDeploymentStepArgs]
	Daemons Daemons
}

func (w *DaemonDeploymentStepWorker) Work(ctx context.Context, job *river.Job[DaemonDeploymentStepArgs]) error {
	next, err := w.Daemons.StepDeployment(ctx, job.Args.DeploymentID)
	if err != nil || next == 0 {
		return err
	}
	return river.JobSnooze(next)
}
