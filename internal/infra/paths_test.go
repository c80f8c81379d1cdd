package infra_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// vpcChange changes vpc, which rds and ec2 depend on.
func (b *bundle) vpcChange(value string) map[string]string {
	return map[string]string{infratest.VPC + "/main.tf": b.repo.Resource(infratest.VPC, "vpc", `"`+value+`"`)}
}

func TestRejection_abortsDependentsAndReleasesTheLock(t *testing.T) {
	t.Parallel()
	b := setup(t, options{voters: []string{ada, grace}, minApprovals: 2, minRejections: 1})
	p := b.repo.OpenPR(3, b.vpcChange("vpc-v2"))
	other := b.repo.OpenPR(4, map[string]string{"README.md": "# infrastructure, reworded\n"})
	b.Deliver(t, "pull_request", b.repo.Event(other, "opened", ""))
	_, run := b.merge(t, p)

	b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	locked := b.WaitStatus(t, other.Head, github.ContextMergeLock, "failure")
	require.Equal(t, "locked by #3: its deployment is in progress", locked.Description)

	// One approval of the two needed, then a rejection: rejected.
	res, err := b.Infra.Vote(b.ctx, infra.VoteInput{ExecutionID: b.mustExecution(t, run.ID, infratest.VPC).ExecutionID, Voter: ada, Decision: "approve", Via: approvals.ViaAPI})
	require.NoError(t, err)
	require.Equal(t, approval.Pending, res.State)
	token := b.VoteMail(t, grace, infratest.VPC)
	_, res, err = b.Infra.Approvals.VoteWithLink(b.ctx, token, "reject", "wrong CIDR")
	require.NoError(t, err)
	require.Equal(t, approval.Rejected, res.State)

	run = b.WaitRun(t, run.ID, models.RunFailed)
	require.Equal(t, map[string]string{
		infratest.VPC: models.ExecFailed, infratest.RDS: models.ExecAborted, infratest.EC2: models.ExecAborted,
	}, b.executions(t, run.ID))
	require.Contains(t, b.mustExecution(t, run.ID, infratest.VPC).Error, "rejected by "+grace)
	require.Equal(t, "vpc-v1", b.repo.Output(infratest.VPC), "nothing was applied")

	lock, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.Nil(t, lock)
	unlocked := b.WaitStatus(t, other.Head, github.ContextMergeLock, "success")
	require.Contains(t, unlocked.Description, "unlocked", "open pull requests learn of the release without a push")

	// Decided: no more votes.
	_, err = b.Infra.Vote(b.ctx, infra.VoteInput{ExecutionID: b.mustExecution(t, run.ID, infratest.VPC).ExecutionID, Voter: ada, Decision: "approve", Via: approvals.ViaAPI})
	require.Error(t, err)
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err))
}

// TestFailingApply_appliesOnlyTheSavedPlan: the state moves on between the
// plan the voters saw and the apply; Gantry applies the saved plan, which
// terraform refuses as stale, so the execution fails rather than applying
// something nobody voted on, and its dependents are aborted.
func TestFailingApply_appliesOnlyTheSavedPlan(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	p := b.repo.OpenPR(5, b.vpcChange("vpc-v2"))
	_, run := b.merge(t, p)
	x := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	require.Contains(t, x.PlanOutput, `"vpc-v2"`)

	// Someone applies by hand meanwhile.
	infratest.Git(t, b.repo.Work, "checkout", "--quiet", infratest.Trunk)
	b.repo.Write(b.vpcChange("vpc-by-hand"))
	b.repo.Apply(infratest.VPC)
	infratest.Git(t, b.repo.Work, "checkout", "--quiet", "--", ".")

	_, res, err := b.Infra.Approvals.VoteWithLink(b.ctx, b.VoteMail(t, ada, infratest.VPC), "approve", "")
	require.NoError(t, err)
	require.Equal(t, approval.Approved, res.State)
	run = b.WaitRun(t, run.ID, models.RunFailed)
	vpc := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecFailed, models.StepApplying)
	require.Equal(t, "apply failed (exit code 1)", vpc.Error)
	require.Contains(t, vpc.ApplyOutput, "Saved plan is stale")
	require.Equal(t, "vpc-by-hand", b.repo.Output(infratest.VPC), "the stale plan was not applied")
	require.Equal(t, models.ExecAborted, b.executions(t, run.ID)[infratest.RDS])
	require.Equal(t, "failed: "+infratest.VPC, run.Error)
}

