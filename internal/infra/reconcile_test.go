package infra_test

import (
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// TestAbortRun: an operator aborts a run waiting for votes nobody casts;
// everything not yet applied is aborted, the lock is released, and the
// voting is closed.
func TestAbortRun(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	p := b.repo.OpenPR(5, map[string]string{infratest.VPC + "/main.tf": b.repo.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
	_, run := b.merge(t, p)
	vpc := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)

	require.NoError(t, b.Infra.AbortRun(b.ctx, run.ID, "user:olivia@example.com", "the change request was withdrawn"))
	run = b.WaitRun(t, run.ID, models.RunFailed)
	require.Equal(t, "aborted by user:olivia@example.com: the change request was withdrawn", run.Error)
	require.Equal(t, map[string]string{infratest.VPC: models.ExecAborted, infratest.RDS: models.ExecAborted, infratest.EC2: models.ExecAborted},
		b.executions(t, run.ID))
	lock, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.Nil(t, lock)
	_, err = b.Infra.Vote(b.ctx, infra.VoteInput{ExecutionID: vpc.ExecutionID, Voter: ada, Decision: "approve", Via: approvals.ViaAPI})
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err), "votes are closed")
	require.EqualError(t, err, "Execution "+vpc.ExecutionID+" was aborted, so its votes are closed.")
	require.Equal(t, "vpc-v1", b.repo.Output(infratest.VPC))

	err = b.Infra.AbortRun(b.ctx, run.ID, "user:olivia@example.com", "")
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err), "over already")
	err = b.Infra.AbortRun(b.ctx, 999999, "user:olivia@example.com", "")
	require.Equal(t, apperr.NotFound, apperr.CodeOf(err))
	entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Target: infra.RunTarget(run.ID), Event: infra.EventRunAborted, Limit: 5})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "user:olivia@example.com", entries[0].Actor)
}

// TestReconcile: an execution whose plan job was cancelled by an
// administrator (or discarded when its worker died in its last attempt)
// fails once the sweep sees it, with what depends on it; a queued run whose
// job is gone is started again.
func TestReconcile(t *testing.T) {
	t.Parallel()
	b := setup(t, options{noWorkers: true})
	r := b.repo
	riverClient, err := river.NewClient(riverpgxv5.New(b.DB.Pool), &river.Config{})
	require.NoError(t, err)

	p := r.OpenPR(7, map[string]string{infratest.VPC + "/main.tf": r.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
	sha := r.Merge(p.Branch)
	b.deliverID(t, "d-merge", r.Event(p, "closed", sha))
	require.NoError(t, b.Infra.HandleDelivery(b.ctx, "d-merge"))
	run, err := models.RunOfMerge(b.ctx, b.DB.Bun, "live", sha)
	require.NoError(t, err)
	require.NoError(t, b.Infra.StartRun(b.ctx, run.ID, 1))
	vpc := b.mustExecution(t, run.ID, infratest.VPC)
	require.Equal(t, models.ExecRunning, vpc.Status)
	planJobs, err := models.LiveJobsOf(b.ctx, b.DB.Bun, []string{jobs.PlanExecutionArgs{}.Kind()}, "execution_id", vpc.ID)
	require.NoError(t, err)
	require.Len(t, planJobs, 1)

	// Within the grace nothing happens: the job may just be on its way.
	require.NoError(t, b.Infra.Reconcile(b.ctx))
	require.Equal(t, models.ExecRunning, b.mustExecution(t, run.ID, infratest.VPC).Status)

	_, err = riverClient.JobCancel(b.ctx, planJobs[0])
	require.NoError(t, err)
	later := time.Now().Add(5 * time.Minute)
	b.Infra.Now = func() time.Time { return later }
	require.NoError(t, b.Infra.Reconcile(b.ctx))
	require.Equal(t, map[string]string{infratest.VPC: models.ExecFailed, infratest.RDS: models.ExecAborted, infratest.EC2: models.ExecAborted},
		b.executions(t, run.ID))
	require.Contains(t, b.mustExecution(t, run.ID, infratest.VPC).Error, "its job is gone")
	run, err = models.RunByID(b.ctx, b.DB.Bun, run.ID)
	require.NoError(t, err)
	require.Equal(t, models.RunFailed, run.Status)
	lock, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.Nil(t, lock)

	// A queued run whose start job was cancelled is started again.
	b.Infra.Now = nil
	q := r.OpenPR(8, map[string]string{infratest.DNS + "/main.tf": r.Resource(infratest.DNS, "zone", `"dns-v2"`)})
	sha = r.Merge(q.Branch)
	b.deliverID(t, "d-merge-2", r.Event(q, "closed", sha))
	require.NoError(t, b.Infra.HandleDelivery(b.ctx, "d-merge-2"))
	queued, err := models.RunOfMerge(b.ctx, b.DB.Bun, "live", sha)
	require.NoError(t, err)
	starts, err := models.LiveJobsOf(b.ctx, b.DB.Bun, []string{jobs.StartRunArgs{}.Kind()}, "run_id", queued.ID)
	require.NoError(t, err)
	require.Len(t, starts, 1)
	_, err = riverClient.JobCancel(b.ctx, starts[0])
	require.NoError(t, err)
	b.Infra.Now = func() time.Time { return later.Add(5 * time.Minute) }
	require.NoError(t, b.Infra.Reconcile(b.ctx))
	starts, err = models.LiveJobsOf(b.ctx, b.DB.Bun, []string{jobs.StartRunArgs{}.Kind()}, "run_id", queued.ID)
	require.NoError(t, err)
	require.Len(t, starts, 1, "a new start job")
}
