package web_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// TestRunPageSaysWhyTheMergeLockIsHeld: the page of the run holding its
// repository's merge lock lists what keeps it: an apply under way since
// when with its worker's last heartbeat, a plan whose job no worker has
// picked up, votes awaited, and an interrupted apply that needs an
// operator. A run that does not hold the lock lists nothing.
func TestRunPageSaysWhyTheMergeLockIsHeld(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, vera, models.RoleViewer)
	br := b.browser(t)
	br.login(t, vera)
	ctx := t.Context()
	db := b.db.Bun
	b.syncRepositories(t, "live")

	run := b.insertRun(t, models.RunRunning)
	taken, err := models.TakeMergeLock(ctx, db, run)
	require.NoError(t, err)
	require.True(t, taken)
	applyStarted := time.Date(2026, 11, 24, 21, 40, 0, 0, time.UTC)
	applying := newExecution(run, "run-3-f00d-prod-vpc-1", "vpc", models.ExecRunning, models.StepApplying)
	applying.ApplyStartedAt = &applyStarted
	planning := newExecution(run, "run-3-f00d-prod-dns-2", "dns", models.ExecRunning, models.StepPlanning)
	voting := newExecution(run, "run-3-f00d-prod-rds-3", "rds", models.ExecRunning, models.StepVoting)
	interrupted := newExecution(run, "run-3-f00d-prod-ec2-4", "ec2", models.ExecRunning, models.StepInterrupted)
	require.NoError(t, models.InsertExecutions(ctx, db, []*models.Execution{applying, planning, voting, interrupted}))

	// The apply's job runs on a worker that beats.
	var jobID int64
	require.NoError(t, b.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		jobID, err = tx.EnqueueJob(ctx, jobs.ApplyExecutionArgs{ExecutionID: applying.ID}, nil)
		return err
	}))
	require.NoError(t, models.StartHeartbeat(ctx, db, jobID, jobs.ApplyExecutionArgs{}.Kind(), 1, "worker-7:4242"))
	_, err = db.NewRaw("UPDATE job_heartbeats SET beat_at = ? WHERE job_id = ?", time.Date(2026, 11, 24, 21, 44, 5, 0, time.UTC), jobID).Exec(ctx)
	require.NoError(t, err)

	_, page, _ := br.get(t, fmt.Sprintf("/infra/runs/%d", run.ID))
	why := section(t, page, "lock-why")
	require.Contains(t, why, "live/prod/vpc")
	require.Contains(t, why, "Applying since 2026-11-24 21:40 UTC; its worker worker-7:4242 last reported at 21:44:05 UTC.")
	require.Contains(t, why, "taken for dead by the next sweep")
	require.Contains(t, why, "Queued to plan; no worker reports on it at the moment.")
	require.Contains(t, why, "Waits for votes: 1 approval(s) apply it, 1 rejection(s) stop it.")
	require.Contains(t, why, "The apply was interrupted (its worker stopped) and the state is unknown: an operator chooses on its page")
	require.Contains(t, why, `href="/infra/executions/run-3-f00d-prod-ec2-4"`)

	// Once the run has ended and released the lock, nothing is listed.
	require.NoError(t, models.ReleaseMergeLock(ctx, db, "live", run.ID))
	run.Status = models.RunFailed
	require.NoError(t, models.UpdateRun(ctx, db, run, "status"))
	_, page, _ = br.get(t, fmt.Sprintf("/infra/runs/%d", run.ID))
	require.NotContains(t, page, `data-testid="lock-why"`)
}

// TestQueuedRunNamesAReconcileRunHoldingTheLock: a run reconciling a
// drifted unit deploys no pull request, so a queued run's page names it as
// such, never "pull request #0".
func TestQueuedRunNamesAReconcileRunHoldingTheLock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, vera, models.RoleViewer)
	br := b.browser(t)
	br.login(t, vera)
	ctx := t.Context()
	b.syncRepositories(t, "live")

	reconcile := &models.Run{Repository: "live", BaseRef: "main", HeadRef: "main", HeadSHA: "a1b2c3d4e5", MergeCommit: "a1b2c3d4e5",
		Scan: "graph", Status: models.RunRunning}
	require.NoError(t, models.InsertRun(ctx, b.db.Bun, reconcile))
	taken, err := models.TakeMergeLock(ctx, b.db.Bun, reconcile)
	require.NoError(t, err)
	require.True(t, taken)
	queued := b.insertRun(t, models.RunQueued)

	_, page, _ := br.get(t, fmt.Sprintf("/infra/runs/%d", queued.ID))
	lock := section(t, page, "run-lock")
	require.Contains(t, lock, fmt.Sprintf("run %d (reconciling a drifted unit) holds it since", reconcile.ID))
	require.NotContains(t, lock, "#0")
}