// TestMergeLock_secondMergeWaitsForTheFirst: two merges delivered at once;
// one run takes the lock, the other stays queued and starts when the first
// ends. A push to an open pull request meanwhile sees "locked".
func TestMergeLock_secondMergeWaitsForTheFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	first := b.repo.OpenPR(11, map[string]string{infratest.DNS + "/main.tf": b.repo.Resource(infratest.DNS, "zone", `"dns-v2"`)})
	second := b.repo.OpenPR(12, map[string]string{"live/prod/ec2/main.tf": b.repo.Resource(infratest.EC2, "ec2", `"ec2 medium"`)})
	waiting := b.repo.OpenPR(13, map[string]string{"README.md": "# waiting\n"})

	firstSHA := b.repo.Merge(first.Branch)
	secondSHA := b.repo.Merge(second.Branch)
	bodies := [][]byte{b.repo.Event(first, "closed", firstSHA), b.repo.Event(second, "closed", secondSHA)}
	done := make(chan infra.WebhookResult, 2)
	for _, body := range bodies {
		go func() { done <- b.Deliver(t, "pull_request", body) }()
	}
	for range bodies {
		require.Equal(t, infra.WebhookAccepted, (<-done).Outcome)
	}
	var runs []models.Run
	servertest.WaitFor(t, func() (bool, string) {
		var err error
		runs, err = models.ListRuns(b.ctx, b.DB.Bun, models.RunFilter{Repository: "live"})
		require.NoError(t, err)
		running, queued := 0, 0
		for _, r := range runs {
			switch r.Status {
			case models.RunRunning:
				running++
			case models.RunQueued:
				queued++
			}
		}
		return len(runs) == 2 && running == 1 && queued == 1, "want one run running and one queued"
	})
	holder, queued := runs[0], runs[1]
	if holder.Status != models.RunRunning {
		holder, queued = queued, holder
	}
	lock, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.Equal(t, holder.ID, lock.RunID)

	// A push to another pull request while the lock is held.
	b.repo.PushPR(&waiting, map[string]string{"README.md": "# waiting, pushed again\n"})
	b.Deliver(t, "pull_request", b.repo.Event(waiting, "synchronize", ""))
	st := b.WaitStatus(t, waiting.Head, github.ContextMergeLock, "failure")
	require.Equal(t, "http://gantry.test/infra/runs/"+itoa(holder.ID), st.TargetURL)

	// Approving the holder's only unit ends it; the queued run starts.
	holderUnit := infratest.DNS
	if holder.PRNumber == second.Number {
		holderUnit = infratest.EC2
	}
	_, _, err = b.Infra.Approvals.VoteWithLink(b.ctx, b.VoteMail(t, ada, holderUnit), "approve", "")
	require.NoError(t, err)
	b.WaitRun(t, holder.ID, models.RunSucceeded)
	b.WaitRun(t, queued.ID, models.RunRunning)
	lock, err = models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.Equal(t, queued.ID, lock.RunID)
	// The status still says the first holder until the lock's refresh job
	// has run: wait for the new holder, not just for a failure state.
	servertest.WaitFor(t, func() (bool, string) {
		st, _ = b.GitHub.Latest(waiting.Head, github.ContextMergeLock)
		return st.State == "failure" && strings.Contains(st.Description, "#"+itoa(int64(queued.PRNumber))),
			fmt.Sprintf("merge-lock status %+v, want failure naming #%d", st, queued.PRNumber)
	})
}

