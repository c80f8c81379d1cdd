package infra

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gantryhq/gantry/internal/runner"
	"github.com/gantryhq/gantry/internal/tfstate"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// EventNewResourcesRecorded is logged when an apply introduced providers
// to its unit (detail: providers, addresses) or when what it introduced
// could not be read (detail: error).
const EventNewResourcesRecorded = "execution-new-provider-resources-recorded"

// newResourcesOf is what an apply (successful, or failed part way)
// introduced to its unit: the
// resources, by full address, of the providers in the unit's state after
// the apply that were not in the state the approved plan was made against
// (the saved plan's prior_state, so that "before" is exactly what the
// voters saw, even for a unit Gantry never applied before). plan and state
// are `terraform show -json` of the plan file and of the state, from
// showPlanAndState (err its error). It never fails the apply: what cannot
// be read is recorded as the error.
func newResourcesOf(x *models.Execution, plan, state []byte, err error) *models.NewResources {
	rec := &models.NewResources{ExecutionID: x.ID}
	if err == nil {
		var prior, after []tfstate.Resource
		if prior, err = tfstate.PriorResources(plan); err == nil {
			if after, err = tfstate.StateResources(state); err == nil {
				rec.Providers, rec.Addresses = tfstate.NewProviderResources(prior, after)
			}
		}
	}
	if err != nil {
		rec.Error = "reading the resources of new providers: " + err.Error()
	}
	return rec
}

// showPlanAndState runs the unit's init, `show -json PLANFILE` and
// `show -json` in one checkout and returns the outputs of the shows: in
// a fresh checkout of the execution's commit through the same command path
// as the apply (runIn: the unit's directory, its init, its apply role and
// environment). A repository on ECS runs each show as a task of its own
// (capturedOnECS), so the worker needs no access to the state.
func (s *Service) showPlanAndState(ctx context.Context, ws string, x *models.Execution, run *models.Run, repo *models.Repository, planFile string) (plan, state []byte, err error) {
	show, err := showCommand(x.ApplyCommand)
	if err != nil {
		return nil, nil, err
	}
	if repo.ECS != nil {
		c := unitCommand{RepoURL: repo.URL, Commit: run.MergeCommit, Unit: x.CfgPath, Init: x.InitCommand, PlanFile: planFile,
			Role: x.ApplyRoleARN, Session: x.ExecutionID, ECS: repo.ECS}
		onPlan := c
		onPlan.Main, onPlan.PlanObject, onPlan.OutputObject = append(slices.Clone(show), "{plan_file}"), planObject(x), x.ExecutionID+"/show-plan.json"
		if plan, err = s.capturedOnECS(ctx, onPlan); err != nil {
			return nil, nil, err
		}
		c.Main, c.OutputObject = show, x.ExecutionID+"/show-state.json"
		state, err = s.capturedOnECS(ctx, c)
		return plan, state, err
	}
	mirror, err := s.Git.Fetch(ctx, repo.URL, run.MergeCommit)
	if err != nil {
		return nil, nil, fmt.Errorf("fetching %s: %w", run.MergeCommit, err)
	}
	checkout := filepath.Join(ws, "show")
	if err := mirror.Checkout(ctx, run.MergeCommit, checkout); err != nil {
		return nil, nil, err
	}
	defer func() { _ = mirror.RemoveCheckout(context.WithoutCancel(ctx), checkout) }()
	deadline := time.Now().Add(s.commandTimeout())
	// The init runs on its own: its output is not part of the JSON.
	c := unitCommand{Unit: x.CfgPath, Main: x.InitCommand, PlanFile: planFile, Role: x.ApplyRoleARN, Session: x.ExecutionID}
	if len(c.Main) > 0 {
		if _, err := s.captured(ctx, checkout, c, deadline); err != nil {
			return nil, nil, err
		}
	}
	c.Main = append(show, "{plan_file}")
	if plan, err = s.captured(ctx, checkout, c, deadline); err != nil {
		return nil, nil, err
	}
	c.Main = show
	state, err = s.captured(ctx, checkout, c, deadline)
	return plan, state, err
}

// captured runs c and returns its standard output; a command that fails
// is an error carrying the end of its standard error.
func (s *Service) captured(ctx context.Context, checkout string, c unitCommand, deadline time.Time) ([]byte, error) {
	var stdout, stderr strings.Builder
	sink := runner.SinkFunc(func(_ context.Context, ch runner.Chunk) error {
		if ch.Stream == runner.StreamStdout {
			stdout.WriteString(ch.Text)
		} else if stderr.Len() < 4<<10 {
			stderr.WriteString(ch.Text)
		}
		return nil
	})
	res, err := s.runIn(ctx, checkout, c, sink, deadline)
	argv := strings.Join(c.Main, " ")
	if err == nil && !res.Success() {
		err = errors.New(failure(argv, res, nil) + ": " + strings.TrimSpace(stderr.String()))
	} else if err != nil {
		err = fmt.Errorf("%s: %w", argv, err)
	}
	return []byte(stdout.String()), err
}

// capturedOnECS is captured for a repository on ECS: c runs as a task
// that stores its main command's standard output in the plan store
// (c.OutputObject), read back from there; a command that fails is an
// error carrying the end of the task's log.
func (s *Service) capturedOnECS(ctx context.Context, c unitCommand) ([]byte, error) {
	const keep = 4 << 10
	var tail []byte
	sink := runner.SinkFunc(func(_ context.Context, ch runner.Chunk) error {
		tail = append(tail, ch.Text...)
		if len(tail) > 2*keep {
			tail = append(tail[:0], tail[len(tail)-keep:]...)
		}
		return nil
	})
	res, err := s.runOnECS(ctx, c, sink)
	argv := strings.Join(c.Main, " ")
	if err == nil && !res.Success() {
		err = errors.New(failure(argv, res, nil) + ": " + strings.TrimSpace(string(tail[max(0, len(tail)-keep):])))
	} else if err != nil {
		err = fmt.Errorf("%s: %w", argv, err)
	}
	return res.Stdout, err
}

// showCommand derives the unit's `show -json` from its apply template:
// the same program and arguments up to the apply subcommand (terraform
// -chdir={dir}, terragrunt run --working-dir {dir} … --), which is then
// replaced by show -json.
func showCommand(apply []string) ([]string, error) {
	i := slices.Index(apply, "apply")
	if i < 1 {
		return nil, fmt.Errorf("the apply command %q has no apply subcommand to derive terraform show -json from", strings.Join(apply, " "))
	}
	return append(slices.Clone(apply[:i]), "show", "-json"), nil
}

// recordNewResources stores what an apply introduced (rec from
// newResourcesOf) with the execution's outcome, in its transaction, and
// logs it when there is something a rollback would destroy or an error.
func (s *Service) recordNewResources(ctx context.Context, tx jobs.Tx, run *models.Run, x *models.Execution, rec *models.NewResources) error {
	if err := models.RecordNewResources(ctx, tx, rec); err != nil {
		return err
	}
	detail := map[string]any{"cfg_path": x.CfgPath}
	switch {
	case rec.Error != "":
		detail["error"] = rec.Error
	case len(rec.Addresses) > 0:
		detail["providers"], detail["addresses"] = rec.Providers, rec.Addresses
	default:
		return nil
	}
	return s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventNewResourcesRecorded, "gantry", detail)
}
