package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gantryhq/gantry/internal/runner"
)

// The demo's infrastructure repository is real: a bare git repository on the
// local disk (the repository's URL) whose Terragrunt-style units use only
// Terraform's built-in provider (terraform_data resources, outputs, and
// terraform_remote_state on local state files), so Gantry plans and applies
// it offline with the "terraform" runner. Its trunk was applied before pull
// request #42, whose merge is the demo's live run: it changes the IAM role in
// shared and the prod database, so the run is shared/iam, then prod/rds,
// then what reads the database (prod/ec2, whose input changes, and
// prod/monitoring, which has nothing to change and needs no vote).
//
// Shapes like internal/infra/infratest's, which tests use; that package is
// for tests only, so the few lines it takes live here too.

// Units of the demo repository, in the order the base is applied.
var demoUnits = []string{
	"live/shared/iam", "live/shared/dns",
	"live/staging/vpc", "live/staging/rds", "live/staging/app",
	"live/prod/vpc", "live/prod/rds", "live/prod/ec2", "live/prod/monitoring", "live/prod/cdn",
}

// liveRun is what the demo repository holds for the live run: the trunk
// before the merge, the pull request's head and the merge commit.
type liveRun struct {
	URL                     string // the bare repository
	Base, Head, MergeCommit string
}

const (
	liveBranch = "db-replica"
	livePR     = 42
	liveTitle  = "Bigger prod database with a read replica; alarms for it"
)

