// Package infratest is the infrastructure repository Gantry's tests deploy:
// a real git repository with a bare remote on the local disk, Terragrunt
// units whose Terraform code uses only the built-in provider (so plan and
// apply run offline), and states in a directory of the test's, so that a
// unit's plan reads the outputs its dependencies applied.
//
// The standard layout is seed 000's example: vpc → rds → ec2 in account
// prod, an independent unit dns in account shared, and prod depending on
// shared.
package infratest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/internal/github/githubtest"
)

// Trunk is the fixture's trunk branch; GitHubRepo is the repository its
// deliveries say they come from.
const (
	Trunk      = "main"
	GitHubRepo = "acme/infra-live"
)

// Units of the standard layout, in the order they must be applied.
const (
	DNS = "live/shared/dns"
	VPC = "live/prod/vpc"
	RDS = "live/prod/rds"
	EC2 = "live/prod/ec2"
)

// Repo is a repository and its remote.
type Repo struct {
	t testing.TB
	// Work is the clone commits are made in; Remote is the bare repository
	// Gantry fetches (its URL); States holds the Terraform states.
	Work, Remote, States string
}

var hermetic = []string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
	"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com"}

// Git runs git in dir and returns its trimmed output.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), hermetic...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// New creates an empty repository with its remote.
func New(t testing.TB) *Repo {
	t.Helper()
	root := t.TempDir()
	r := &Repo{t: t, Work: filepath.Join(root, "work"), Remote: filepath.Join(root, "remote.git"), States: filepath.Join(root, "states")}
	for _, d := range []string{r.Work, r.States} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, root, "init", "--quiet", "--bare", "--initial-branch="+Trunk, r.Remote)
	Git(t, r.Work, "init", "--quiet", "--initial-branch="+Trunk)
	Git(t, r.Work, "remote", "add", "origin", r.Remote)
	return r
}

// Standard creates the repository with the standard layout committed and
// pushed to the trunk, and returns it with that commit's id.
func Standard(t testing.TB) (*Repo, string) {
	t.Helper()
	r := New(t)
	files := map[string]string{
		"live/root.hcl":           "# Included by every unit; not a unit itself.\nlocals {\n  owner = \"platform\"\n}\n",
		"live/shared/account.hcl": "locals {\n  account = \"shared\"\n}\n",
		"live/prod/account.hcl":   "locals {\n  account = \"prod\"\n}\n",
		DNS + "/terragrunt.hcl":   unitHCL(),
		DNS + "/main.tf":          r.Resource(DNS, "zone", `"dns-v1"`),
		VPC + "/terragrunt.hcl":   unitHCL(),
		VPC + "/main.tf":          r.Resource(VPC, "vpc", `"vpc-v1"`),
		RDS + "/terragrunt.hcl":   unitHCL("../vpc"),
		RDS + "/main.tf":          r.Resource(RDS, "rds", `"rds in ${data.terraform_remote_state.vpc.outputs.id}"`, VPC),
		EC2 + "/terragrunt.hcl":   unitHCL("../rds"),
		EC2 + "/main.tf":          r.Resource(EC2, "ec2", `"ec2 small on ${data.terraform_remote_state.rds.outputs.id}"`, RDS),
		"README.md":               "# infrastructure\n",
		".gitignore":              ".terraform/\n.terraform.lock.hcl\n",
	}
	r.Write(files)
	sha := r.Commit("standard layout")
	r.Push(Trunk)
	return r, sha
}

// unitHCL is a unit's terragrunt.hcl: the root include and a dependency
// block per dependency.
func unitHCL(deps ...string) string {
	var b strings.Builder
	b.WriteString("include \"root\" {\n  path = find_in_parent_folders(\"root.hcl\")\n}\n")
	for _, d := range deps {
		fmt.Fprintf(&b, "\ndependency %q {\n  config_path = %q\n}\n", filepath.Base(d), d)
	}
	return b.String()
}

// StatePath is where unit's state lives.
func (r *Repo) StatePath(unit string) string {
	return filepath.Join(r.States, strings.ReplaceAll(unit, "/", "_")+".tfstate")
}

// Resource is a unit's main.tf: one terraform_data resource with input
// (an HCL expression), its output "id", and the remote state of each unit
// it reads (data.terraform_remote_state.<leaf>).
func (r *Repo) Resource(unit, name, input string, reads ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "terraform {\n  backend \"local\" {\n    path = %q\n  }\n}\n", r.StatePath(unit))
	for _, dep := range reads {
		fmt.Fprintf(&b, "\ndata \"terraform_remote_state\" %q {\n  backend = \"local\"\n  config = {\n    path = %q\n  }\n}\n", filepath.Base(dep), r.StatePath(dep))
	}
	fmt.Fprintf(&b, "\nresource \"terraform_data\" %q {\n  input = %s\n}\n\noutput \"id\" {\n  value = terraform_data.%s.output\n}\n", name, input, name)
	return b.String()
}

