package infra_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// TestPlanScan: scan type plan plans every unit at the merge commit and
// collects those whose plan has changes (exit code 2), not their unchanged
// dependents; a collected unit still waits for another collected unit it
// depends on through one that was left out.
func TestPlanScan(t *testing.T) {
	t.Parallel()
	s := servertest.Services(t)
	repo, _ := infratest.Standard(t)
	repo.Apply(infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2)
	yaml := strings.Replace(repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{ada}, 1, 1), "scan: graph", "scan: plan", 1)
	s.Sync(t, yaml)
	s.StartWorkers(t)
	b := &bundle{Server: s, repo: repo, ctx: t.Context()}

	p := repo.OpenPR(61, map[string]string{
		infratest.VPC + "/main.tf": repo.Resource(infratest.VPC, "vpc", `"vpc-v2"`),
		infratest.EC2 + "/main.tf": repo.Resource(infratest.EC2, "ec2", `"ec2 large on ${data.terraform_remote_state.rds.outputs.id}"`, infratest.RDS),
	})
	_, run := b.merge(t, p)
	b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	require.Equal(t, map[string]string{infratest.VPC: models.ExecRunning, infratest.EC2: models.ExecWaiting}, b.executions(t, run.ID),
		"rds and dns plan without changes at the merge commit")
	require.Equal(t, []string{infratest.VPC}, b.mustExecution(t, run.ID, infratest.EC2).CfgDeps, "ec2 waits for vpc through rds")
	require.Equal(t, "plan", run.Scan)
}

// TestUnreadableUnit_failsOnlyItselfAndItsDependents: a merge that makes
// one unit's dependency name a directory that does not exist fails that
// unit and aborts its dependents, each with the reason on its page, while
// the rest of the merge goes on.
func TestUnreadableUnit_failsOnlyItselfAndItsDependents(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	change := b.vpcChange("vpc-v2")
	change[infratest.RDS+"/terragrunt.hcl"] = "dependency \"vpc\" {\n  config_path = \"../vpc\"\n}\n\ndependency \"gone\" {\n  config_path = \"../gone\"\n}\n"
	p := b.repo.OpenPR(72, change)
	_, run := b.merge(t, p)
	b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	require.Equal(t, map[string]string{infratest.VPC: models.ExecRunning, infratest.RDS: models.ExecFailed, infratest.EC2: models.ExecAborted},
		b.executions(t, run.ID))
	why := infratest.RDS + `/terragrunt.hcl:6: dependency "gone": config_path ../gone is not a directory with terragrunt.hcl`
	require.Equal(t, "Gantry cannot read this unit's configuration:\n"+why, b.mustExecution(t, run.ID, infratest.RDS).Error)
	require.Equal(t, "aborted: it depends on "+infratest.RDS+", whose configuration Gantry cannot read:\n"+why,
		b.mustExecution(t, run.ID, infratest.EC2).Error)
	require.Equal(t, "Gantry cannot read this unit's configuration:\n"+why, b.logError(t, infra.ExecutionTarget(b.mustExecution(t, run.ID, infratest.RDS).ExecutionID), infra.EventExecutionFailed),
		"the log says why too")
	require.Equal(t, models.RunRunning, b.WaitRun(t, run.ID, models.RunRunning).Status, "the rest of the run goes on")

	// With rds broken on the trunk, a pull request that does not touch it
	// is still planned.
	other := b.repo.OpenPR(75, map[string]string{infratest.DNS + "/main.tf": b.repo.Resource(infratest.DNS, "zone", `"dns-v2"`)})
	res := b.Deliver(t, "pull_request", b.repo.Event(other, "opened", ""))
	require.Equal(t, infra.WebhookAccepted, res.Outcome, res.Message)
	b.WaitStatus(t, other.Head, github.PlanContext(infratest.DNS), "success")
}

// TestScan_updatesTheRepositorysPreviousGraph: the first run of a
// repository reads its graph whole; the next one updates that graph with
// what its merge changed, and collects what a whole read would.
func TestScan_updatesTheRepositorysPreviousGraph(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	scannedIncrementally := func(run *models.Run) any {
		entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Target: infra.RunTarget(run.ID), Event: infra.EventRunScanned})
		require.NoError(t, err)
		require.Len(t, entries, 1)
		return entries[0].Detail["incremental"]
	}
	_, first := b.merge(t, b.repo.OpenPR(73, b.vpcChange("vpc-v2")))
	b.WaitExecution(t, first.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	require.Equal(t, false, scannedIncrementally(first))
	require.NoError(t, b.Infra.AbortRun(b.ctx, first.ID, "user:olivia@example.com", "make way"))

	// rds now depends on dns as well: the updated graph must know it.
	p := b.repo.OpenPR(74, map[string]string{
		infratest.RDS + "/terragrunt.hcl": "dependency \"vpc\" {\n  config_path = \"../vpc\"\n}\n\ndependency \"dns\" {\n  config_path = \"../../shared/dns\"\n}\n",
		infratest.DNS + "/main.tf":        b.repo.Resource(infratest.DNS, "zone", `"dns-v2"`),
	})
	_, second := b.merge(t, p)
	b.WaitExecution(t, second.ID, infratest.DNS, models.ExecRunning, models.StepVoting)
	require.Equal(t, true, scannedIncrementally(second))
	require.Equal(t, map[string]string{infratest.DNS: models.ExecRunning, infratest.RDS: models.ExecWaiting, infratest.EC2: models.ExecWaiting},
		b.executions(t, second.ID))
	require.Equal(t, []string{infratest.DNS}, b.mustExecution(t, second.ID, infratest.RDS).CfgDeps, "rds waits for dns, which the update read")
}