func TestWebhook_refusesIgnoresAndDeduplicates(t *testing.T) {
	t.Parallel()
	b := setup(t, options{noWorkers: true})
	p := b.repo.OpenPR(21, b.vpcChange("vpc-v2"))
	body := b.repo.Event(p, "opened", "")

	t.Run("bad signature is 401", func(t *testing.T) {
		for name, sig := range map[string]string{
			"other secret": github.Sign([]byte("not the secret"), body),
			"missing":      "",
			"sha1":         "sha1=0123456789abcdef0123456789abcdef01234567",
		} {
			_, err := b.Infra.ReceiveWebhook(b.ctx, infra.Delivery{Event: "pull_request", ID: "d-" + name, Signature: sig, Body: body})
			require.Equal(t, apperr.Unauthorized, apperr.CodeOf(err), name)
			if sig == "" {
				require.ErrorContains(t, err, "The delivery has no X-Hub-Signature-256 header", "a missing header is named as missing")
			} else {
				require.ErrorContains(t, err, "does not match the body")
			}
		}
		tampered := []byte(strings.Replace(string(body), `"number":21`, `"number":22`, 1))
		_, err := b.Infra.ReceiveWebhook(b.ctx, infra.Delivery{Event: "pull_request", ID: "d-tampered",
			Signature: github.Sign([]byte(servertest.WebhookSecret), body), Body: tampered})
		require.Equal(t, apperr.Unauthorized, apperr.CodeOf(err))
	})

	t.Run("ping is answered", func(t *testing.T) {
		ping := []byte(`{"zen":"Keep it logically awesome.","hook_id":1,"hook":{"type":"Repository","id":1,"events":["pull_request"],"config":{"content_type":"json"}},"repository":{"full_name":"acme/infra-live"},"sender":{"login":"octocat"}}`)
		res := b.Deliver(t, "ping", ping)
		require.Equal(t, infra.WebhookPing, res.Outcome)
		require.Equal(t, "pong", res.Message)
	})

	t.Run("events that are not Gantry's are 204", func(t *testing.T) {
		other := p
		otherBody := githubEvent(b, other, "opened", "develop", servertest.GitHubRepo, b.repo.Remote)
		require.Equal(t, infra.WebhookIgnored, b.Deliver(t, "pull_request", otherBody).Outcome, "not the trunk")
		unknown := githubEvent(b, other, "opened", "main", "acme/elsewhere", "/nowhere/elsewhere.git")
		require.Equal(t, infra.WebhookIgnored, b.Deliver(t, "pull_request", unknown).Outcome, "not a configured repository")
		labeled := githubEvent(b, other, "labeled", "main", servertest.GitHubRepo, b.repo.Remote)
		require.Equal(t, infra.WebhookIgnored, b.Deliver(t, "pull_request", labeled).Outcome, "an action that needs no plan")
		require.Equal(t, infra.WebhookIgnored, b.Deliver(t, "push", []byte(`{"ref":"refs/heads/main"}`)).Outcome)
	})

	t.Run("a redelivery does nothing twice", func(t *testing.T) {
		sha := b.repo.Merge(p.Branch)
		merged := b.repo.Event(p, "closed", sha)
		d := infra.Delivery{Event: "pull_request", ID: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
			Signature: github.Sign([]byte(servertest.WebhookSecret), merged), Body: merged}
		res, err := b.Infra.ReceiveWebhook(b.ctx, d)
		require.NoError(t, err)
		require.Equal(t, infra.WebhookAccepted, res.Outcome)
		res, err = b.Infra.ReceiveWebhook(b.ctx, d)
		require.NoError(t, err)
		require.Equal(t, infra.WebhookDuplicate, res.Outcome)
		require.Contains(t, res.Message, "already received")
		// The same merge under a new delivery id (GitHub's "redeliver"
		// keeps the id; a second hook would not) starts no second run.
		b.Deliver(t, "pull_request", merged)
		for i := 0; i < 3; i++ {
			require.NoError(t, b.Infra.HandleDelivery(b.ctx, d.ID))
		}
		runs, err := models.ListRuns(b.ctx, b.DB.Bun, models.RunFilter{Repository: "live"})
		require.NoError(t, err)
		require.Len(t, runs, 1)
	})
}

func githubEvent(b *bundle, p infratest.PR, action, base, repo, cloneURL string) []byte {
	e := b.repo.Event(p, action, "")
	s := strings.ReplaceAll(string(e), `"ref":"main"`, `"ref":"`+base+`"`)
	s = strings.ReplaceAll(s, `"full_name":"`+servertest.GitHubRepo+`"`, `"full_name":"`+repo+`"`)
	s = strings.ReplaceAll(s, `"clone_url":"`+b.repo.Remote+`"`, `"clone_url":"`+cloneURL+`"`)
	return []byte(s)
}

