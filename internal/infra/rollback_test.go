package infra_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

// setupWithFiler is setup with the filer test provider installable by
// the units' commands (through its filesystem mirror).
func setupWithFiler(t *testing.T) (*bundle, infratest.FilerProvider) {
	t.Helper()
	b := setup(t, options{noWorkers: true})
	p := infratest.Filer(t)
	b.Infra.Env = append(b.Infra.Env, p.Env()...)
	b.StartWorkers(t)
	return b, p
}

// filerFiles adds the filer provider to vpc with resources at the root
// (one, and with count) and in a module with for_each whose resources use
// for_each, writing their files under out.
func filerFiles(p infratest.FilerProvider, out string) map[string]string {
	return map[string]string{
		infratest.VPC + "/filer.tf": p.Required() +
			infratest.FilerFile("single", fmt.Sprintf("%q", out+"/single"), `"one"`, "") +
			infratest.FilerFile("counted", fmt.Sprintf("%q", out+"/counted-${count.index}"), `"c"`, "  count = 2\n") +
			fmt.Sprintf("\nmodule \"net\" {\n  source   = \"./net\"\n  for_each = toset([\"east\"])\n  out      = %q\n  name     = each.key\n}\n", out),
		infratest.VPC + "/net/main.tf": "terraform {\n  required_providers {\n    filer = {\n      source = \"gantryhq/filer\"\n    }\n  }\n}\n\n" +
			"variable \"out\" {\n  type = string\n}\n\nvariable \"name\" {\n  type = string\n}\n\n" +
			infratest.FilerFile("subnet", `"${var.out}/${var.name}-${each.key}"`, "each.key", "  for_each = toset([\"a\", \"b\"])\n"),
	}
}

// The filer resources filerFiles makes, by full address, and their files.
var (
	filerAddresses = []string{
		`filer_file.counted[0]`, `filer_file.counted[1]`, `filer_file.single`,
		`module.net["east"].filer_file.subnet["a"]`, `module.net["east"].filer_file.subnet["b"]`,
	}
	filerPaths = []string{"single", "counted-0", "counted-1", "east-a", "east-b"}
)

var voteLink = regexp.MustCompile(regexp.QuoteMeta(servertest.BaseURL) + `/approvals/link/(\S+)`)

// approve votes for unit's execution in run and waits for its apply.
func (b *bundle) approve(t *testing.T, run *models.Run, unit string) {
	t.Helper()
	b.WaitExecution(t, run.ID, unit, models.ExecRunning, models.StepVoting)
	// The request to vote on this run's execution, not an earlier run's.
	m := b.Mail.Wait(t, servertest.Wait, func(m mailtest.Message) bool {
		return slices.Contains(m.To, ada) && strings.Contains(m.Subject, "Vote on "+unit+" ") &&
			strings.HasSuffix(m.Subject, fmt.Sprintf("#%d", run.PRNumber))
	})
	match := voteLink.FindStringSubmatch(m.Text)
	require.NotNil(t, match, "no voting link in:\n%s", m.Text)
	token := match[1]
	_, result, err := b.Infra.Approvals.VoteWithLink(b.ctx, token, "approve", "")
	require.NoError(t, err)
	require.Equal(t, approval.Approved, result.State)
	b.WaitExecution(t, run.ID, unit, models.ExecSucceeded, models.StepApplying)
}

