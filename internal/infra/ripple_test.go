package infra_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// App reads vpc's id through a dependency block, but only to check its
// shape: its plan has no changes for any vpc-v<digit>, and fails for
// anything else.
const App = "live/prod/app"

// setupRipple is the standard repository plus app, all applied, scanned
// with `scan: plan`: a run collects only the units whose plan has changes
// before anything is applied, so a change to vpc alone runs vpc alone —
// the case where its readers would be left stale.
func setupRipple(t *testing.T, edits ...func(yaml string) string) *bundle {
	t.Helper()
	return setupRippleWith(t, nil, edits...)
}

// readerHCL is a terragrunt.hcl with a dependency block on vpc.
const readerHCL = "include \"root\" {\n  path = find_in_parent_folders(\"root.hcl\")\n}\n\ndependency \"vpc\" {\n  config_path = \"../../prod/vpc\"\n}\n"

// setupRippleWith is setupRipple with more units (path → main.tf input),
// each reading vpc.
func setupRippleWith(t *testing.T, more map[string]string, edits ...func(yaml string) string) *bundle {
	t.Helper()
	s := servertest.NewWith(t, servertest.Options{NoWeb: true})
	repo, _ := infratest.Standard(t)
	files := map[string]string{
		App + "/terragrunt.hcl": readerHCL,
		App + "/main.tf": repo.Resource(App, "app",
			`length(regex("^vpc-v[0-9]$", data.terraform_remote_state.vpc.outputs.id)) > 0 ? "app ok" : "app no"`, infratest.VPC),
	}
	units := []string{infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2, App}
	for unit, input := range more {
		files[unit+"/terragrunt.hcl"] = readerHCL
		files[unit+"/main.tf"] = repo.Resource(unit, "reader", input, infratest.VPC)
		units = append(units, unit)
	}
	repo.Write(files)
	repo.Commit("readers of vpc")
	repo.Push(infratest.Trunk)
	repo.Apply(units...)
	yaml := strings.Replace(repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{ada, grace}, 1, 1),
		"scan: graph", "scan: plan", 1)
	for _, edit := range edits {
		yaml = edit(yaml)
	}
	s.Sync(t, yaml)
	s.StartWorkers(t)
	return &bundle{Server: s, repo: repo, ctx: t.Context()}
}

// vote casts ada's vote on unit's plan through her mailed link.
func (b *bundle) vote(t *testing.T, unit, choice string) {
	t.Helper()
	token := b.VoteMail(t, ada, unit)
	_, _, err := b.Infra.Approvals.VoteWithLink(b.ctx, token, choice, "")
	require.NoError(t, err)
}

func (b *bundle) ripples(t *testing.T, runID int64) (map[string]models.Ripple, map[string]models.OutputChanges) {
	t.Helper()
	xs, err := models.ExecutionsOfRun(b.ctx, b.DB.Bun, runID)
	require.NoError(t, err)
	byID, changesByID, err := models.RipplesOfRun(b.ctx, b.DB.Bun, runID)
	require.NoError(t, err)
	ripples, changes := map[string]models.Ripple{}, map[string]models.OutputChanges{}
	for _, x := range xs {
		if r, ok := byID[x.ID]; ok {
			ripples[x.CfgPath] = r
		}
		if c, ok := changesByID[x.ID]; ok {
			changes[x.CfgPath] = c
		}
	}
	return ripples, changes
}

func (b *bundle) events(t *testing.T, run *models.Run, event string) []models.LogEntry {
	t.Helper()
	entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Deployment: infra.DeploymentID(run), Limit: 500})
	require.NoError(t, err)
	var out []models.LogEntry
	for _, e := range entries {
		if e.Event == event {
			out = append(out, e)
		}
	}
	return out
}

