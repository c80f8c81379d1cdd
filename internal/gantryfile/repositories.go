package gantryfile

import (
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/ecsrunner/ecsconfig"
)

// Repository is a Terragrunt/Terraform repository Gantry plans and applies
// (seed 000). Checked by `gantry config check`; the infrastructure flow that
// uses it is being built (docs/areas/infra.md).
type Repository struct {
	Name             string        `yaml:"name"`
	URL              string        `yaml:"url"`   // any git URL, a local path included
	Trunk            string        `yaml:"trunk"` // default main
	WebhookSecretEnv string        `yaml:"webhook_secret_env"`
	StatusTokenEnv   string        `yaml:"status_token_env"` // GitHub token for commit statuses
	Scan             string        `yaml:"scan"`             // graph (default) or plan
	Runner           string        `yaml:"runner"`           // terragrunt (default), terraform or custom
	Commands         Commands      `yaml:"commands"`         // runner: custom, or overrides
	CommitStatuses   *CommitStatus `yaml:"commit_statuses"`
	// PlanForks plans pull requests from forks too. Off by default: a
	// plan runs the pull request's code (Terraform external data sources,
	// Terragrunt run_cmd) with the plan role's credentials.
	PlanForks bool `yaml:"plan_forks"`
	// PlanComments keeps one comment on each pull request summing up its
	// plans (edited in place on every push), next to the commit statuses,
	// with the status token. On unless written false.
	PlanComments *bool `yaml:"plan_comments"`
	// Drift plans every unit on the trunk on a schedule; nil: never.
	Drift *Drift `yaml:"drift"`
	// RunsOn is where the commands run: local (the worker's machine, the
	// default) or ecs (a task per command, configured by ECS).
	RunsOn   string            `yaml:"runs_on"`
	ECS      *ecsconfig.Config `yaml:"ecs"`
	Accounts []Account         `yaml:"accounts"`
}

// Drift is a repository's drift detection: a plan of every unit of the
// trunk every Schedule ("every 6h"), never applied on its own; Notify are
// the addresses mailed when a unit is found drifted.
type Drift struct {
	Schedule string   `yaml:"schedule"`
	Notify   []string `yaml:"notify"`
	// Every is Schedule's interval, set by Parse.
	Every time.Duration `yaml:"-"`
}

// MinDriftInterval is the shortest drift schedule: a drift check plans
// every unit of the repository, which takes minutes and holds a worker.
const MinDriftInterval = 10 * time.Minute

// PlanCommentsEnabled reports whether the plan-summary comment is written.
func (r Repository) PlanCommentsEnabled() bool { return r.PlanComments == nil || *r.PlanComments }

// Commands are argument vectors with placeholders {dir} (the unit's
// directory in the checkout) and {plan_file}. Init, when set, runs before
// plan and before apply (each runs in a fresh checkout). A plan command with
// -detailed-exitcode tells "no changes" (0) from "changes" (2); such a
// plan needs no vote and applies nothing.
type Commands struct {
	Init    []string `yaml:"init"`
	Plan    []string `yaml:"plan"`
	Apply   []string `yaml:"apply"`
	Destroy []string `yaml:"destroy"`
}

// CommitStatus switches commit statuses on and off per kind (the seed's
// commit_status_config). Both default to on.
type CommitStatus struct {
	Plan      *bool `yaml:"plan"`
	MergeLock *bool `yaml:"merge_lock"`
}

// Account is a slice of the repository (a path prefix) with its roles and
// the people who vote on its plans.
type Account struct {
	Name      string   `yaml:"name"`
	Path      string   `yaml:"path"` // prefix of the units' directories
	DependsOn []string `yaml:"depends_on"`
	PlanRole  string   `yaml:"plan_role"`
	ApplyRole string   `yaml:"apply_role"`
	Voters    []string `yaml:"voters"`
	// The thresholds as the file writes them, nil when left out; Parse
	// sets MinApprovals and MinRejections from them, one vote each by
	// default. (Whether a key is there is the decoder's answer, so anchors
	// and aliases count like any other way of writing it.)
	WrittenMinApprovals  *int `yaml:"min_approvals"`
	WrittenMinRejections *int `yaml:"min_rejections"`
	MinApprovals         int  `yaml:"-"`
	MinRejections        int  `yaml:"-"`
}