// TestDeletedUnit: a pull request that removes a unit lists it on the run
// and creates no execution for it.
func TestDeletedUnit(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	p := b.repo.OpenPR(71, map[string]string{
		infratest.EC2 + "/terragrunt.hcl": "",
		infratest.EC2 + "/main.tf":        "",
		infratest.DNS + "/main.tf":        b.repo.Resource(infratest.DNS, "zone", `"dns-v3"`),
	})
	_, run := b.merge(t, p)
	b.WaitExecution(t, run.ID, infratest.DNS, models.ExecRunning, models.StepVoting)
	run = b.WaitRun(t, run.ID, models.RunRunning)
	require.Equal(t, []string{infratest.EC2}, run.DeletedUnits)
	require.Equal(t, map[string]string{infratest.DNS: models.ExecRunning}, b.executions(t, run.ID))
}

// TestPlanRole: an account with a plan role runs its plan with the
// credentials of that role, assumed through STS for the command.
func TestPlanRole(t *testing.T) {
	t.Parallel()
	s := servertest.Services(t)
	repo, _ := infratest.Standard(t)
	const role = "arn:aws:iam::111111111111:role/terraform-plan"
	s.AWS.AddRole(role, 0)
	yaml := repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{ada}, 1, 1)
	yaml = strings.Replace(yaml, "runner: terraform\n", `runner: custom
    commands:
      plan: ["sh", "-c", "echo key=$AWS_ACCESS_KEY_ID secret=$AWS_SECRET_ACCESS_KEY token=$AWS_SESSION_TOKEN region=$AWS_REGION; touch \"$1\"", "plan", "{plan_file}"]
      apply: ["true", "{plan_file}"]
      destroy: ["true"]
`, 1)
	yaml = strings.Replace(yaml, "path: live/shared\n", "path: live/shared\n        plan_role: "+role+"\n", 1)
	s.Sync(t, yaml)
	s.StartWorkers(t)
	b := &bundle{Server: s, repo: repo, ctx: t.Context()}

	p := repo.OpenPR(81, map[string]string{infratest.DNS + "/main.tf": repo.Resource(infratest.DNS, "zone", `"dns-v2"`)})
	_, run := b.merge(t, p)
	x := b.WaitExecution(t, run.ID, infratest.DNS, models.ExecRunning, models.StepVoting)
	calls := s.AWS.CallsOf("AssumeRole")
	require.Len(t, calls, 1)
	require.Contains(t, x.PlanOutput, "key=ASIA", "the assumed session's key id")
	require.Contains(t, x.PlanOutput, "secret=****", "secrets are redacted from the output")
	require.Contains(t, x.PlanOutput, "token=****")
	require.NotContains(t, x.PlanOutput, "region=\n")
}

// customRunner swaps the terraform runner of the fixture's gantry.yaml
// entry for commands of the test's own.
func customRunner(yaml, plan string) string {
	return strings.Replace(yaml, "runner: terraform\n", `runner: custom
    commands:
      plan: `+plan+`
      apply: ["true", "{plan_file}"]
      destroy: ["true"]
`, 1)
}

// TestSynchronize_cancelsTheRunningPlan: a push while the previous head's
// plan runs cancels that plan's job, which stops its command at once, and
// plans the new head.
func TestSynchronize_cancelsTheRunningPlan(t *testing.T) {
	t.Parallel()
	s := servertest.Services(t)
	repo, _ := infratest.Standard(t)
	// A unit holding a file named slow plans for ten minutes.
	s.Sync(t, customRunner(repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{ada}, 1, 1),
		`["sh", "-c", "if [ -f \"$1/slow\" ]; then echo planning slowly; sleep 600; fi; touch \"$2\"", "plan", "{dir}", "{plan_file}"]`))
	s.StartWorkers(t)
	ctx := t.Context()

	p := repo.OpenPR(91, map[string]string{infratest.VPC + "/slow": "x\n"})
	s.Deliver(t, "pull_request", repo.Event(p, "opened", ""))
	var first models.PRPlan
	servertest.WaitFor(t, func() (bool, string) {
		plans, err := models.PlansOfPullRequest(ctx, s.DB.Bun, "live", p.Number, p.Head)
		require.NoError(t, err)
		if len(plans) != 1 {
			return false, "no plan yet"
		}
		first = plans[0]
		out, err := models.PRPlanOutput(ctx, s.DB.Bun, first.ID, 0)
		require.NoError(t, err)
		return strings.Contains(out.Text, "planning slowly"), "the slow plan has not started: " + first.Status
	})

	repo.PushPR(&p, map[string]string{infratest.VPC + "/slow": "", infratest.VPC + "/main.tf": repo.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
	s.Deliver(t, "pull_request", repo.Event(p, "synchronize", ""))
	s.WaitStatus(t, p.Head, "gantry/plan: "+infratest.VPC, "success")
	jobs, err := river.NewClient(riverpgxv5.New(s.DB.Pool), &river.Config{})
	require.NoError(t, err)
	servertest.WaitFor(t, func() (bool, string) {
		old, err := models.PRPlanByID(ctx, s.DB.Bun, first.ID)
		require.NoError(t, err)
		job, err := jobs.JobGet(ctx, *old.JobID)
		require.NoError(t, err)
		return old.Status == models.PlanCanceled && job.State == rivertype.JobStateCancelled,
			fmt.Sprintf("the old plan is %s, its job %s", old.Status, job.State)
	})
}
