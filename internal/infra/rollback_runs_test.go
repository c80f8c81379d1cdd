package infra_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// rollbackExecution is run's rollback execution of unit, or nil.
func (b *bundle) rollbackExecution(t *testing.T, runID int64, unit string) *models.Execution {
	t.Helper()
	xs, err := models.ExecutionsOfRun(b.ctx, b.DB.Bun, runID)
	require.NoError(t, err)
	for i := range xs {
		if xs[i].CfgPath == unit && xs[i].RollbackOf != nil {
			return &xs[i]
		}
	}
	return nil
}

// waitRollback waits until run's rollback of unit has status and step.
func (b *bundle) waitRollback(t *testing.T, runID int64, unit, status, step string) *models.Execution {
	t.Helper()
	var x *models.Execution
	servertest.WaitFor(t, func() (bool, string) {
		if x = b.rollbackExecution(t, runID, unit); x == nil {
			return false, "no rollback of " + unit
		}
		return x.Status == status && x.Step == step, fmt.Sprintf("rollback of %s is %s/%s (%s), want %s/%s", unit, x.Status, x.Step, x.Error, status, step)
	})
	return x
}

// voteRollback votes decision on the nth request (from 1) to vote on the
// rollback of unit in run, with its mailed link.
func (b *bundle) voteRollback(t *testing.T, run *models.Run, unit, decision string, nth int) approval.Result {
	t.Helper()
	b.waitRollback(t, run.ID, unit, models.ExecRunning, models.StepVoting)
	var found []mailtest.Message
	servertest.WaitFor(t, func() (bool, string) {
		found = nil
		for _, m := range b.Mail.Messages() {
			if slices.Contains(m.To, ada) && strings.Contains(m.Subject, "Vote to roll back "+unit+" ") &&
				strings.HasSuffix(m.Subject, fmt.Sprintf("#%d", run.PRNumber)) {
				found = append(found, m)
			}
		}
		return len(found) >= nth, fmt.Sprintf("%d rollback vote requests for %s, want %d", len(found), unit, nth)
	})
	m := found[nth-1]
	require.Contains(t, m.Text, "ROLLBACK", "the mail says it is a rollback")
	match := voteLink.FindStringSubmatch(m.Text)
	require.NotNil(t, match, "no voting link in:\n%s", m.Text)
	_, result, err := b.Infra.Approvals.VoteWithLink(b.ctx, match[1], decision, "")
	require.NoError(t, err)
	return result.Result
}

// filerUnit adds the filer provider to unit as filerFiles does for vpc:
// resources at the root (one, and with count) and in a module with
// for_each whose resources use for_each; refuse makes filer_file.single
// refuse to be destroyed.
func filerUnit(p infratest.FilerProvider, unit, out string, refuse bool) map[string]string {
	files := filerFiles(p, out)
	if unit != infratest.VPC {
		for _, name := range []string{"/filer.tf", "/net/main.tf"} {
			files[unit+name] = files[infratest.VPC+name]
			delete(files, infratest.VPC+name)
		}
	}
	if refuse {
		files[unit+"/filer.tf"] = strings.Replace(files[unit+"/filer.tf"], "resource \"filer_file\" \"single\" {\n",
			"resource \"filer_file\" \"single\" {\n  refuse_destroy = true\n", 1)
	}
	return files
}

// A unit whose apply fails its plan: downstream of vpc (it reads vpc's
// state), so it plans once vpc is applied.
func failingRDS(b *bundle) string {
	return b.repo.Resource(infratest.RDS, "rds", `file("/nonexistent/gantry-rollback-test")`, infratest.VPC)
}

