package infra_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/models"
)

// TestMergedPullRequest_appliesInDependencyOrder is seed 000 end to end
// below the web layer: a pull request changing vpc, ec2 and the shared
// account's dns is planned per unit with commit statuses; after the merge
// Gantry works out the order (dns, because prod depends on the shared
// account; then vpc → rds → ec2), plans each unit only once everything it
// depends on is applied, mails the voters, applies on an approval, and rds's
// plan shows the vpc output applied moments before in the same run.
func TestMergedPullRequest_appliesInDependencyOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	r := b.repo
	p := b.repo.OpenPR(7, map[string]string{
		infratest.DNS + "/main.tf": r.Resource(infratest.DNS, "zone", `"dns-v2"`),
		infratest.VPC + "/main.tf": r.Resource(infratest.VPC, "vpc", `"vpc-v2"`),
		infratest.EC2 + "/main.tf": r.Resource(infratest.EC2, "ec2", `"ec2 large on ${data.terraform_remote_state.rds.outputs.id}"`, infratest.RDS),
	})

	// Opened: each changed unit is planned at the head, with a status each.
	res := b.Deliver(t, "pull_request", b.repo.Event(p, "opened", ""))
	require.Equal(t, infra.WebhookAccepted, res.Outcome, res.Message)
	for _, unit := range []string{infratest.DNS, infratest.VPC, infratest.EC2} {
		st := b.WaitStatus(t, p.Head, github.PlanContext(unit), "success")
		require.Equal(t, "changes to apply", st.Description)
		require.Regexp(t, `^http://gantry\.test/infra/plans/\d+$`, st.TargetURL)
	}
	_, planned := b.GitHub.Latest(p.Head, github.PlanContext(infratest.RDS))
	require.False(t, planned, "rds did not change in the pull request: no plan")
	lock := b.WaitStatus(t, p.Head, github.ContextMergeLock, "success")
	require.Contains(t, lock.Description, "unlocked")
	plans, err := models.PlansOfPullRequest(b.ctx, b.DB.Bun, "live", p.Number, p.Head)
	require.NoError(t, err)
	require.Len(t, plans, 3)

	// Merged: the run scans the merge and makes one execution per unit.
	mergeSHA, run := b.merge(t, p)
	dns := b.WaitExecution(t, run.ID, infratest.DNS, models.ExecRunning, models.StepVoting)
	require.Equal(t, map[string]string{
		infratest.DNS: models.ExecRunning, infratest.VPC: models.ExecWaiting,
		infratest.RDS: models.ExecWaiting, infratest.EC2: models.ExecWaiting,
	}, b.executions(t, run.ID), "vpc waits for the shared account; rds (a dependent of vpc) is collected too")
	require.Regexp(t, `^run-7-`+mergeSHA[:4]+`-shared-dns-\d{3}$`, dns.ExecutionID)
	require.Equal(t, []string{"shared"}, b.mustExecution(t, run.ID, infratest.VPC).AccountDeps)
	require.Equal(t, []string{infratest.VPC}, b.mustExecution(t, run.ID, infratest.RDS).CfgDeps)
	require.Contains(t, dns.PlanOutput, `"dns-v2"`)
	locked := b.WaitStatus(t, p.Head, github.ContextMergeLock, "success")
	require.NotNil(t, locked, "the merged pull request itself is not locked out")

	// Each unit: a mail to every voter, one approval applies exactly the
	// saved plan, and only then are its dependents planned.
	for _, unit := range []string{infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2} {
		x := b.WaitExecution(t, run.ID, unit, models.ExecRunning, models.StepVoting)
		token := b.VoteMail(t, ada, unit)
		b.VoteMail(t, grace, unit)
		if unit == infratest.RDS {
			require.Contains(t, x.PlanOutput, `"rds in vpc-v2"`, "rds is planned with the vpc output applied in this run")
		}
		claims, result, err := b.Infra.Approvals.VoteWithLink(b.ctx, token, "approve", "looks right")
		require.NoError(t, err)
		require.Equal(t, ada, claims.Voter)
		require.Equal(t, approval.Approved, result.State)
		b.WaitExecution(t, run.ID, unit, models.ExecSucceeded, models.StepApplying)
	}
	run = b.WaitRun(t, run.ID, models.RunSucceeded)
	require.Empty(t, run.Error)
	require.Equal(t, "dns-v2", r.Output(infratest.DNS))
	require.Equal(t, "vpc-v2", r.Output(infratest.VPC))
	require.Equal(t, "rds in vpc-v2", r.Output(infratest.RDS))
	require.Equal(t, "ec2 large on rds in vpc-v2", r.Output(infratest.EC2))

	// The lock is gone and the log tells the story in order.
	l, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.Nil(t, l)
	order := b.appliedOrder(t, run)
	require.Equal(t, []string{infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2}, order)
}

// appliedOrder reads from the log the order in which the run's executions
// started and checks each started only after its dependencies succeeded.
func (b *bundle) appliedOrder(t *testing.T, run *models.Run) []string {
	t.Helper()
	entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Deployment: infra.DeploymentID(run), Limit: 500})
	require.NoError(t, err)
	var started []string
	succeeded := map[string]bool{}
	xs, err := models.ExecutionsOfRun(b.ctx, b.DB.Bun, run.ID)
	require.NoError(t, err)
	byTarget := map[string]models.Execution{}
	for _, x := range xs {
		byTarget[infra.ExecutionTarget(x.ExecutionID)] = x
	}
	// The log lists newest first.
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		x, ok := byTarget[e.TargetID]
		if !ok {
			continue
		}
		switch e.Event {
		case infra.EventExecutionStarted:
			for _, d := range x.CfgDeps {
				require.True(t, succeeded[d], "%s started before its dependency %s succeeded", x.CfgPath, d)
			}
			started = append(started, x.CfgPath)
		case infra.EventExecutionSucceeded:
			succeeded[x.CfgPath] = true
		}
	}
	return started
}