// TestMalformedTerragrunt: the pull request's plan status, its log and the
// run say which file and line do not parse.
func TestMalformedTerragrunt(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	p := b.repo.OpenPR(31, map[string]string{infratest.RDS + "/terragrunt.hcl": "dependency \"vpc\" {\n  config_path = \n}\n"})
	b.Deliver(t, "pull_request", b.repo.Event(p, "opened", ""))
	st := b.WaitStatus(t, p.Head, "gantry/plan", "error")
	require.Contains(t, st.Description, infratest.RDS+"/terragrunt.hcl:2")

	// The failed scan is in the pull request's log, once per head even
	// when the scan runs again (a retry, a redelivery).
	scanFailures := func() []models.LogEntry {
		entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Deployment: "live#31", Event: infra.EventPullRequestScanFailed})
		require.NoError(t, err)
		return entries
	}
	entries := scanFailures()
	require.Len(t, entries, 1)
	require.Equal(t, infra.RepositoryTarget("live"), entries[0].TargetID)
	require.Equal(t, p.Head, entries[0].Revision)
	require.Equal(t, p.Head, entries[0].Detail["head_commit"])
	require.Contains(t, entries[0].Detail["error"], infratest.RDS+"/terragrunt.hcl:2")
	require.NoError(t, b.Infra.PlanPullRequest(b.ctx, "live", p.Number, p.Head))
	require.Len(t, scanFailures(), 1, "the same head's failure is logged once")

	// The run fails the unit that does not parse and what depends on it,
	// each saying why, not the whole repository.
	_, run := b.merge(t, p)
	run = b.WaitRun(t, run.ID, models.RunFailed)
	require.Equal(t, "failed: "+infratest.RDS, run.Error)
	require.Equal(t, map[string]string{infratest.RDS: models.ExecFailed, infratest.EC2: models.ExecAborted}, b.executions(t, run.ID))
	require.Contains(t, b.mustExecution(t, run.ID, infratest.RDS).Error, infratest.RDS+"/terragrunt.hcl:2")
	require.Contains(t, b.mustExecution(t, run.ID, infratest.EC2).Error, "depends on "+infratest.RDS)
	require.Contains(t, b.mustExecution(t, run.ID, infratest.EC2).Error, infratest.RDS+"/terragrunt.hcl:2")
	lock, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.Nil(t, lock, "a run whose units all failed releases the lock")
}

// TestSynchronize_replansAndCancelsTheOlderHead.
func TestSynchronize_replansAndCancelsTheOlderHead(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	p := b.repo.OpenPR(41, b.vpcChange("vpc-v2"))
	old := p.Head
	b.Deliver(t, "pull_request", b.repo.Event(p, "opened", ""))
	b.WaitStatus(t, old, github.PlanContext(infratest.VPC), "success")

	b.repo.PushPR(&p, map[string]string{infratest.RDS + "/main.tf": b.repo.Resource(infratest.RDS, "rds", `"rds v2"`, infratest.VPC)})
	b.Deliver(t, "pull_request", b.repo.Event(p, "synchronize", ""))
	for _, unit := range []string{infratest.VPC, infratest.RDS} {
		b.WaitStatus(t, p.Head, github.PlanContext(unit), "success")
	}
	plans, err := models.PlansOfPullRequest(b.ctx, b.DB.Bun, "live", p.Number, p.Head)
	require.NoError(t, err)
	require.Len(t, plans, 2)
	pr, err := models.PullRequestByNumber(b.ctx, b.DB.Bun, "live", p.Number)
	require.NoError(t, err)
	require.Equal(t, p.Head, pr.HeadSHA)
}