// After each successful apply Gantry records, from terraform show -json,
// the resources of the providers the apply introduced to its unit, by full
// address (module path, count and for_each keys), and logs them; a unit
// whose providers were all there before records none.
func TestApply_recordsNewProviderResources(t *testing.T) {
	t.Parallel()
	b, p := setupWithFiler(t)
	out := t.TempDir()
	files := filerFiles(p, out)
	files[infratest.DNS+"/main.tf"] = b.repo.Resource(infratest.DNS, "zone", `"dns-v2"`)
	_, run := b.merge(t, b.repo.OpenPR(21, files))
	b.approve(t, run, infratest.DNS)
	b.approve(t, run, infratest.VPC)
	b.WaitRun(t, run.ID, models.RunSucceeded)
	for _, f := range filerPaths {
		require.FileExists(t, filepath.Join(out, f), "the apply created the filer resources")
	}

	recs, err := models.NewResourcesOfRun(b.ctx, b.DB.Bun, run.ID)
	require.NoError(t, err)
	vpc, dns := b.mustExecution(t, run.ID, infratest.VPC), b.mustExecution(t, run.ID, infratest.DNS)
	require.Len(t, recs, 2, "rds and ec2 had no changes: nothing applied, nothing recorded")
	require.Empty(t, recs[vpc.ID].Error)
	require.Equal(t, []string{infratest.FilerAddress}, recs[vpc.ID].Providers)
	require.Equal(t, filerAddresses, recs[vpc.ID].Addresses)
	require.Empty(t, recs[dns.ID].Error)
	require.Empty(t, recs[dns.ID].Providers, "dns's only provider was in its state before")
	require.Empty(t, recs[dns.ID].Addresses)

	entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Event: infra.EventNewResourcesRecorded, Deployment: infra.DeploymentID(run), Limit: 10})
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the apply that introduced a provider is logged")
	require.Equal(t, infra.ExecutionTarget(vpc.ExecutionID), entries[0].TargetID)
	require.Len(t, entries[0].Detail["addresses"], len(filerAddresses))

	// A later deployment of the unit that keeps the provider introduces
	// nothing, although it adds a resource of it.
	more := filerFiles(p, out)
	more[infratest.VPC+"/more.tf"] = infratest.FilerFile("more", fmt.Sprintf("%q", out+"/more"), `"m"`, "")
	_, run2 := b.merge(t, b.repo.OpenPR(22, more))
	b.approve(t, run2, infratest.VPC)
	b.WaitRun(t, run2.ID, models.RunSucceeded)
	require.FileExists(t, filepath.Join(out, "more"))
	recs, err = models.NewResourcesOfRun(b.ctx, b.DB.Bun, run2.ID)
	require.NoError(t, err)
	vpc2 := b.mustExecution(t, run2.ID, infratest.VPC)
	require.Empty(t, recs[vpc2.ID].Error)
	require.Empty(t, recs[vpc2.ID].Addresses, "filer was in vpc's state before this run")

	// What the first apply recorded is what a rollback must destroy: a
	// destroy targeting exactly those addresses removes the first run's
	// filer resources and nothing else of the unit.
	args := []string{"apply", "-destroy", "-auto-approve", "-input=false", "-no-color"}
	for _, a := range filerAddresses {
		args = append(args, "-target="+a)
	}
	terraformWithFiler(t, b.repo, p, infratest.VPC, "init", "-input=false", "-no-color")
	terraformWithFiler(t, b.repo, p, infratest.VPC, args...)
	for _, f := range filerPaths {
		require.NoFileExists(t, filepath.Join(out, f))
	}
	require.FileExists(t, filepath.Join(out, "more"), "not introduced by the first run")
	require.Equal(t, "vpc-v1", b.repo.Output(infratest.VPC), "the unit's other resources stay")
}

// terraformWithFiler runs terraform in unit's directory of the work clone,
// with the filer provider installable.
func terraformWithFiler(t *testing.T, r *infratest.Repo, p infratest.FilerProvider, unit string, args ...string) {
	t.Helper()
	cmd := exec.Command("terraform", append([]string{"-chdir=" + filepath.Join(r.Work, unit)}, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + r.States, "TF_IN_AUTOMATION=1"}, p.Env()...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "terraform %s\n%s", strings.Join(args, " "), out)
}

// When what an apply introduced cannot be read (here an apply command
// wrapped in a shell script, from which no show -json can be derived),
// the apply still succeeds, and the error is recorded and logged for an
// operator: a rollback would have nothing to go by.
func TestApply_newProviderResourcesUnreadable(t *testing.T) {
	t.Parallel()
	s := servertest.Services(t)
	repo, _ := infratest.Standard(t)
	repo.Apply(infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2)
	yaml := repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{ada}, 1, 1)
	wrapped := "runner: terraform\n    commands:\n      apply: [sh, -c, 'exec terraform -chdir=\"$0\" apply -input=false -no-color \"$1\"', '{dir}', '{plan_file}']\n"
	require.Contains(t, yaml, "runner: terraform\n")
	s.Sync(t, strings.Replace(yaml, "runner: terraform\n", wrapped, 1))
	s.StartWorkers(t)
	b := &bundle{Server: s, repo: repo, ctx: t.Context()}

	_, run := b.merge(t, repo.OpenPR(23, map[string]string{infratest.DNS + "/main.tf": repo.Resource(infratest.DNS, "zone", `"dns-v3"`)}))
	b.approve(t, run, infratest.DNS)
	b.WaitRun(t, run.ID, models.RunSucceeded)
	require.Equal(t, "dns-v3", repo.Output(infratest.DNS), "the wrapped apply ran")

	dns := b.mustExecution(t, run.ID, infratest.DNS)
	recs, err := models.NewResourcesOfRun(b.ctx, b.DB.Bun, run.ID)
	require.NoError(t, err)
	require.Contains(t, recs[dns.ID].Error, "has no apply subcommand to derive terraform show -json from")
	require.Empty(t, recs[dns.ID].Addresses)
	entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Event: infra.EventNewResourcesRecorded, Deployment: infra.DeploymentID(run), Limit: 10})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, recs[dns.ID].Error, entries[0].Detail["error"])
}
