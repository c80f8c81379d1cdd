package pipelines

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/progression"
	"github.com/gantryhq/gantry/internal/runner"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// DoStep performs one step of one revision (the seed's do): a build step
// completes when its artifact is registered, a gate opens its vote, a
// host step runs its command. (Rounds write markers themselves; a
// marker's job is one queued before they did, and writes it.) Only the attempt that is
// still running may record an outcome, together with its log entry, so a
// step completes once however often its job runs.
func (s *Service) DoStep(ctx context.Context, args jobs.DoPipelineStepArgs) error {
	db := s.Queue.DB()
	rev, err := models.RevisionByID(ctx, db, args.RevisionID)
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	l, err := s.load(ctx, db, rev.Pipeline)
	if apperr.CodeOf(err) == apperr.NotFound {
		return nil // removed from gantry.yaml
	}
	if err != nil {
		return err
	}
	row, err := models.StepByKey(ctx, db, rev.ID, args.Event, args.Target)
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if row.Status != models.StepRunning || row.Attempt != args.Attempt {
		return nil // done, failed, skipped, or retried under a newer attempt
	}
	step := progression.Step{Event: args.Event, Target: args.Target}
	info, ok := l.shape.Info(step)
	if !ok {
		return nil // no longer a step of the pipeline: nothing waits for it
	}
	actor := Actor(l.row.Name)
	switch info.Kind {
	case progression.Marker:
		return s.inTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			return s.complete(ctx, tx, l, rev, row, actor, nil, "")
		})
	case progression.Artifact:
		return s.inTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			a, err := models.ArtifactOf(ctx, tx, rev.ID, info.Name)
			if errors.Is(err, models.ErrNotFound) {
				return nil // RegisterArtifact completes it
			}
			if err != nil {
				return err
			}
			return s.complete(ctx, tx, l, rev, row, a.RegisteredBy, map[string]any{"location": a.Location}, "")
		})
	case progression.Gate:
		return s.openGate(ctx, l, rev, row, info)
	}
	return s.runCommand(ctx, l, rev, row, info)
}

// runCommand runs a host step's command through the shared runner, its
// output going into the step's record as it comes, and records the
// outcome. A command that fails or outlives its timeout fails the step
// (and blocks the revision); a command stopped because this worker is
// stopping is neither: the job runs again.
func (s *Service) runCommand(ctx context.Context, l *loaded, rev *models.PipelineRevision, row *models.PipelineStep, info progression.StepInfo) error {
	stage := l.def.Stage(info.Stage)
	if stage == nil {
		return nil
	}
	i := slices.IndexFunc(stage.Steps, func(st gantryfile.PipelineStep) bool { return st.Name == info.Name })
	if i < 0 {
		return nil
	}
	def := stage.Steps[i]
	artifact, err := s.artifactFor(ctx, l, rev, stage, info.HostGroup)
	if err != nil {
		return err
	}
	argv := expand(def.Run, map[string]string{
		"{host}": info.Host, "{revision}": rev.Revision, "{artifact}": artifact,
		"{pipeline}": l.row.Name, "{stage}": info.Stage, "{group}": info.HostGroup,
	})
	if def.OnAgent() {
		return s.dispatchToAgent(ctx, l, rev, row, info, def, argv, artifact)
	}
	env := append([]string{
		"GANTRY_PIPELINE=" + l.row.Name, "GANTRY_REVISION=" + rev.Revision, "GANTRY_STAGE=" + info.Stage,
		"GANTRY_HOST_GROUP=" + info.HostGroup, "GANTRY_HOST=" + info.Host, "GANTRY_ARTIFACT=" + artifact,
	}, s.Env...)
	db := s.Queue.DB()
	sink := runner.SinkFunc(func(ctx context.Context, c runner.Chunk) error {
		return models.AppendStepOutput(ctx, db, row, c.Text)
	})
	res, runErr := runner.Run(ctx, runner.Command{Argv: argv, Env: env, Timeout: def.CommandTimeout}, sink)
	switch {
	case runErr != nil && ctx.Err() != nil:
		return runErr
	case runErr != nil && !errors.Is(runErr, runner.ErrInvalidCommand):
		return runErr // could not start it this time: River tries again
	}
	return s.inTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		switch {
		case runErr != nil:
			return s.fail(ctx, tx, l, rev, row, info, runErr.Error(), res.Output)
		case res.TimedOut:
			return s.fail(ctx, tx, l, rev, row, info, fmt.Sprintf("timed out after %s (step %s's timeout)", def.CommandTimeout, def.Name), res.Output)
		case !res.Success():
			reason := fmt.Sprintf("exit status %d", res.ExitCode)
			if res.Signal != "" {
				reason = "ended by signal " + res.Signal
			}
			if last := lastLine(res.Output); last != "" {
				reason += ": " + last
			}
			return s.fail(ctx, tx, l, rev, row, info, reason, res.Output)
		}
		return s.complete(ctx, tx, l, rev, row, Actor(l.row.Name),
			map[string]any{"duration_ms": res.Duration.Milliseconds(), "attempt": row.Attempt}, res.Output)
	})
}

