package infra_test

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// The cases below are about order and failure: deliveries handled out of
// order, a push during a scan, a reopened pull request, two jobs for one
// run, merges queued behind each other, a command that never ran.

// deliverID records a delivery under id without handling it (no workers in
// these tests: they call the handlers in the order they want).
func (b *bundle) deliverID(t *testing.T, id string, body []byte) {
	t.Helper()
	res, err := b.Infra.ReceiveWebhook(b.ctx, infra.Delivery{Event: "pull_request", ID: id,
		Signature: github.Sign([]byte(servertest.WebhookSecret), body), Body: body})
	require.NoError(t, err)
	require.Equal(t, infra.WebhookAccepted, res.Outcome, res.Message)
}

// TestLateDeliveryChangesNothing: a push delivered before the merge but
// handled after it (its job retried) does not reopen the pull request.
func TestLateDeliveryChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, options{noWorkers: true})
	r := b.repo
	p := r.OpenPR(7, map[string]string{infratest.VPC + "/main.tf": r.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
	b.deliverID(t, "d-sync", r.Event(p, "synchronize", ""))
	sha := r.Merge(p.Branch)
	b.deliverID(t, "d-merge", r.Event(p, "closed", sha))

	require.NoError(t, b.Infra.HandleDelivery(b.ctx, "d-merge"))
	require.NoError(t, b.Infra.HandleDelivery(b.ctx, "d-sync"))
	pr, err := models.PullRequestByNumber(b.ctx, b.DB.Bun, "live", 7)
	require.NoError(t, err)
	require.Equal(t, models.PRMerged, pr.State, "a merged pull request stays merged")
	require.Equal(t, sha, pr.MergeCommitSHA)
}

// TestPushDuringAScan: a push lands while the previous head is being
// scanned; the old head's plans are not queued.
func TestPushDuringAScan(t *testing.T) {
	t.Parallel()
	b := setup(t, options{noWorkers: true})
	r := b.repo
	p := r.OpenPR(7, map[string]string{infratest.VPC + "/main.tf": r.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
	old := p.Head
	b.deliverID(t, "d-open", r.Event(p, "opened", ""))
	require.NoError(t, b.Infra.HandleDelivery(b.ctx, "d-open"))

	// Hold the mirror's lock so that the scan of the old head waits in
	// its fetch, past its first look at the head.
	_, err := b.Infra.Git.Fetch(b.ctx, r.Remote, old)
	require.NoError(t, err)
	m, err := b.Infra.Git.Mirror(r.Remote)
	require.NoError(t, err)
	f, err := os.OpenFile(strings.TrimSuffix(m.Dir, ".git")+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	done := make(chan error, 1)
	go func() { done <- b.Infra.PlanPullRequest(b.ctx, "live", 7, old) }()
	time.Sleep(300 * time.Millisecond)

	r.PushPR(&p, map[string]string{infratest.VPC + "/main.tf": r.Resource(infratest.VPC, "vpc", `"vpc-v3"`)})
	b.deliverID(t, "d-sync", r.Event(p, "synchronize", ""))
	require.NoError(t, b.Infra.HandleDelivery(b.ctx, "d-sync"))
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_UN))
	require.NoError(t, <-done)

	plans, err := models.PlansOfPullRequest(b.ctx, b.DB.Bun, "live", 7, old)
	require.NoError(t, err)
	require.Empty(t, plans, "nothing is queued for the superseded head %s", old)
}

// TestReopenedPlanGetsItsOwnJob: closed and reopened while the plan's job
// was still stopping; the plan queued again has a job of its own (a new
// generation), which the old one cannot take or spoil.
func TestReopenedPlanGetsItsOwnJob(t *testing.T) {
	t.Parallel()
	b := setup(t, options{noWorkers: true})
	r := b.repo
	p := r.OpenPR(7, map[string]string{infratest.VPC + "/main.tf": r.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
	b.deliverID(t, "d-open", r.Event(p, "opened", ""))
	require.NoError(t, b.Infra.HandleDelivery(b.ctx, "d-open"))
	require.NoError(t, b.Infra.PlanPullRequest(b.ctx, "live", 7, p.Head))
	plans, err := models.PlansOfPullRequest(b.ctx, b.DB.Bun, "live", 7, p.Head)
	require.NoError(t, err)
	require.Len(t, plans, 1)
	first, err := models.PRPlanByID(b.ctx, b.DB.Bun, plans[0].ID)
	require.NoError(t, err)
	started, err := models.StartPRPlan(b.ctx, b.DB.Bun, first.ID, first.Generation)
	require.NoError(t, err)
	require.True(t, started, "a worker runs the plan")

	b.deliverID(t, "d-close", r.Event(p, "closed", ""))
	require.NoError(t, b.Infra.HandleDelivery(b.ctx, "d-close"))
	b.deliverID(t, "d-reopen", r.Event(p, "reopened", ""))
	require.NoError(t, b.Infra.HandleDelivery(b.ctx, "d-reopen"))
	require.NoError(t, b.Infra.PlanPullRequest(b.ctx, "live", 7, p.Head))

	again, err := models.PRPlanByID(b.ctx, b.DB.Bun, first.ID)
	require.NoError(t, err)
	require.Equal(t, models.PlanQueued, again.Status)
	require.Equal(t, first.Generation+1, again.Generation)
	require.NotEqual(t, *first.JobID, *again.JobID, "a job of its own")
	started, err = models.StartPRPlan(b.ctx, b.DB.Bun, first.ID, first.Generation)
	require.NoError(t, err)
	require.False(t, started, "the old job cannot take the plan queued again")
}

// TestOneScanPerRun: two jobs for one run at once (the second enqueued by a
// release while the first was retrying); only one takes the lock and scans.
func TestOneScanPerRun(t *testing.T) {
	t.Parallel()
	b := setup(t, options{noWorkers: true})
	r := b.repo
	p := r.OpenPR(7, map[string]string{infratest.VPC + "/main.tf": r.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
	sha := r.Merge(p.Branch)
	b.deliverID(t, "d-merge", r.Event(p, "closed", sha))
	require.NoError(t, b.Infra.HandleDelivery(b.ctx, "d-merge"))
	run, err := models.RunOfMerge(b.ctx, b.DB.Bun, "live", sha)
	require.NoError(t, err)

	errs := make(chan error, 2)
	for job := range int64(2) {
		go func() { errs <- b.Infra.StartRun(b.ctx, run.ID, 100+job) }()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	scans, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Target: infra.RunTarget(run.ID), Event: infra.EventRunScanned, Limit: 10})
	require.NoError(t, err)
	require.Len(t, scans, 1)
	require.Equal(t, map[string]string{infratest.VPC: models.ExecRunning, infratest.RDS: models.ExecWaiting, infratest.EC2: models.ExecWaiting},
		b.executions(t, run.ID))
	// A third job for the run, later, does nothing either.
	require.NoError(t, b.Infra.StartRun(b.ctx, run.ID, 102))
	run, err = models.RunByID(b.ctx, b.DB.Bun, run.ID)
	require.NoError(t, err)
	require.NotEmpty(t, run.BaseCommit, "the run records what the merge was compared with")
}

// TestRunsTakeTheLockInMergeOrder: the newer merge's job comes first; it
// waits for the older one, which takes the lock.
func TestRunsTakeTheLockInMergeOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, options{noWorkers: true})
	r := b.repo
	var runs []*models.Run
	for i, files := range []map[string]string{
		{infratest.DNS + "/main.tf": r.Resource(infratest.DNS, "zone", `"dns-v2"`)},
		{infratest.EC2 + "/main.tf": r.Resource(infratest.EC2, "ec2", `"ec2 medium"`)},
	} {
		p := r.OpenPR(20+i, files)
		sha := r.Merge(p.Branch)
		id := fmt.Sprintf("d-merge-%d", i)
		b.deliverID(t, id, r.Event(p, "closed", sha))
		require.NoError(t, b.Infra.HandleDelivery(b.ctx, id))
		run, err := models.RunOfMerge(b.ctx, b.DB.Bun, "live", sha)
		require.NoError(t, err)
		runs = append(runs, run)
	}
	require.NoError(t, b.Infra.StartRun(b.ctx, runs[1].ID, 1))
	newer, err := models.RunByID(b.ctx, b.DB.Bun, runs[1].ID)
	require.NoError(t, err)
	require.Equal(t, models.RunQueued, newer.Status, "the newer merge waits for the older one")
	require.NoError(t, b.Infra.StartRun(b.ctx, runs[0].ID, 2))
	lock, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.Equal(t, runs[0].ID, lock.RunID)
}

// TestPlanThatCannotRunFails: a plan that never ran (the account has a
// plan role and this Gantry no AWS access) fails its execution, and what
// depends on it is aborted; it does not count as "no changes".
func TestPlanThatCannotRunFails(t *testing.T) {
	t.Parallel()
	s := servertest.Services(t)
	repo, _ := infratest.Standard(t)
	yaml := repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{ada}, 1, 1)
	s.Sync(t, strings.Replace(yaml, "        depends_on: [shared]\n", "        depends_on: [shared]\n        plan_role: arn:aws:iam::123456789012:role/Plan\n", 1))
	s.Infra.Roles = nil
	s.StartWorkers(t)
	b := &bundle{Server: s, repo: repo, ctx: t.Context()}

	p := repo.OpenPR(7, map[string]string{infratest.VPC + "/main.tf": repo.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
	_, run := b.merge(t, p)
	run = b.WaitRun(t, run.ID, models.RunSucceeded, models.RunFailed)
	require.Equal(t, models.RunFailed, run.Status)
	require.Equal(t, map[string]string{infratest.VPC: models.ExecFailed, infratest.RDS: models.ExecAborted, infratest.EC2: models.ExecAborted},
		b.executions(t, run.ID))
	require.Contains(t, b.mustExecution(t, run.ID, infratest.VPC).Error, "no AWS access configured")
}