// Runner presets. The terragrunt ones use the Terragrunt 1.x CLI (`run`,
// `--working-dir`), not the flags the seed's scripts used, which are gone.
var runnerPresets = map[string]Commands{
	"terragrunt": {
		Plan:    []string{"terragrunt", "run", "--working-dir", "{dir}", "--non-interactive", "--", "plan", "-input=false", "-no-color", "-detailed-exitcode", "-out={plan_file}"},
		Apply:   []string{"terragrunt", "run", "--working-dir", "{dir}", "--non-interactive", "--", "apply", "-input=false", "-no-color", "{plan_file}"},
		Destroy: []string{"terragrunt", "run", "--working-dir", "{dir}", "--non-interactive", "--", "destroy", "-input=false", "-no-color", "-auto-approve"},
	},
	"terraform": {
		Init:    []string{"terraform", "-chdir={dir}", "init", "-input=false", "-no-color"},
		Plan:    []string{"terraform", "-chdir={dir}", "plan", "-input=false", "-no-color", "-detailed-exitcode", "-out={plan_file}"},
		Apply:   []string{"terraform", "-chdir={dir}", "apply", "-input=false", "-no-color", "{plan_file}"},
		Destroy: []string{"terraform", "-chdir={dir}", "destroy", "-input=false", "-no-color", "-auto-approve"},
	},
}

var placeholder = regexp.MustCompile(`\{[a-z_]*\}`)

// StatusEnabled reports whether commit statuses of kind ("plan",
// "merge_lock") are posted.
func (r Repository) StatusEnabled(kind string) bool {
	if r.CommitStatuses == nil {
		return true
	}
	switch kind {
	case "plan":
		return r.CommitStatuses.Plan == nil || *r.CommitStatuses.Plan
	case "merge_lock":
		return r.CommitStatuses.MergeLock == nil || *r.CommitStatuses.MergeLock
	}
	return true
}

// AccountFor is the account whose path prefix is the longest one containing
// dir, or nil.
func (r Repository) AccountFor(dir string) *Account {
	var best *Account
	for i := range r.Accounts {
		a := &r.Accounts[i]
		if strings.HasPrefix(dir+"/", strings.TrimSuffix(a.Path, "/")+"/") && (best == nil || len(a.Path) > len(best.Path)) {
			best = a
		}
	}
	return best
}

func (v *validator) checkRepositories(repos []Repository) {
	names := map[string]bool{}
	for i := range repos {
		r := &repos[i]
		key := fmt.Sprintf("repositories[%d]", i)
		switch {
		case !namePattern.MatchString(r.Name):
			v.add(key+".name", "must be lower-case letters, digits, - or _ (got %q)", r.Name)
		case names[r.Name]:
			v.add(key+".name", "repository %q is defined twice", r.Name)
		}
		names[r.Name] = true
		if strings.TrimSpace(r.URL) == "" || strings.HasPrefix(r.URL, "-") || strings.Contains(r.URL, "::") {
			v.add(key+".url", "must be a git URL or a local path")
		}
		if r.Trunk == "" {
			r.Trunk = "main"
		}
		if r.Scan == "" {
			r.Scan = "graph"
		}
		if r.Scan != "graph" && r.Scan != "plan" {
			v.add(key+".scan", "must be graph or plan (got %q)", r.Scan)
		}
		// The status token may be missing (no statuses are posted, and each
		// skipped one is logged); without the webhook secret no delivery can
		// be believed, so the repository would do nothing at all.
		if r.WebhookSecretEnv != "" && v.env != nil {
			if _, ok := v.env(r.WebhookSecretEnv); !ok {
				v.add(key+".webhook_secret_env", "variable %s is not set", r.WebhookSecretEnv)
			}
		}
		if r.WebhookSecretEnv == "" {
			v.add(key+".webhook_secret_env", "is required: the variable holding the GitHub webhook secret")
		}
		v.checkCommands(key, r)
		v.checkAccounts(key, r.Accounts)
		v.checkDrift(key, r.Drift)
		v.checkRunsOn(key, r)
	}
}