// tools reports what of git and terraform is missing from PATH ("" when
// both are there): without them the demo's run could not plan or apply.
func tools(lookPath func(string) (string, error)) string {
	var missing []string
	for _, t := range []string{"git", "terraform"} {
		if _, err := lookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	return strings.Join(missing, " and ")
}

// buildRepo makes the demo repository under dir (made absolute: commands
// run in checkouts elsewhere), replacing what an earlier database's demo
// left there: the states must match the runs of this database. It commits
// the base layout, applies it with terraform (the infrastructure as it was
// before the live run), and merges the pull request.
func buildRepo(ctx context.Context, dir string) (*liveRun, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	remote := filepath.Join(dir, "infra-live.git")
	states := filepath.Join(dir, "infra-live-states")
	work := filepath.Join(dir, "infra-live-work")
	for _, d := range []string{remote, states, work} {
		if err := os.RemoveAll(d); err != nil {
			return nil, err
		}
	}
	// The clone is only where the commits are made and the base applied.
	defer os.RemoveAll(work)
	for _, d := range []string{states, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	r := &repoBuilder{ctx: ctx, work: work, states: states}
	r.git(dir, "init", "--quiet", "--bare", "--initial-branch=main", remote)
	r.git(work, "init", "--quiet", "--initial-branch=main")
	r.git(work, "remote", "add", "origin", remote)

	r.write(r.baseFiles())
	base := r.commit("Platform layout: shared, staging and prod")
	r.git(work, "push", "--quiet", "origin", "main")
	for _, u := range demoUnits {
		r.terraform(u, "init", "-input=false", "-no-color")
		r.terraform(u, "apply", "-input=false", "-no-color", "-auto-approve")
	}

	r.git(work, "checkout", "--quiet", "-b", liveBranch)
	r.write(r.liveChange())
	head := r.commit(liveTitle)
	r.git(work, "push", "--quiet", "origin", liveBranch, fmt.Sprintf("%s:refs/pull/%d/head", liveBranch, livePR))
	r.git(work, "checkout", "--quiet", "main")
	r.git(work, "merge", "--quiet", "--no-ff", "-m", fmt.Sprintf("Merge pull request #%d from acme/%s", livePR, liveBranch), liveBranch)
	r.git(work, "push", "--quiet", "origin", "main")
	merge := r.git(work, "rev-parse", "HEAD")
	if r.err != nil {
		return nil, r.err
	}
	return &liveRun{URL: remote, Base: base, Head: head, MergeCommit: merge}, nil
}

// repoBuilder runs the commands that make the repository; the first error
// stops the rest.
type repoBuilder struct {
	ctx          context.Context
	work, states string
	err          error
}

// hermetic keeps the machine's git configuration (hooks, signing) out.
var hermetic = []string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
	"GIT_AUTHOR_NAME=Octocat", "GIT_AUTHOR_EMAIL=octocat@example.com", "GIT_COMMITTER_NAME=Octocat", "GIT_COMMITTER_EMAIL=octocat@example.com"}

// run runs a command through Gantry's one runner and returns its output.
func (r *repoBuilder) run(dir string, env []string, argv ...string) string {
	if r.err != nil {
		return ""
	}
	res, err := runner.Run(r.ctx, runner.Command{Argv: argv, Dir: dir, Env: env, Timeout: 2 * time.Minute}, nil)
	if err == nil && !res.Success() {
		err = errors.New(strings.TrimSpace(res.Output))
	}
	if err != nil {
		r.err = fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return strings.TrimSpace(res.Output)
}

func (r *repoBuilder) git(dir string, args ...string) string {
	return r.run(dir, hermetic, append([]string{"git"}, args...)...)
}

// terraform runs terraform in a unit of the clone, as Gantry's plans do
// (the runner's environment: PATH, HOME, LANG).
func (r *repoBuilder) terraform(unit string, args ...string) {
	r.run(filepath.Join(r.work, unit), []string{"TF_IN_AUTOMATION=1"}, append([]string{"terraform"}, args...)...)
}

func (r *repoBuilder) write(files map[string]string) {
	for path, content := range files {
		if r.err != nil {
			return
		}
		full := filepath.Join(r.work, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.err = err
			return
		}
		r.err = os.WriteFile(full, []byte(content), 0o644)
	}
}

func (r *repoBuilder) commit(msg string) string {
	r.git(r.work, "add", "-A")
	r.git(r.work, "commit", "--quiet", "-m", msg)
	return r.git(r.work, "rev-parse", "HEAD")
}

// hclString quotes s for HCL: Go's quoting, with template sequences
// escaped (a data directory may contain "${").
func hclString(s string) string {
	q := fmt.Sprintf("%q", s)
	return strings.NewReplacer("${", "$${", "%{", "%%{").Replace(q)
}

// statePath is where a unit's state lives, outside any checkout: every plan
// and apply runs in a fresh one.
func (r *repoBuilder) statePath(unit string) string {
	return filepath.Join(r.states, strings.ReplaceAll(unit, "/", "_")+".tfstate")
}

// terragruntHCL is a unit's terragrunt.hcl: the root include and a
// dependency block per unit it reads (Gantry orders the units by them).
func terragruntHCL(deps ...string) string {
	var b strings.Builder
	b.WriteString("include \"root\" {\n  path = find_in_parent_folders(\"root.hcl\")\n}\n")
	for _, d := range deps {
		fmt.Fprintf(&b, "\ndependency %q {\n  config_path = %q\n}\n", filepath.Base(d), d)
	}
	return b.String()
}

// mainTF is a unit's main.tf: its local backend, the remote state of each
// unit it reads (data.terraform_remote_state.<leaf>), then body.
func (r *repoBuilder) mainTF(unit, body string, reads ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: terraform_data stands in for the cloud resources, so the demo runs offline.\n", unit)
	fmt.Fprintf(&b, "terraform {\n  backend \"local\" {\n    path = %s\n  }\n}\n", hclString(r.statePath(unit)))
	for _, dep := range reads {
		fmt.Fprintf(&b, "\ndata \"terraform_remote_state\" %q {\n  backend = \"local\"\n  config = {\n    path = %s\n  }\n}\n", filepath.Base(dep), hclString(r.statePath(dep)))
	}
	b.WriteString("\n" + body)
	return b.String()
}

// unit is a unit's two files.
func (r *repoBuilder) unit(files map[string]string, path, body string, reads ...string) {
	var deps []string
	for _, d := range reads {
		rel, _ := filepath.Rel(path, d)
		deps = append(deps, rel)
	}
	files[path+"/terragrunt.hcl"] = terragruntHCL(deps...)
	files[path+"/main.tf"] = r.mainTF(path, body, reads...)
}

func (r *repoBuilder) baseFiles() map[string]string {
	files := map[string]string{
		"README.md":     "# infra-live\n\nAcme's infrastructure, deployed by Gantry: one Terragrunt unit per directory under live/<account>/.\nThis is gantry dev --demo's copy: terraform_data resources stand in for the cloud, so it plans and applies offline.\n",
		".gitignore":    ".terraform/\n.terraform.lock.hcl\n",
		"live/root.hcl": "# Included by every unit; not a unit itself.\nlocals {\n  owner = \"platform\"\n}\n",
	}
	for _, a := range []string{"shared", "staging", "prod"} {
		files["live/"+a+"/account.hcl"] = fmt.Sprintf("locals {\n  account = %q\n}\n", a)
	}
	r.unit(files, "live/shared/iam", iamTF(false))
	r.unit(files, "live/shared/dns", resourceTF("status_zone", `{
    name = "status.acme.example"
  }`, "zone_id", `"Z0425ACMESTATUS"`))
	r.unit(files, "live/staging/vpc", resourceTF("vpc", `{
    cidr            = "10.20.0.0/16"
    private_subnets = ["10.20.1.0/24", "10.20.2.0/24"]
  }`, "private_subnets", "terraform_data.vpc.output.private_subnets"))
	r.unit(files, "live/staging/rds", rdsTF("staging-main", "db.t4g.medium", false), "live/staging/vpc")
	r.unit(files, "live/staging/app", appTF("t4g.small", 1), "live/staging/rds")
	r.unit(files, "live/prod/vpc", resourceTF("vpc", `{
    cidr            = "10.30.0.0/16"
    private_subnets = ["10.30.1.0/24", "10.30.2.0/24", "10.30.3.0/24"]
  }`, "private_subnets", "terraform_data.vpc.output.private_subnets"))
	r.unit(files, "live/prod/rds", rdsTF("prod-main", "db.r6g.large", false), "live/prod/vpc")
	r.unit(files, "live/prod/ec2", appTF("m7g.large", 3), "live/prod/rds")
	r.unit(files, "live/prod/monitoring", `resource "terraform_data" "rds_cpu_alarm" {
  input = {
    metric    = "CPUUtilization"
    threshold = 80
    database  = data.terraform_remote_state.rds.outputs.identifier
  }
}
`, "live/prod/rds")
	r.unit(files, "live/prod/cdn", resourceTF("app", `{
    aliases     = ["www.acme.example"]
    price_class = "PriceClass_100"
  }`, "domain", `"d111111abcdef8.cloudfront.net"`))
	return files
}

// liveChange is pull request #42: the RDS monitoring policy in shared, and a
// bigger prod database with a read replica.
func (r *repoBuilder) liveChange() map[string]string {
	files := map[string]string{}
	r.unit(files, "live/shared/iam", iamTF(true))
	r.unit(files, "live/prod/rds", rdsTF("prod-main", "db.r6g.xlarge", true), "live/prod/vpc")
	return files
}

// resourceTF is one terraform_data resource and one output.
func resourceTF(name, input, output, value string) string {
	return fmt.Sprintf("resource \"terraform_data\" %q {\n  input = %s\n}\n\noutput %q {\n  value = %s\n}\n", name, input, output, value)
}

func iamTF(monitoring bool) string {
	policies := `["AmazonRDSReadOnlyAccess"]`
	if monitoring {
		policies = `["AmazonRDSReadOnlyAccess", "AmazonRDSEnhancedMonitoringRole"]`
	}
	return fmt.Sprintf(`resource "terraform_data" "rds_monitoring_role" {
  input = {
    name     = "rds-monitoring"
    policies = %s
  }
}

output "role" {
  value = terraform_data.rds_monitoring_role.output.name
}
`, policies)
}

// rdsTF is a database reading its VPC's subnets; its reader endpoint is the
// replica's when there is one, which is what the app servers read.
func rdsTF(id, class string, replica bool) string {
	s := fmt.Sprintf(`resource "terraform_data" "primary" {
  input = {
    identifier     = %q
    engine         = "postgres 16.4"
    instance_class = %q
    subnets        = data.terraform_remote_state.vpc.outputs.private_subnets
  }
}

output "identifier" {
  value = terraform_data.primary.output.identifier
}

output "endpoint" {
  value = "${terraform_data.primary.output.identifier}.cluster.eu-west-1.rds.example:5432"
}
`, id, class)
	reader := `"${terraform_data.primary.output.identifier}.cluster.eu-west-1.rds.example:5432"`
	if replica {
		s += fmt.Sprintf(`
resource "terraform_data" "replica" {
  input = {
    identifier          = "%s-replica-1"
    instance_class      = %q
    replicate_source_db = terraform_data.primary.output.identifier
  }
}
`, id, class)
		reader = `"${terraform_data.replica.output.identifier}.eu-west-1.rds.example:5432"`
	}
	return s + fmt.Sprintf("\noutput \"reader_endpoint\" {\n  value = %s\n}\n", reader)
}

// appTF is the app servers, configured with the database's endpoints.
func appTF(instanceType string, count int) string {
	return fmt.Sprintf(`resource "terraform_data" "app_servers" {
  input = {
    instance_type   = %q
    count           = %d
    database_url    = data.terraform_remote_state.rds.outputs.endpoint
    database_reader = data.terraform_remote_state.rds.outputs.reader_endpoint
  }
}
`, instanceType, count)
}