// TestRipple_readersOfChangedOutputsJoinTheRun: a pull request changes
// only vpc's id. The run plans vpc alone; once vpc is applied its output
// changed, so rds (which reads it, with changes) joins the run, is voted
// on and applied, and its own changed output brings ec2 in the same way;
// app reads vpc too but its plan has no changes: it is checked, not
// voted. The merge lock is held until all of them are done.
func TestRipple_readersOfChangedOutputsJoinTheRun(t *testing.T) {
	t.Parallel()
	b := setupRipple(t)
	p := b.repo.OpenPR(8, map[string]string{
		infratest.VPC + "/main.tf": b.repo.Resource(infratest.VPC, "vpc", `"vpc-v2"`),
	})
	_, run := b.merge(t, p)
	b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	require.Equal(t, map[string]string{infratest.VPC: models.ExecRunning}, b.executions(t, run.ID),
		"the plan scan collects vpc alone: its readers show no changes before vpc is applied")

	b.vote(t, infratest.VPC, "approve")
	b.WaitExecution(t, run.ID, infratest.VPC, models.ExecSucceeded, models.StepApplying)
	rds := b.WaitExecution(t, run.ID, infratest.RDS, models.ExecRunning, models.StepVoting)
	require.Contains(t, rds.PlanOutput, `"rds in vpc-v2"`, "rds is planned against vpc's new output")
	require.Equal(t, []string{infratest.VPC}, rds.CfgDeps)
	app := b.WaitExecution(t, run.ID, App, models.ExecSucceeded, models.StepPlanning)
	require.NotNil(t, app.HasChanges)
	require.False(t, *app.HasChanges)
	require.Nil(t, app.ApprovalID, "a reader without changes needs no votes")

	// Still the run's: it holds the lock while rds waits for its votes.
	run = b.WaitRun(t, run.ID, models.RunRunning)
	lock, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.NotNil(t, lock)
	require.Equal(t, run.ID, lock.RunID)

	// The voters are told why rds, untouched by the pull request, is up
	// for a vote.
	m := b.Mail.Wait(t, servertest.Wait, func(m mailtest.Message) bool {
		return strings.Contains(m.Subject, "Vote on "+infratest.RDS+" ")
	})
	require.Contains(t, m.Text, "Why:         added because live/prod/vpc's outputs id changed (the pull request did not touch it)")
	b.vote(t, infratest.RDS, "approve")
	ec2 := b.WaitExecution(t, run.ID, infratest.EC2, models.ExecRunning, models.StepVoting)
	require.Contains(t, ec2.PlanOutput, `"ec2 small on rds in vpc-v2"`)
	b.vote(t, infratest.EC2, "approve")
	run = b.WaitRun(t, run.ID, models.RunSucceeded)
	require.Empty(t, run.Error)
	require.Equal(t, "rds in vpc-v2", b.repo.Output(infratest.RDS))
	require.Equal(t, "ec2 small on rds in vpc-v2", b.repo.Output(infratest.EC2))
	require.Equal(t, map[string]string{
		infratest.VPC: models.ExecSucceeded, infratest.RDS: models.ExecSucceeded,
		infratest.EC2: models.ExecSucceeded, App: models.ExecSucceeded,
	}, b.executions(t, run.ID))

	ripples, changes := b.ripples(t, run.ID)
	require.Equal(t, infratest.VPC, ripples[infratest.RDS].SourceUnit)
	require.Equal(t, []string{"id"}, ripples[infratest.RDS].Outputs)
	require.Equal(t, infratest.VPC, ripples[App].SourceUnit)
	require.Equal(t, infratest.RDS, ripples[infratest.EC2].SourceUnit)
	require.Equal(t, "added because live/prod/vpc's outputs id changed", infra.RippleReason(ptrTo(ripples[infratest.RDS])))
	require.Equal(t, []string{App, infratest.RDS}, changes[infratest.VPC].Readers)
	require.Equal(t, []string{"id"}, changes[infratest.VPC].Outputs)
	require.Equal(t, []string{infratest.EC2}, changes[infratest.RDS].Readers)
	require.Equal(t, []string{"id"}, changes[infratest.EC2].Outputs)
	require.Empty(t, changes[infratest.EC2].Readers, "ec2's output changed, but nothing reads it")
	require.Len(t, b.events(t, run, infra.EventExecutionRippled), 3)
	require.Len(t, b.events(t, run, infra.EventOutputsChanged), 3, "vpc, rds and ec2 changed their id")
	require.Equal(t, []string{infratest.VPC, infratest.RDS, App, infratest.EC2}, b.appliedOrderRipple(t, run))
}

// appliedOrderRipple is appliedOrder with the ripple executions, whose
// start order among independent ones (rds and app) is their ids'.
func (b *bundle) appliedOrderRipple(t *testing.T, run *models.Run) []string {
	t.Helper()
	order := b.appliedOrder(t, run)
	require.Len(t, order, 4)
	if order[1] == App {
		order[1], order[2] = order[2], order[1]
	}
	return order
}