// The seed's rollback: a pull request adds a provider to vpc (resources in
// a module, with count and for_each); vpc is applied, then rds downstream
// fails. The run is not over: a rollback execution of vpc, marked as such,
// plans a destroy of exactly the recorded addresses, asks the voters and
// applies it, while the merge lock stays held; the files are gone, vpc's
// other resources stay, and the run ends failed.
func TestRollback_failedRunDestroysNewProviderResources(t *testing.T) {
	t.Parallel()
	b, p := setupWithFiler(t)
	out := t.TempDir()
	files := filerUnit(p, infratest.VPC, out, false)
	files[infratest.RDS+"/main.tf"] = failingRDS(b)
	sha, run := b.merge(t, b.repo.OpenPR(41, files))
	b.approve(t, run, infratest.VPC)
	for _, f := range filerPaths {
		require.FileExists(t, filepath.Join(out, f))
	}
	b.WaitExecution(t, run.ID, infratest.RDS, models.ExecFailed, models.StepPlanning)

	rb := b.waitRollback(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	vpc := b.mustExecution(t, run.ID, infratest.VPC)
	require.Equal(t, vpc.ID, *rb.RollbackOf)
	require.Equal(t, infra.RollbackExecutionID(vpc.ExecutionID), rb.ExecutionID)
	require.True(t, strings.HasPrefix(rb.ExecutionID, "rollback-41-"), rb.ExecutionID)
	var targets []string
	for _, a := range rb.PlanCommand {
		if t, ok := strings.CutPrefix(a, "-target="); ok {
			targets = append(targets, t)
		}
	}
	require.Equal(t, filerAddresses, targets, "one -target per recorded address")
	require.Contains(t, rb.PlanCommand, "-destroy")
	full, err := models.ExecutionByID(b.ctx, b.DB.Bun, rb.ID)
	require.NoError(t, err)
	require.Contains(t, full.PlanOutput, "5 to destroy")
	require.Equal(t, models.RunRunning, b.WaitRun(t, run.ID, models.RunRunning).Status, "the run is not over while it rolls back")
	lock, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.NotNil(t, lock)
	require.Equal(t, run.ID, lock.RunID, "the merge lock stays held")

	// /approvals and the vote pages describe it as a rollback.
	sum, ok, err := b.Infra.Approvals.Describe(b.ctx, infra.ExecutionSubject(rb.ExecutionID))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "Infrastructure rollback vote", sum.Label)
	require.Equal(t, "Roll back "+infratest.VPC, sum.Title)
	require.Contains(t, sum.Text, "5 to destroy")

	require.Equal(t, approval.Approved, b.voteRollback(t, run, infratest.VPC, "approve", 1).State)
	b.waitRollback(t, run.ID, infratest.VPC, models.ExecSucceeded, models.StepApplying)
	ended := b.WaitRun(t, run.ID, models.RunFailed)
	require.Contains(t, ended.Error, "failed: "+infratest.RDS)
	for _, f := range filerPaths {
		require.NoFileExists(t, filepath.Join(out, f), "the rollback destroyed it")
	}
	require.Equal(t, "vpc-v1", b.repo.Output(infratest.VPC), "vpc's other resources stay")
	lock, err = models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.Nil(t, lock, "released when the rollback ended")

	for _, event := range []string{infra.EventRollbackQueued, infra.EventRollbackSucceeded} {
		entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Event: event, Deployment: infra.DeploymentID(run), Limit: 10})
		require.NoError(t, err)
		require.Len(t, entries, 1, event)
		require.Equal(t, infra.ExecutionTarget(rb.ExecutionID), entries[0].TargetID)
		require.Len(t, entries[0].Detail["addresses"], len(filerAddresses))
	}
	st := b.WaitStatus(t, sha, infra.RollbackStatusContext(infratest.VPC), "success")
	require.Contains(t, st.Description, "rolled back: 5 resources of new providers destroyed")
}