// checkRunsOn reads where the commands run; an ecs block goes with
// runs_on: ecs and nothing else, so neither is ignored silently.
func (v *validator) checkRunsOn(key string, r *Repository) {
	if r.RunsOn == "" {
		r.RunsOn = "local"
	}
	switch {
	case r.RunsOn != "local" && r.RunsOn != "ecs":
		v.add(key+".runs_on", "must be local or ecs (got %q)", r.RunsOn)
	case r.RunsOn == "ecs" && r.ECS == nil:
		v.add(key+".ecs", "is required with runs_on: ecs: cluster, task_definition, container, subnets, log_group, log_stream_prefix, plan_store, region")
	case r.RunsOn == "local" && r.ECS != nil:
		v.add(key+".runs_on", "must be ecs for the ecs block to be used (got %q)", r.RunsOn)
	case r.ECS != nil:
		for _, p := range r.ECS.Check() {
			v.add(key+".ecs."+p.Field, "%s", p.Reason)
		}
		if urlHoldsCredentials(r.URL) {
			v.add(key+".url", "must not hold credentials with runs_on: ecs: the URL is part of the task's command, which ECS shows to whoever may call DescribeTasks and CloudTrail records; give the task its git credentials through its image or the task definition's secrets")
		}
	}
}

// urlHoldsCredentials says whether a git URL carries a secret: a password,
// or any user in an http(s) URL (a token is often written as the user).
// ssh://git@host/… and git@host:… name a user only.
func urlHoldsCredentials(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return false
	}
	_, hasPassword := u.User.Password()
	return hasPassword || u.Scheme == "http" || u.Scheme == "https"
}

func (v *validator) checkCommands(key string, r *Repository) {
	if r.Runner == "" {
		r.Runner = "terragrunt"
	}
	preset, ok := runnerPresets[r.Runner]
	if r.Runner == "ecs" {
		v.add(key+".runner", "names the tool (terragrunt, terraform or custom); to run the commands on ECS write runs_on: ecs and an ecs: block")
		return
	}
	if !ok && r.Runner != "custom" {
		v.add(key+".runner", "must be terragrunt, terraform or custom (got %q)", r.Runner)
		return
	}
	if len(r.Commands.Init) == 0 && r.Runner != "custom" {
		r.Commands.Init = preset.Init
	}
	for _, arg := range r.Commands.Init {
		for _, p := range placeholder.FindAllString(arg, -1) {
			if p != "{dir}" {
				v.add(key+".commands.init", "unknown placeholder %s: init takes {dir}", p)
			}
		}
	}
	for name, cmd := range map[string]*[]string{"plan": &r.Commands.Plan, "apply": &r.Commands.Apply, "destroy": &r.Commands.Destroy} {
		if len(*cmd) == 0 {
			switch name {
			case "plan":
				*cmd = preset.Plan
			case "apply":
				*cmd = preset.Apply
			case "destroy":
				*cmd = preset.Destroy
			}
		}
		if len(*cmd) == 0 {
			v.add(key+".commands."+name, "is required with runner: custom")
			continue
		}
		for _, arg := range *cmd {
			for _, p := range placeholder.FindAllString(arg, -1) {
				if p != "{dir}" && p != "{plan_file}" {
					v.add(key+".commands."+name, "unknown placeholder %s: use {dir} and {plan_file}", p)
				}
			}
		}
		if name != "destroy" && !slices.ContainsFunc(*cmd, func(a string) bool { return strings.Contains(a, "{plan_file}") }) {
			v.add(key+".commands."+name, "must use {plan_file}: apply runs exactly the plan the voters saw")
		}
	}
}

