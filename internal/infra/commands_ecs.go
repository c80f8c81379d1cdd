package infra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/gantryhq/gantry/internal/ecsrunner"
	"github.com/gantryhq/gantry/internal/runner"
	"github.com/gantryhq/gantry/models"
)

// ecsFailure is an ECS task that ended without its command's outcome:
// stopped by ECS, never started, or unable to prepare the unit. The
// execution fails with it as the reason; River does not retry it.
type ecsFailure struct{ reason string }

func (e *ecsFailure) Error() string        { return e.reason }
func (e *ecsFailure) Is(target error) bool { return target == errCannotRun }

// planObject names an execution's plan file in the plan store: its
// execution id and the plan attempt (when it began, to the second), so a
// plan made again is another object and the apply fetches exactly the one
// its plan step stored, which it checks by the SHA-256 of the plan file
// the voters approved. (The second is the same read back from the
// database: Bun writes times truncated to microseconds, never rounded up.)
func planObject(x *models.Execution) string {
	return fmt.Sprintf("%s/plan-%d.tfplan", x.ExecutionID, x.PlanStartedAt.Unix())
}

// runOnECS is run for a repository with runs_on: ecs: the unit's commands
// run as one ECS task (ecsrunner), which checks the commit out itself.
// With c.PlanObject, a plan stores its plan file there and Gantry reads it
// back into c.PlanFile; an apply (c.PlanFile already holding the approved
// plan) has the task fetch it and check its SHA-256 first.
func (s *Service) runOnECS(ctx context.Context, c unitCommand, sink runner.Sink) (ran, error) {
	base, err := s.awsConfig(ctx)
	if err != nil {
		return ran{}, err
	}
	r := ecsrunner.New(base, *c.ECS)
	if s.ECSPoll > 0 {
		r.Poll = s.ECSPoll
	}
	spec := ecsrunner.Spec{Repo: c.RepoURL, Commit: c.Commit, Unit: c.Unit, Init: c.Init, Main: c.Main, Store: r.StoreOf()}
	var key string
	if c.PlanObject != "" {
		key = r.PlanKey(c.PlanObject)
		approved, err := os.ReadFile(c.PlanFile)
		switch {
		case errors.Is(err, os.ErrNotExist):
			spec.PlanPut = key
		case err != nil:
			return ran{}, err
		default:
			spec.PlanGet, spec.PlanSHA256 = key, ecsrunner.SHA256(approved)
		}
	}
	if c.OutputObject != "" {
		spec.OutputPut = r.PlanKey(c.OutputObject)
	}
	command, err := spec.Command()
	if err != nil {
		return ran{}, err
	}
	env := append([]string{"TF_IN_AUTOMATION=1", "TF_INPUT=0"}, s.Env...)
	res, err := r.Run(ctx, ecsrunner.Task{
		Command: command, Env: env, Role: c.Role, StartedBy: startedBy(c.Session), Timeout: s.commandTimeout(),
	}, sink)
	var start *ecsrunner.StartError
	switch {
	case errors.As(err, &start):
		return ran{}, &ecsFailure{start.Error()}
	case err != nil:
		return ran{Result: runner.Result{ExitCode: -1, Cancelled: res.Cancelled}, Main: res.TaskARN != ""}, err
	case res.TimedOut:
		// Stopped by StopTask: whatever the task exited with is not the
		// command's verdict.
		return ran{Result: runner.Result{ExitCode: res.ExitCode, TimedOut: true, Duration: res.Duration, Output: res.Output}, Main: true}, nil
	case res.Stopped != "":
		return ran{Result: runner.Result{ExitCode: -1, Duration: res.Duration, Output: res.Output}, Main: true}, &ecsFailure{res.Stopped}
	case res.ExitCode == ecsrunner.ExitSetup:
		return ran{Result: runner.Result{ExitCode: -1, Output: res.Output}}, &ecsFailure{"the ECS task could not prepare the unit: " + taskComplaint(res.Output)}
	case res.ExitCode == ecsrunner.ExitInit:
		return ran{Result: runner.Result{ExitCode: 1, Duration: res.Duration, Output: res.Output}, Init: true}, nil
	}
	out := ran{Result: runner.Result{ExitCode: res.ExitCode, Duration: res.Duration, Output: res.Output}, Main: true}
	if spec.OutputPut != "" && res.ExitCode == 0 {
		if out.Stdout, err = r.Output(ctx, spec.OutputPut); err != nil {
			return out, err
		}
	}
	if spec.PlanPut != "" && (res.ExitCode == 0 || res.ExitCode == 2) {
		plan, err := r.Plan(ctx, key)
		var missing *types.NoSuchKey
		switch {
		case errors.As(err, &missing):
			// no plan file: PlanExecution says so if it needs one
		case err != nil:
			return out, err
		default:
			if err := os.WriteFile(c.PlanFile, plan, 0o600); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

func (s *Service) awsConfig(ctx context.Context) (aws.Config, error) {
	if s.AWS != nil {
		return s.AWS.Copy(), nil
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading the AWS configuration for ECS: %w", err)
	}
	return cfg, nil
}

var notStartedBy = regexp.MustCompile(`[^A-Za-z0-9/_-]`)

// startedBy marks a task with the command's session (the execution id) in
// ECS's alphabet.
func startedBy(session string) string { return notStartedBy.ReplaceAllString(session, "-") }

// taskComplaint is the last line `gantry ecs-task` wrote about itself.
func taskComplaint(output string) string {
	lines := strings.Split(strings.TrimSpace(output), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if msg, ok := strings.CutPrefix(lines[i], "gantry ecs-task: "); ok {
			return msg
		}
	}
	return "see its output"
}