// A rollback that fails (filer_file.single refuses to be destroyed) is
// held: never retried on its own, the run stays running with the merge
// lock, and what is left in the state is recorded, logged and posted. An
// operator may retry it (a new plan and vote) or mark it resolved, which
// is logged with who, and the run ends.
func TestRollback_failedRollbackWaitsForAnOperator(t *testing.T) {
	t.Parallel()
	b, p := setupWithFiler(t)
	out := t.TempDir()
	files := filerUnit(p, infratest.VPC, out, true)
	files[infratest.RDS+"/main.tf"] = failingRDS(b)
	pr := b.repo.OpenPR(42, files)
	other := b.repo.OpenPR(46, map[string]string{"README.md": "# infrastructure, reworded\n"})
	b.Deliver(t, "pull_request", b.repo.Event(other, "opened", ""))
	sha, run := b.merge(t, pr)
	b.approve(t, run, infratest.VPC)
	require.Equal(t, approval.Approved, b.voteRollback(t, run, infratest.VPC, "approve", 1).State)
	rb := b.waitRollback(t, run.ID, infratest.VPC, models.ExecFailed, models.StepApplying)
	require.Contains(t, rb.Error, "apply")

	recs, err := models.RollbacksOfRun(b.ctx, b.DB.Bun, run.ID)
	require.NoError(t, err)
	rec := recs[rb.ID]
	require.Empty(t, rec.RemainingError)
	require.Contains(t, rec.Remaining, "filer_file.single", "refused: still in the state")
	require.Less(t, len(rec.Remaining), len(filerAddresses), "the others were destroyed")
	require.FileExists(t, filepath.Join(out, "single"))
	st := b.WaitStatus(t, sha, infra.RollbackStatusContext(infratest.VPC), "failure")
	require.Contains(t, st.Description, "an operator must retry it or mark it resolved")
	entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Event: infra.EventRollbackFailed, Deployment: infra.DeploymentID(run), Limit: 10})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Contains(t, entries[0].Detail["remaining"], "filer_file.single")

	// The operators are mailed (the voters), and the metric counts it.
	held := heldMails(t, b, run, 1)[0]
	require.Contains(t, held.Text, "Left in the state (")
	require.Contains(t, held.Text, "  filer_file.single\n")
	require.Contains(t, held.Text, servertest.BaseURL+"/infra/executions/"+rb.ExecutionID)
	require.Contains(t, held.Text, infra.RollbackHeldExplanation)
	reg := prometheus.NewRegistry()
	infra.NewMetrics(reg, b.DB)
	require.Equal(t, map[string]float64{"live": 1}, gauge(t, reg, "gantry_infra_rollbacks_held"))

	locked := b.WaitStatus(t, other.Head, github.ContextMergeLock, "failure")
	require.Equal(t, "locked by #42: its deployment is rolling back", locked.Description, "pull requests learn why they wait")
	waiting := b.WaitRun(t, run.ID, models.RunRunning)
	require.Equal(t, models.RunRunning, waiting.Status, "the run waits for an operator")
	lock, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.NotNil(t, lock, "the merge lock stays held")

	t.Run("bad choices are refused", func(t *testing.T) {
		err := b.Infra.ResolveRollback(b.ctx, rb.ExecutionID, "ignore", "ops@example.com", "")
		var ae *apperr.Error
		require.ErrorAs(t, err, &ae)
		require.Contains(t, ae.Error(), "choice")
		vpc := b.mustExecution(t, run.ID, infratest.VPC)
		err = b.Infra.ResolveRollback(b.ctx, vpc.ExecutionID, infra.RollbackChoiceResolved, "ops@example.com", "")
		require.ErrorContains(t, err, "is not a rollback")
	})

	// Retried: planned again and put to the voters again; rejected this
	// time, it fails again and keeps what was left.
	require.NoError(t, b.Infra.ResolveRollback(b.ctx, rb.ExecutionID, infra.RollbackChoiceRetry, "ops@example.com", "trying once more"))
	st = b.WaitStatus(t, sha, infra.RollbackStatusContext(infratest.VPC), "pending")
	require.Equal(t, "rollback retried by ops@example.com: planning the destroy again", st.Description)
	require.Equal(t, approval.Rejected, b.voteRollback(t, run, infratest.VPC, "reject", 2).State)
	b.waitRollback(t, run.ID, infratest.VPC, models.ExecFailed, models.StepVoting)
	recs, err = models.RollbacksOfRun(b.ctx, b.DB.Bun, run.ID)
	require.NoError(t, err)
	require.Equal(t, rec.Remaining, recs[rb.ID].Remaining)

	require.Contains(t, heldMails(t, b, run, 2)[1].Text, "  filer_file.single\n", "failed again: mailed again")
	b.WaitStatus(t, sha, infra.RollbackStatusContext(infratest.VPC), "failure")

	require.NoError(t, b.Infra.ResolveRollback(b.ctx, rb.ExecutionID, infra.RollbackChoiceResolved, "ops@example.com", "removed by hand"))
	b.WaitRun(t, run.ID, models.RunFailed)
	require.Equal(t, map[string]float64{"live": 0}, gauge(t, reg, "gantry_infra_rollbacks_held"), "resolved: no longer held")
	st = b.WaitStatus(t, sha, infra.RollbackStatusContext(infratest.VPC), "success")
	require.Equal(t, "rollback marked resolved by ops@example.com", st.Description)
	entries, err = models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Event: infra.EventRollbackResolved, Deployment: infra.DeploymentID(run), Limit: 10})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "ops@example.com", entries[0].Actor)
	require.Equal(t, "removed by hand", entries[0].Detail["reason"])
	err = b.Infra.ResolveRollback(b.ctx, rb.ExecutionID, infra.RollbackChoiceRetry, "ops@example.com", "")
	require.ErrorContains(t, err, "marked resolved by ops@example.com")
}