func ptrTo[T any](v T) *T { return &v }

// TestRipple_unchangedOutputsRippleNothing: vpc gains a resource but its
// outputs stay the same: the comparison is recorded and no reader joins.
func TestRipple_unchangedOutputsRippleNothing(t *testing.T) {
	t.Parallel()
	b := setupRipple(t)
	p := b.repo.OpenPR(9, map[string]string{
		infratest.VPC + "/main.tf": b.repo.Resource(infratest.VPC, "vpc", `"vpc-v1"`) +
			"\nresource \"terraform_data\" \"flow_logs\" {\n  input = \"on\"\n}\n",
	})
	_, run := b.merge(t, p)
	b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	b.vote(t, infratest.VPC, "approve")
	run = b.WaitRun(t, run.ID, models.RunSucceeded)
	require.Equal(t, map[string]string{infratest.VPC: models.ExecSucceeded}, b.executions(t, run.ID))
	ripples, changes := b.ripples(t, run.ID)
	require.Empty(t, ripples)
	c, ok := changes[infratest.VPC]
	require.True(t, ok, "the outputs were compared")
	require.Empty(t, c.Outputs)
	require.Empty(t, c.Error)
	require.Empty(t, b.events(t, run, infra.EventOutputsChanged))
}

// TestRipple_failingReaderPlanFailsTheRun: vpc's new id is one app cannot
// take: app's ripple plan fails, which fails the run like any execution.
func TestRipple_failingReaderPlanFailsTheRun(t *testing.T) {
	t.Parallel()
	b := setupRipple(t)
	p := b.repo.OpenPR(10, map[string]string{
		infratest.VPC + "/main.tf": b.repo.Resource(infratest.VPC, "vpc", `"vpc-v10"`),
	})
	_, run := b.merge(t, p)
	b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	b.vote(t, infratest.VPC, "approve")
	app := b.WaitExecution(t, run.ID, App, models.ExecFailed, models.StepPlanning)
	require.Contains(t, app.Error, "plan failed")
	// rds, independent of app, still goes to its voters; rejecting it ends
	// the run.
	b.WaitExecution(t, run.ID, infratest.RDS, models.ExecRunning, models.StepVoting)
	b.vote(t, infratest.RDS, string(approval.Reject))
	run = b.WaitRun(t, run.ID, models.RunFailed)
	require.Contains(t, run.Error, App)
	lock, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.Nil(t, lock)
}

// TestRipple_uncomparableOutputsPlanEveryReader: the apply command is
// wrapped in a shell script, so no show -json can be derived from it and
// vpc's outputs cannot be compared. They may have changed: both readers
// are planned (here neither has changes, so neither is voted on) and the
// run succeeds.
func TestRipple_uncomparableOutputsPlanEveryReader(t *testing.T) {
	t.Parallel()
	b := setupRipple(t, func(yaml string) string {
		return strings.Replace(yaml, "runner: terraform\n",
			"runner: terraform\n    commands:\n      apply: [sh, -c, 'exec terraform -chdir=\"$0\" apply -input=false -no-color \"$1\"', '{dir}', '{plan_file}']\n", 1)
	})
	p := b.repo.OpenPR(11, map[string]string{
		infratest.VPC + "/main.tf": b.repo.Resource(infratest.VPC, "vpc", `"vpc-v1"`) +
			"\nresource \"terraform_data\" \"flow_logs\" {\n  input = \"on\"\n}\n",
	})
	_, run := b.merge(t, p)
	b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	b.vote(t, infratest.VPC, "approve")
	run = b.WaitRun(t, run.ID, models.RunSucceeded)
	require.Equal(t, map[string]string{infratest.VPC: models.ExecSucceeded, infratest.RDS: models.ExecSucceeded, App: models.ExecSucceeded},
		b.executions(t, run.ID))
	for _, unit := range []string{infratest.RDS, App} {
		x := b.mustExecution(t, run.ID, unit)
		require.False(t, *x.HasChanges, unit)
		require.Nil(t, x.ApprovalID, unit)
	}
	ripples, changes := b.ripples(t, run.ID)
	require.Empty(t, ripples[infratest.RDS].Outputs)
	require.Equal(t, "added because live/prod/vpc's outputs could not be compared after its apply, so they may have changed",
		infra.RippleReason(ptrTo(ripples[infratest.RDS])))
	require.Contains(t, changes[infratest.VPC].CompareError, "has no apply subcommand to derive terraform show -json from")
	require.Empty(t, changes[infratest.VPC].Error)
	require.Equal(t, []string{App, infratest.RDS}, changes[infratest.VPC].Readers)
}