func (v *validator) checkAccounts(repoKey string, accounts []Account) {
	byName := map[string]int{}
	for i := range accounts {
		a := &accounts[i]
		key := fmt.Sprintf("%s.accounts[%d]", repoKey, i)
		// Left out, each threshold is one vote: one approval applies, one
		// rejection stops. Written as 0, it is refused below.
		a.MinApprovals, a.MinRejections = 1, 1
		if a.WrittenMinApprovals != nil {
			a.MinApprovals = *a.WrittenMinApprovals
		}
		if a.WrittenMinRejections != nil {
			a.MinRejections = *a.WrittenMinRejections
		}
		if !namePattern.MatchString(a.Name) {
			v.add(key+".name", "must be lower-case letters, digits, - or _ (got %q)", a.Name)
		} else if _, dup := byName[a.Name]; dup {
			v.add(key+".name", "account %q is defined twice", a.Name)
		}
		byName[a.Name] = i
		if a.Path == "" || strings.HasPrefix(a.Path, "/") || strings.Contains(a.Path, "..") {
			v.add(key+".path", "must be a directory prefix inside the repository, such as live/prod/")
		}
		for field, role := range map[string]string{"plan_role": a.PlanRole, "apply_role": a.ApplyRole} {
			if role != "" && !rolePattern.MatchString(role) {
				v.add(key+"."+field, "must be an IAM role ARN such as arn:aws:iam::123456789012:role/Plan")
			}
		}
		policy := approval.Policy{Voters: a.Voters, MinApprovals: a.MinApprovals, MinRejections: a.MinRejections}
		if err := policy.Validate(); err != nil {
			var ae *apperr.Error
			if errors.As(err, &ae) {
				for field, reason := range ae.Fields {
					v.add(key+"."+field, "%s", reason)
				}
			} else {
				v.add(key, "%v", err)
			}
		}
	}
	for i, a := range accounts {
		for j, dep := range a.DependsOn {
			if _, ok := byName[dep]; !ok {
				v.add(fmt.Sprintf("%s.accounts[%d].depends_on[%d]", repoKey, i, j), "no account named %q in this repository", dep)
			}
		}
	}
	if cycle := accountCycle(accounts, byName); cycle != "" {
		v.add(repoKey+".accounts", "depends_on has a cycle: %s", cycle)
	}
}

// accountCycle finds a cycle among accounts' depends_on, as "a -> b -> a".
func accountCycle(accounts []Account, byName map[string]int) string {
	state := make([]int, len(accounts)) // 0 new, 1 on the path, 2 done
	var path []string
	var visit func(i int) string
	visit = func(i int) string {
		state[i] = 1
		path = append(path, accounts[i].Name)
		for _, dep := range accounts[i].DependsOn {
			j, ok := byName[dep]
			if !ok {
				continue
			}
			switch state[j] {
			case 1:
				start := slices.Index(path, dep)
				return strings.Join(append(slices.Clone(path[start:]), dep), " -> ")
			case 0:
				if c := visit(j); c != "" {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = 2
		return ""
	}
	for i := range accounts {
		if state[i] == 0 {
			if c := visit(i); c != "" {
				return c
			}
		}
	}
	return ""
}

// checkDrift reads the drift schedule: "every" and a duration of at least
// MinDriftInterval ("every 6h", "every 90m"). Cron expressions are not
// taken: drift is found by how often it is looked for, not at what minute.
func (v *validator) checkDrift(repoKey string, d *Drift) {
	if d == nil {
		return
	}
	key := repoKey + ".drift"
	interval, ok := strings.CutPrefix(strings.TrimSpace(d.Schedule), "every ")
	every, err := time.ParseDuration(strings.TrimSpace(interval))
	switch {
	case !ok || err != nil:
		v.add(key+".schedule", `must be "every" and a duration such as "every 6h" or "every 90m" (got %q)`, d.Schedule)
	case every < MinDriftInterval:
		v.add(key+".schedule", "must be at least every %s: each check plans every unit (got %q)", MinDriftInterval, d.Schedule)
	default:
		d.Every = every
	}
	for i, addr := range d.Notify {
		if _, err := mail.ParseAddress(addr); err != nil || strings.ContainsAny(addr, "<>") {
			v.add(fmt.Sprintf("%s.notify[%d]", key, i), "must be an email address such as ops@example.com (got %q)", addr)
		}
	}
}