// heldMails waits for n mails to the voter ada saying that run's rollback
// of vpc failed, and returns them.
func heldMails(t *testing.T, b *bundle, run *models.Run, n int) []mailtest.Message {
	t.Helper()
	var found []mailtest.Message
	servertest.WaitFor(t, func() (bool, string) {
		found = nil
		for _, m := range b.Mail.Messages() {
			if slices.Contains(m.To, ada) &&
				m.Subject == fmt.Sprintf("[Gantry] Rollback of %s (%s) failed for live#%d: an operator must act", infratest.VPC, b.mustExecution(t, run.ID, infratest.VPC).AccountName, run.PRNumber) {
				found = append(found, m)
			}
		}
		return len(found) >= n, fmt.Sprintf("%d failed-rollback mails, want %d", len(found), n)
	})
	return found
}

// Aborting a run that rolls back ends its rollbacks' commit statuses: a
// rollback that had not ended is aborted (error), one held for an
// operator says the run was aborted (never left asking for a choice
// Gantry no longer takes), and neither can be retried or resolved.
func TestRollback_abortEndsTheRollbackStatuses(t *testing.T) {
	t.Parallel()
	b, p := setupWithFiler(t)
	out := t.TempDir()
	files := filerUnit(p, infratest.VPC, out, false)
	files[infratest.RDS+"/main.tf"] = failingRDS(b)
	sha, run := b.merge(t, b.repo.OpenPR(47, files))
	b.approve(t, run, infratest.VPC)
	rb := b.waitRollback(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	b.WaitStatus(t, sha, infra.RollbackStatusContext(infratest.VPC), "pending")

	require.NoError(t, b.Infra.AbortRun(b.ctx, run.ID, "ops@example.com", "taking over"))
	b.WaitRun(t, run.ID, models.RunFailed)
	st := b.WaitStatus(t, sha, infra.RollbackStatusContext(infratest.VPC), "error")
	require.Equal(t, "rollback aborted by ops@example.com: what it had not destroyed is left", st.Description)
	for _, choice := range []string{infra.RollbackChoiceRetry, infra.RollbackChoiceResolved} {
		err := b.Infra.ResolveRollback(b.ctx, rb.ExecutionID, choice, "ops@example.com", "")
		require.ErrorContains(t, err, "is aborted", choice)
	}
}

// A rollback held for an operator when its run is aborted: its status
// says so, and it can no longer be retried or marked resolved (the run
// is over: that would start or end it again).
func TestRollback_abortWhileARollbackIsHeld(t *testing.T) {
	t.Parallel()
	b, p := setupWithFiler(t)
	out := t.TempDir()
	files := filerUnit(p, infratest.VPC, out, true)
	files[infratest.RDS+"/main.tf"] = failingRDS(b)
	sha, run := b.merge(t, b.repo.OpenPR(48, files))
	b.approve(t, run, infratest.VPC)
	require.Equal(t, approval.Approved, b.voteRollback(t, run, infratest.VPC, "approve", 1).State)
	rb := b.waitRollback(t, run.ID, infratest.VPC, models.ExecFailed, models.StepApplying)
	b.WaitStatus(t, sha, infra.RollbackStatusContext(infratest.VPC), "failure")

	require.NoError(t, b.Infra.AbortRun(b.ctx, run.ID, "ops@example.com", "taking over"))
	b.WaitRun(t, run.ID, models.RunFailed)
	servertest.WaitFor(t, func() (bool, string) {
		st, _ := b.GitHub.Latest(sha, infra.RollbackStatusContext(infratest.VPC))
		return st.Description == "rollback failed and its run was aborted by ops@example.com: destroy what is left by hand", st.Description
	})
	for _, choice := range []string{infra.RollbackChoiceRetry, infra.RollbackChoiceResolved} {
		err := b.Infra.ResolveRollback(b.ctx, rb.ExecutionID, choice, "ops@example.com", "")
		require.ErrorContains(t, err, "what its rollbacks left is an operator's to deal with by hand", choice)
	}
	entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Event: infra.EventRunFailed, Deployment: infra.DeploymentID(run), Limit: 10})
	require.NoError(t, err)
	require.Len(t, entries, 1, "the run ended once")
}

