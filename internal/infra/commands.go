package infra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gantryhq/gantry/internal/ecsrunner/ecsconfig"
	"github.com/gantryhq/gantry/internal/runner"
	"github.com/gantryhq/gantry/models"
)

// unitCommand is a plan or apply of one unit in its own checkout.
type unitCommand struct {
	RepoURL  string
	Commit   string
	Unit     string   // the unit's directory, relative to the checkout
	Init     []string // template run first; may be empty
	Main     []string // template of the plan or apply
	PlanFile string   // absolute path of the plan file
	Role     string   // IAM role ARN to run as; "" runs as Gantry
	Session  string   // the role session's name
	// ECS, when set, runs the commands as an ECS task (commands_ecs.go);
	// PlanObject names the plan file in its plan store.
	ECS        *ecsconfig.Config
	PlanObject string
	// OutputObject, on ECS, names where the task stores the main
	// command's standard output, which run returns in ran.Stdout
	// (rollback.go's shows).
	OutputObject string
}

// expand fills a command template's placeholders. Each placeholder is
// replaced inside its own argument: no shell ever sees the result.
func expand(template []string, dir, planFile string) []string {
	argv := make([]string, len(template))
	for i, a := range template {
		a = strings.ReplaceAll(a, "{dir}", dir)
		argv[i] = strings.ReplaceAll(a, "{plan_file}", planFile)
	}
	return argv
}

// errCannotRun marks what keeps a command from running that no retry can
// fix: a unit path leading out of the checkout, a role on a Gantry without
// AWS access, an executable that is not installed. The execution fails
// with the reason; any other error of run (git unreachable, STS down, the
// database) is returned for River to retry.
var errCannotRun = errors.New("cannot run")

// ran is the last command runIn ran. Init marks a failed init, after
// which the main command did not run: its result must not be read as the
// plan's or the apply's (a failed init's exit code is not a plan's
// -detailed-exitcode), and what failed is named "init".
type ran struct {
	runner.Result
	Init bool
	Main bool // the main command was started (an apply may have changed something)
	// Stdout is the main command's standard output when the command
	// asked for it (unitCommand.OutputObject) and succeeded.
	Stdout []byte
}

// mainExit is the main command's exit code, nil when it did not run because
// the init failed: an init's exit code stored as the plan's would read as
// "changes" (2) or "no changes" (0) to whoever reads the API.
func (r ran) mainExit() *int {
	if r.Init {
		return nil
	}
	exit := r.ExitCode
	return &exit
}

// run checks the commit out into ws, then runs the unit's commands in it
// (runIn) within the command timeout.
func (s *Service) run(ctx context.Context, ws string, c unitCommand, sink runner.Sink) (ran, error) {
	if c.ECS != nil {
		return s.runOnECS(ctx, c, sink)
	}
	mirror, err := s.Git.Fetch(ctx, c.RepoURL, c.Commit)
	if err != nil {
		return ran{}, fmt.Errorf("fetching %s: %w", c.Commit, err)
	}
	checkout := checkoutDir(ws)
	if err := mirror.Checkout(ctx, c.Commit, checkout); err != nil {
		return ran{}, err
	}
	defer func() { _ = mirror.RemoveCheckout(context.WithoutCancel(ctx), checkout) }()
	return s.runIn(ctx, checkout, c, sink, time.Now().Add(s.commandTimeout()))
}

// runIn runs the init and main commands of c in its unit of checkout,
// streaming their output to sink, as the unit's role when it has one. A
// failed init is the result; the main command does not run. Both share
// deadline, so a job always ends before River's own time limit.
func (s *Service) runIn(ctx context.Context, checkout string, c unitCommand, sink runner.Sink, deadline time.Time) (ran, error) {
	dir, err := runner.SafePath(checkout, c.Unit)
	if err != nil {
		return ran{}, fmt.Errorf("%w: unit %s: %w", errCannotRun, c.Unit, err)
	}
	// Terraform's own switches for running unattended come first, so
	// GANTRY_COMMAND_ENV can still override them.
	env := append([]string{"TF_IN_AUTOMATION=1", "TF_INPUT=0"}, s.Env...)
	if c.Role != "" {
		if s.Roles == nil {
			return ran{}, fmt.Errorf("%w: unit %s runs as %s, but this Gantry has no AWS access configured", errCannotRun, c.Unit, c.Role)
		}
		roleEnv, err := s.Roles.RoleEnv(ctx, c.Role, c.Session, roleSession(s.commandTimeout()))
		if err != nil {
			return ran{}, err
		}
		env = append(env, roleEnv...)
	}
	for i, template := range [][]string{c.Init, c.Main} {
		if len(template) == 0 {
			continue
		}
		res, err := runner.Run(ctx, runner.Command{
			Argv: expand(template, dir, c.PlanFile), Dir: checkout, Env: env, Timeout: max(time.Until(deadline), time.Second),
		}, sink)
		if errors.Is(err, runner.ErrInvalidCommand) {
			err = fmt.Errorf("%w: %w", errCannotRun, err)
		}
		if err != nil || !res.Success() || i == 1 {
			return ran{Result: res, Init: i == 0, Main: i == 1}, err
		}
	}
	return ran{}, fmt.Errorf("%w: unit %s: no command to run", errCannotRun, c.Unit)
}