// Write writes files (path → content; "" removes the file) into the work
// clone.
func (r *Repo) Write(files map[string]string) {
	r.t.Helper()
	for path, content := range files {
		full := filepath.Join(r.Work, path)
		if content == "" {
			if err := os.RemoveAll(full); err != nil {
				r.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
}

// Commit commits everything in the work clone and returns the commit id.
func (r *Repo) Commit(msg string) string {
	r.t.Helper()
	Git(r.t, r.Work, "add", "-A")
	Git(r.t, r.Work, "commit", "--quiet", "--allow-empty", "-m", msg)
	return Git(r.t, r.Work, "rev-parse", "HEAD")
}

// Branch switches the work clone to branch, creating it from the current
// commit when it does not exist.
func (r *Repo) Branch(branch string) {
	r.t.Helper()
	if exec.Command("git", "-C", r.Work, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch).Run() == nil {
		Git(r.t, r.Work, "checkout", "--quiet", branch)
		return
	}
	Git(r.t, r.Work, "checkout", "--quiet", "-b", branch)
}

// Push pushes branches to the remote.
func (r *Repo) Push(branches ...string) {
	r.t.Helper()
	Git(r.t, r.Work, append([]string{"push", "--quiet", "--force", "origin"}, branches...)...)
}

// PullRequest pushes branch as pull request number's head, as GitHub keeps
// it (refs/pull/N/head), and returns the head commit.
func (r *Repo) PullRequest(branch string, number int) string {
	r.t.Helper()
	r.Push(branch, fmt.Sprintf("%s:refs/pull/%d/head", branch, number))
	return Git(r.t, r.Work, "rev-parse", "refs/heads/"+branch)
}

// Merge merges branch into the trunk with a merge commit, as GitHub's
// "Create a merge commit" does, pushes the trunk and returns the merge
// commit.
func (r *Repo) Merge(branch string) string {
	r.t.Helper()
	Git(r.t, r.Work, "checkout", "--quiet", Trunk)
	Git(r.t, r.Work, "merge", "--quiet", "--no-ff", "-m", "Merge branch "+branch, branch)
	r.Push(Trunk)
	return Git(r.t, r.Work, "rev-parse", "HEAD")
}

// Head is the work clone's current commit.
func (r *Repo) Head() string {
	r.t.Helper()
	return Git(r.t, r.Work, "rev-parse", "HEAD")
}

// Terraform runs terraform in unit's directory of the work clone with a
// clean environment and returns its output.
func (r *Repo) Terraform(unit string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("terraform", append([]string{"-chdir=" + filepath.Join(r.Work, unit)}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + r.States, "TF_IN_AUTOMATION=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("terraform %s in %s: %v\n%s", strings.Join(args, " "), unit, err, out)
	}
	return string(out)
}

// Apply applies units, in the order given, as they are in the work clone:
// the state a repository has before the pull request under test. The
// .terraform directories it leaves are ignored by git.
func (r *Repo) Apply(units ...string) {
	r.t.Helper()
	for _, u := range units {
		r.Terraform(u, "init", "-input=false", "-no-color")
		r.Terraform(u, "apply", "-input=false", "-no-color", "-auto-approve")
	}
}

// Output is the "id" output in unit's state.
func (r *Repo) Output(unit string) string {
	r.t.Helper()
	return strings.Trim(strings.TrimSpace(r.Terraform(unit, "output", "-no-color", "-raw", "id")), `"`)
}

// YAML is the repository's entry in gantry.yaml: the terraform runner,
// accounts prod (depending on shared) and shared, voters and thresholds as
// given.
func (r *Repo) YAML(name, secretEnv, tokenEnv string, voters []string, minApprovals, minRejections int) string {
	return fmt.Sprintf(`repositories:
  - name: %s
    url: %s
    trunk: %s
    webhook_secret_env: %s
    status_token_env: %s
    scan: graph
    runner: terraform
    accounts:
      - name: shared
        path: live/shared
        voters: [%s]
        min_approvals: %d
        min_rejections: %d
      - name: prod
        path: live/prod
        depends_on: [shared]
        voters: [%s]
        min_approvals: %d
        min_rejections: %d
`, name, r.Remote, Trunk, secretEnv, tokenEnv, strings.Join(voters, ", "), minApprovals, minRejections, strings.Join(voters, ", "), minApprovals, minRejections)
}

// PR is a pull request of the repository.
type PR struct {
	Number       int
	Branch, Head string
}

// OpenPR commits files on a new branch off the trunk and pushes it as pull
// request number.
func (r *Repo) OpenPR(number int, files map[string]string) PR {
	r.t.Helper()
	branch := fmt.Sprintf("change-%d", number)
	Git(r.t, r.Work, "checkout", "--quiet", Trunk)
	r.Branch(branch)
	r.Write(files)
	r.Commit(fmt.Sprintf("change %d", number))
	return PR{Number: number, Branch: branch, Head: r.PullRequest(branch, number)}
}

// PushPR adds a commit to the pull request's branch.
func (r *Repo) PushPR(p *PR, files map[string]string) {
	r.t.Helper()
	Git(r.t, r.Work, "checkout", "--quiet", p.Branch)
	r.Write(files)
	r.Commit("another push")
	p.Head = r.PullRequest(p.Branch, p.Number)
}

// Event is the pull_request delivery of action on p (closed with
// mergeSHA set: merged), as GitHub sends it for this repository.
func (r *Repo) Event(p PR, action, mergeSHA string) []byte {
	r.t.Helper()
	return githubtest.PullRequest{
		Action: action, Number: p.Number, Title: fmt.Sprintf("Change %d", p.Number), Repo: GitHubRepo,
		CloneURL: r.Remote, Base: Trunk, BaseSHA: Git(r.t, r.Work, "rev-parse", "refs/heads/"+Trunk), Head: p.Branch, HeadSHA: p.Head,
		Merged: mergeSHA != "", MergeCommitSHA: mergeSHA, Author: "octocat",
	}.Payload()
}