// The seed's revert: a pull request adds a unit with a new provider and is
// applied; a revert pull request deletes the unit. Its state still holds
// the provider's resources, which Terraform could no longer destroy from
// the trunk (the provider block is gone): the revert's run rolls them
// back from the last commit where the unit existed.
func TestRollback_revertedUnitFromTheLastCommitWhereItExisted(t *testing.T) {
	t.Parallel()
	b, p := setupWithFiler(t)
	out := t.TempDir()
	const unit = "live/prod/files"
	files := filerUnit(p, unit, out, false)
	files[unit+"/terragrunt.hcl"] = "include \"root\" {\n  path = find_in_parent_folders(\"root.hcl\")\n}\n"
	files[unit+"/main.tf"] = b.repo.Resource(unit, "files", `"files-v1"`)
	_, run := b.merge(t, b.repo.OpenPR(43, files))
	b.approve(t, run, unit)
	b.WaitRun(t, run.ID, models.RunSucceeded)
	for _, f := range filerPaths {
		require.FileExists(t, filepath.Join(out, f))
	}

	// The account's voters change before the revert: today's decide it.
	b.Sync(t, b.repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{ada}, 1, 1))
	revert := map[string]string{unit: ""}
	_, run2 := b.merge(t, b.repo.OpenPR(44, revert))
	rb := b.waitRollback(t, run2.ID, unit, models.ExecRunning, models.StepVoting)
	require.Equal(t, []string{ada}, rb.Voters, "the account's voters now, not those of the run that applied it")
	require.True(t, strings.HasPrefix(rb.ExecutionID, "rollback-43-"), "named after the execution it rolls back: %s", rb.ExecutionID)
	run2 = b.WaitRun(t, run2.ID, models.RunRunning)
	require.Equal(t, []string{unit}, run2.DeletedUnits)
	recs, err := models.RollbacksOfRun(b.ctx, b.DB.Bun, run2.ID)
	require.NoError(t, err)
	require.Equal(t, models.RollbackUnitDeleted, recs[rb.ID].Reason)
	require.Equal(t, run2.BaseCommit, recs[rb.ID].Commit, "the trunk before the revert: the last commit with the unit")
	require.NotEqual(t, run2.MergeCommit, recs[rb.ID].Commit)
	// A new unit's every provider is new to it, the built-in one too.
	require.Equal(t, append(slices.Clone(filerAddresses), "terraform_data.files"), recs[rb.ID].Addresses)
	require.Equal(t, b.mustExecution(t, run.ID, unit).ID, *rb.RollbackOf)

	require.Equal(t, approval.Approved, b.voteRollback(t, run2, unit, "approve", 1).State)
	b.WaitRun(t, run2.ID, models.RunSucceeded)
	for _, f := range filerPaths {
		require.NoFileExists(t, filepath.Join(out, f), "destroyed from the last commit where the unit existed")
	}

	// Rolled back once: a later deletion elsewhere finds nothing standing.
	standing, err := models.StandingNewResources(b.ctx, b.DB.Bun, "live", run2.ID+1, []string{unit})
	require.NoError(t, err)
	require.Empty(t, standing)
}