// retryable reports whether a command's error is for River to retry: the
// job was stopped, or something outside the repository failed (git, STS,
// the database). A command that ran, or that cannot run, is an outcome.
func retryable(ctx context.Context, err error) bool {
	return ctx.Err() != nil || (err != nil && !errors.Is(err, errCannotRun))
}

// roleSession is how long an assumed role's credentials last: the command's
// time limit, but at most an hour, which is what AWS allows a role by
// default and at most when Gantry itself runs as a role (role chaining).
func roleSession(timeout time.Duration) time.Duration { return min(timeout, time.Hour) }

// planOutcome reads a plan's exit code. With -detailed-exitcode, 0 is "no
// changes" and 2 "changes"; without it a plan that succeeds counts as
// having changes, so it is voted on. A plan that could not run (err) has
// neither: it failed, as did one whose init failed.
func planOutcome(template []string, res ran, err error) (ok, changes bool) {
	if err != nil || res.Init || res.TimedOut || res.Cancelled {
		return false, false
	}
	detailed := slices.Contains(template, "-detailed-exitcode")
	switch {
	case res.ExitCode == 0:
		return true, !detailed
	case res.ExitCode == 2 && detailed:
		return true, true
	}
	return false, false
}

// failure describes a command that did not succeed: step ("plan",
// "apply"), or its init when that is what failed, so that a syntax error
// that stops init is not reported as a failed plan.
func failure(step string, res ran, err error) string {
	what := step
	if res.Init {
		what = "init"
	}
	switch {
	case err != nil:
		return fmt.Sprintf("%s could not run: %v", what, err)
	case res.TimedOut:
		return fmt.Sprintf("%s timed out after %s", what, res.Duration.Round(1e9))
	case res.Cancelled:
		return what + " was cancelled"
	case res.Signal != "":
		return fmt.Sprintf("%s was %s", what, res.Signal)
	}
	return fmt.Sprintf("%s failed (exit code %d)", what, res.ExitCode)
}

// unitPlan is the outcome of planning one unit outside a run (a pull
// request's plan, a drift check).
type unitPlan struct {
	ok, changes bool
	exit        *int   // the plan command's exit code, if it ran
	failure     string // why, when not ok
}

// planUnit plans the unit at path of repo at commit, in a workspace of its
// own named name, with the plan role of the unit's account (its STS session
// named session), streaming the output into sink; metric names the command
// in the metrics. A failure River
// should retry (cancelled, the worker stopping, git or STS failing) is
// returned as the error.
func (s *Service) planUnit(ctx context.Context, repo *models.Repository, commit, path, name, session, metric string, sink runner.Sink) (unitPlan, error) {
	ws, err := s.workspace(name)
	if err != nil {
		return unitPlan{}, err
	}
	defer os.RemoveAll(ws)
	var role string
	if acc := accountFor(repo.Accounts, path); acc != nil {
		role = acc.PlanRole
	}
	began := time.Now()
	res, runErr := s.run(ctx, ws, unitCommand{
		RepoURL: repo.URL, Commit: commit, Unit: path, Init: repo.InitCommand, Main: repo.PlanCommand,
		PlanFile: filepath.Join(ws, "plan.tfplan"), Role: role, Session: session, ECS: repo.ECS,
	}, sink)
	if retryable(ctx, runErr) {
		return unitPlan{}, errors.Join(context.Cause(ctx), runErr)
	}
	ok, changes := planOutcome(repo.PlanCommand, res, runErr)
	s.Metrics.command(metric, ok, time.Since(began))
	out := unitPlan{ok: ok, changes: changes, exit: res.mainExit()}
	if !ok {
		out.failure = failure("plan", res, runErr)
	}
	return out, nil
}