// TestRipple_runUnitsWaitForTheReadersAdded: the pull request changes vpc
// and ec2. The plan scan collects both (rds, between them, has no changes
// yet), so ec2 waits only for vpc. When vpc's apply brings rds in, ec2
// waits for rds too, and is planned against rds's new output rather than
// alongside it.
func TestRipple_runUnitsWaitForTheReadersAdded(t *testing.T) {
	t.Parallel()
	b := setupRipple(t)
	p := b.repo.OpenPR(13, map[string]string{
		infratest.VPC + "/main.tf": b.repo.Resource(infratest.VPC, "vpc", `"vpc-v2"`),
		infratest.EC2 + "/main.tf": b.repo.Resource(infratest.EC2, "ec2", `"ec2 large on ${data.terraform_remote_state.rds.outputs.id}"`, infratest.RDS),
	})
	_, run := b.merge(t, p)
	b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	require.Equal(t, []string{infratest.VPC}, b.mustExecution(t, run.ID, infratest.EC2).CfgDeps, "through rds, outside the run")
	b.vote(t, infratest.VPC, "approve")
	b.WaitExecution(t, run.ID, infratest.RDS, models.ExecRunning, models.StepVoting)
	ec2 := b.mustExecution(t, run.ID, infratest.EC2)
	require.Equal(t, models.ExecWaiting, ec2.Status, "ec2 waits for rds, added to the run")
	require.Equal(t, []string{infratest.RDS, infratest.VPC}, ec2.CfgDeps)
	b.vote(t, infratest.RDS, "approve")
	x := b.WaitExecution(t, run.ID, infratest.EC2, models.ExecRunning, models.StepVoting)
	require.Contains(t, x.PlanOutput, `"ec2 large on rds in vpc-v2"`)
	b.vote(t, infratest.EC2, "approve")
	b.WaitRun(t, run.ID, models.RunSucceeded)
	require.Equal(t, "ec2 large on rds in vpc-v2", b.repo.Output(infratest.EC2))
	_, changes := b.ripples(t, run.ID)
	require.Empty(t, changes[infratest.RDS].Readers, "ec2 was in the run already")
}

// TestRipple_readerUnderNoAccount: a unit reading vpc lies under no
// account, so it cannot join the run; app, which can, still does, and the
// run fails when it ends, saying which unit was left out and why.
func TestRipple_readerUnderNoAccount(t *testing.T) {
	t.Parallel()
	const peer = "live/dev/peer"
	b := setupRippleWith(t, map[string]string{peer: `"peer of ${data.terraform_remote_state.vpc.outputs.id}"`})
	p := b.repo.OpenPR(14, map[string]string{
		infratest.VPC + "/main.tf": b.repo.Resource(infratest.VPC, "vpc", `"vpc-v3"`),
		infratest.RDS + "/main.tf": b.repo.Resource(infratest.RDS, "rds", `"rds fixed"`),
		infratest.EC2 + "/main.tf": b.repo.Resource(infratest.EC2, "ec2", `"ec2 fixed"`),
	})
	_, run := b.merge(t, p)
	b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	b.vote(t, infratest.VPC, "approve")
	for _, unit := range []string{infratest.RDS, infratest.EC2} {
		b.WaitExecution(t, run.ID, unit, models.ExecRunning, models.StepVoting)
		b.vote(t, unit, "approve")
	}
	run = b.WaitRun(t, run.ID, models.RunFailed)
	require.Contains(t, run.Error, "no account's path contains live/dev/peer: add an account for it in gantry.yaml")
	require.Contains(t, run.Error, infra.RippleFailedNoRollback, "says why nothing is rolled back")
	xs := b.executions(t, run.ID)
	require.Equal(t, models.ExecSucceeded, xs[App], "app joined the run all the same")
	require.NotContains(t, xs, peer)
	_, changes := b.ripples(t, run.ID)
	require.Equal(t, []string{App}, changes[infratest.VPC].Readers)
	require.Len(t, b.events(t, run, infra.EventRippleFailed), 1)
	require.Equal(t, "peer of vpc-v1", b.repo.Output(peer), "never applied: an operator must look")
}