// A run whose downstream execution the voters reject rolls back too: vpc's
// new provider resources are destroyed once rds is rejected, and ec2 below
// it aborted.
func TestRollback_rejectedExecutionRollsTheRunBack(t *testing.T) {
	t.Parallel()
	b, p := setupWithFiler(t)
	out := t.TempDir()
	files := filerUnit(p, infratest.VPC, out, false)
	files[infratest.RDS+"/main.tf"] = b.repo.Resource(infratest.RDS, "rds", `"rds v2 in ${data.terraform_remote_state.vpc.outputs.id}"`, infratest.VPC)
	_, run := b.merge(t, b.repo.OpenPR(45, files))
	b.approve(t, run, infratest.VPC)
	b.WaitExecution(t, run.ID, infratest.RDS, models.ExecRunning, models.StepVoting)
	_, err := b.Infra.Vote(b.ctx, infra.VoteInput{ExecutionID: b.mustExecution(t, run.ID, infratest.RDS).ExecutionID,
		Voter: ada, Decision: "reject", Comment: "not now", Via: "api"})
	require.NoError(t, err)
	b.WaitExecution(t, run.ID, infratest.RDS, models.ExecFailed, models.StepVoting)
	require.Equal(t, models.ExecAborted, b.executions(t, run.ID)[infratest.EC2])

	require.Equal(t, approval.Approved, b.voteRollback(t, run, infratest.VPC, "approve", 1).State)
	b.WaitRun(t, run.ID, models.RunFailed)
	for _, f := range filerPaths {
		require.NoFileExists(t, filepath.Join(out, f))
	}
	require.Equal(t, "vpc-v1", b.repo.Output(infratest.VPC))
}

// An apply that fails part way still introduced what it created: vpc's
// apply creates filer_file.made, then fails on filer_file.unwritable
// (its path cannot be written). What exists is recorded as after a
// successful apply, and the run's rollback destroys it.
func TestRollback_failedApplyRollsBackWhatItCreated(t *testing.T) {
	t.Parallel()
	b, p := setupWithFiler(t)
	out := t.TempDir()
	made := filepath.Join(out, "made")
	files := map[string]string{infratest.VPC + "/filer.tf": p.Required() +
		infratest.FilerFile("made", fmt.Sprintf("%q", made), `"one"`, "") +
		infratest.FilerFile("unwritable", `"/dev/null/unwritable"`, `"two"`, "  depends_on = [filer_file.made]\n")}
	_, run := b.merge(t, b.repo.OpenPR(47, files))
	b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	vpc := b.mustExecution(t, run.ID, infratest.VPC)
	_, err := b.Infra.Vote(b.ctx, infra.VoteInput{ExecutionID: vpc.ExecutionID, Voter: ada, Decision: "approve", Via: "api"})
	require.NoError(t, err)
	b.WaitExecution(t, run.ID, infratest.VPC, models.ExecFailed, models.StepApplying)
	require.FileExists(t, made, "the apply created it before it failed")

	recs, err := models.NewResourcesOfRun(b.ctx, b.DB.Bun, run.ID)
	require.NoError(t, err)
	require.Empty(t, recs[vpc.ID].Error)
	require.Equal(t, []string{"filer_file.made"}, recs[vpc.ID].Addresses, "what the failed apply created, not what it failed to")
	entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Event: infra.EventNewResourcesRecorded, Deployment: infra.DeploymentID(run), Limit: 10})
	require.NoError(t, err)
	require.Len(t, entries, 1)

	require.Equal(t, approval.Approved, b.voteRollback(t, run, infratest.VPC, "approve", 1).State)
	b.waitRollback(t, run.ID, infratest.VPC, models.ExecSucceeded, models.StepApplying)
	b.WaitRun(t, run.ID, models.RunFailed)
	require.NoFileExists(t, made, "the rollback destroyed it")
}