// artifactFor is where the revision's artifact for the host group's
// architecture is ("" when the pipeline builds none).
func (s *Service) artifactFor(ctx context.Context, l *loaded, rev *models.PipelineRevision, stage *gantryfile.PipelineStage, group string) (string, error) {
	archs := l.def.Architectures()
	if len(archs) == 0 {
		return "", nil
	}
	arch := archs[0]
	for _, g := range stage.HostGroups {
		if g.Name == group && g.Arch != "" {
			arch = g.Arch
		}
	}
	as, err := models.ArtifactsOf(ctx, s.Queue.DB(), rev.ID)
	if err != nil {
		return "", err
	}
	for _, a := range as {
		if a.Arch == arch {
			return a.Location, nil
		}
	}
	return "", nil
}

// expand fills a step's placeholders, each inside its own argument: no
// shell ever sees the result.
func expand(template []string, values map[string]string) []string {
	argv := make([]string, len(template))
	for i, a := range template {
		for k, v := range values {
			a = strings.ReplaceAll(a, k, v)
		}
		argv[i] = a
	}
	return argv
}

func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return trimReason(lines[len(lines)-1])
}

// complete ends a step's running attempt as done and appends its event,
// in tx; nothing when that attempt is not running any more. The last step
// finishes the revision.
func (s *Service) complete(ctx context.Context, tx jobs.Tx, l *loaded, rev *models.PipelineRevision, row *models.PipelineStep, actor string, detail map[string]any, output string) error {
	ended, err := models.EndStep(ctx, tx, row, models.StepDone, "", output)
	if err != nil || !ended {
		return err
	}
	if err := logStep(ctx, tx, rev, row.Target, row.Event, actor, detail); err != nil {
		return err
	}
	if row.Event == progression.PipelineFinished {
		if err := models.FinishRevision(ctx, tx, rev.ID); err != nil {
			return err
		}
	}
	return progressTx(ctx, tx, l.row.Name)
}

// completeIfWaiting completes step if its work is running (waiting for
// what just arrived); a step not reached yet finds it when it is.
func (s *Service) completeIfWaiting(ctx context.Context, tx jobs.Tx, l *loaded, rev *models.PipelineRevision, step progression.Step, actor string, detail map[string]any) error {
	row, err := models.LockStep(ctx, tx, rev.ID, step.Event, step.Target)
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	if err != nil || row.Status != models.StepRunning {
		return err
	}
	return s.complete(ctx, tx, l, rev, row, actor, detail, "")
}

// fail ends a step's running attempt as failed and appends the failure at
// its level and every level around it (host, host group, stage,
// pipeline), so each granularity's "latest failed" question sees it. The
// revision waits for an operator to retry or skip the step.
func (s *Service) fail(ctx context.Context, tx jobs.Tx, l *loaded, rev *models.PipelineRevision, row *models.PipelineStep, info progression.StepInfo, reason, output string) error {
	reason = trimReason(reason)
	ended, err := models.EndStep(ctx, tx, row, models.StepFailed, reason, output)
	if err != nil || !ended {
		return err
	}
	for _, e := range enclosing(l.shape, info) {
		detail := map[string]any{"step": row.Event, "step_target": row.Target, "reason": reason}
		if err := logStep(ctx, tx, rev, e.target, e.lvl.failed, Actor(l.row.Name), detail); err != nil {
			return err
		}
	}
	return progressTx(ctx, tx, l.row.Name)
}

// StaleJob says why running a pipelines job again would do nothing: a
// step whose attempt is no longer running.
func (s *Service) StaleJob(ctx context.Context, kind string, args []byte) (string, error) {
	if kind != (jobs.DoPipelineStepArgs{}).Kind() {
		return "", nil
	}
	var a jobs.DoPipelineStepArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return "", nil
	}
	row, err := models.StepByKey(ctx, s.Queue.DB(), a.RevisionID, a.Event, a.Target)
	if errors.Is(err, models.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	switch {
	case row.Attempt != a.Attempt:
		return fmt.Sprintf("this was attempt %d of %s on %s; attempt %d has replaced it.", a.Attempt, a.Event, a.Target, row.Attempt), nil
	case row.Status != models.StepRunning:
		return fmt.Sprintf("%s on %s is %s; retry or skip it from its revision's page.", a.Event, a.Target, row.Status), nil
	}
	return "", nil
}