// TestGiveUp: when a job's last attempt fails the execution fails and its
// dependents are aborted, instead of the run waiting forever.
func TestGiveUp(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	p := b.repo.OpenPR(51, b.vpcChange("vpc-v2"))
	_, run := b.merge(t, p)
	x := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	require.NoError(t, b.Infra.GiveUp(b.ctx, jobs.GiveUp{ExecutionID: x.ID}, errors.New("git: connection refused")))
	run = b.WaitRun(t, run.ID, models.RunFailed)
	x = b.WaitExecution(t, run.ID, infratest.VPC, models.ExecFailed, models.StepVoting)
	require.Equal(t, "gave up after the last retry: git: connection refused", x.Error)
	require.Equal(t, models.ExecAborted, b.executions(t, run.ID)[infratest.EC2])
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestFailedCommand_namesTheStepThatFailed: a .tf file that does not parse
// stops terraform init, and the pull request's plan, the execution, their
// commit status and their log entries say init failed, not the plan; a
// plan that fails after a good init still says plan.
func TestFailedCommand_namesTheStepThatFailed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, input, want, output string
	}{
		{"a syntax error fails init", "", "init failed (exit code 1)", "Invalid expression"},
		{"an undeclared reference fails the plan", "undeclared_thing.foo", "plan failed (exit code 1)", "Reference to undeclared resource"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{})
			p := b.repo.OpenPR(81, map[string]string{infratest.VPC + "/main.tf": b.repo.Resource(infratest.VPC, "vpc", tc.input)})
			b.Deliver(t, "pull_request", b.repo.Event(p, "opened", ""))
			st := b.WaitStatus(t, p.Head, github.PlanContext(infratest.VPC), "failure")
			require.Equal(t, tc.want, st.Description)
			plans, err := models.PlansOfPullRequest(b.ctx, b.DB.Bun, "live", p.Number, p.Head)
			require.NoError(t, err)
			require.Len(t, plans, 1)
			plan, err := models.PRPlanByID(b.ctx, b.DB.Bun, plans[0].ID)
			require.NoError(t, err)
			require.Equal(t, tc.want, plan.Error)
			require.Contains(t, plan.Output, tc.output)
			initFailed := strings.HasPrefix(tc.want, "init")
			require.Equal(t, initFailed, plan.ExitCode == nil, "a plan that never ran has no exit code of its own")
			require.Equal(t, tc.want, b.logError(t, infra.PlanTarget(plans[0].ID), infra.EventPlanFailed))

			_, run := b.merge(t, p)
			b.WaitRun(t, run.ID, models.RunFailed)
			x := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecFailed, models.StepPlanning)
			require.Equal(t, tc.want, x.Error)
			require.Contains(t, x.PlanOutput, tc.output)
			require.Equal(t, initFailed, x.PlanExitCode == nil)
			require.Equal(t, tc.want, b.logError(t, infra.ExecutionTarget(x.ExecutionID), infra.EventExecutionFailed))
		})
	}
}

// logError is the error in the detail of target's one event entry.
func (b *bundle) logError(t *testing.T, target, event string) any {
	t.Helper()
	entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Target: target, Event: event})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	return entries[0].Detail["error"]
}

// TestWebhook_unsetSecretsAreNamedOnlyInTheLog: a delivery that matches no
// secret, while a repository's secret variable is not set, is told that some
// are not set; which ones is for the operator's log, not for a sender who
// may be anyone.
func TestWebhook_unsetSecretsAreNamedOnlyInTheLog(t *testing.T) {
	t.Parallel()
	s := servertest.Services(t)
	repo, _ := infratest.Standard(t)
	s.Sync(t, repo.YAML("live", "GANTRY_TEST_SECRET_NOBODY_SET", servertest.StatusTokenEnv, []string{ada}, 1, 1))
	body := repo.Event(repo.OpenPR(3, map[string]string{infratest.VPC + "/main.tf": repo.Resource(infratest.VPC, "vpc", `"v2"`)}), "opened", "")
	_, err := s.Infra.ReceiveWebhook(t.Context(), infra.Delivery{Event: "pull_request", ID: "d-unset", Body: body})
	require.Equal(t, apperr.Unauthorized, apperr.CodeOf(err))
	require.ErrorContains(t, err, "secrets are not set on this Gantry; its log names them")
	require.NotContains(t, err.Error(), "GANTRY_TEST_SECRET_NOBODY_SET")
}
