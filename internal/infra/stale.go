package infra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// StaleJob says why running an execution's plan or apply job again would do
// nothing: the workers act only on an execution still at that step, so a
// retried job of a failed, aborted or finished execution completes without
// a trace. An operator retrying it from /admin/jobs is told that instead.
func (s *Service) StaleJob(ctx context.Context, kind string, args []byte) (string, error) {
	var step, what string
	switch kind {
	case jobs.PlanExecutionArgs{}.Kind():
		step, what = models.StepPlanning, "plan"
	case jobs.ApplyExecutionArgs{}.Kind():
		step, what = models.StepApplying, "apply"
	default:
		return "", nil
	}
	var a struct {
		ExecutionID int64 `json:"execution_id"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return "", fmt.Errorf("reading a %s job's arguments: %w", kind, err)
	}
	x, err := models.ExecutionByID(ctx, s.Queue.DB(), a.ExecutionID)
	if errors.Is(err, models.ErrNotFound) {
		return fmt.Sprintf("the execution this %s job was for no longer exists.", what), nil
	}
	if err != nil {
		return "", err
	}
	if x.Status == models.ExecRunning && x.Step == step {
		return "", nil
	}
	if x.Status == models.ExecRunning && x.Step == models.StepInterrupted {
		return fmt.Sprintf("execution %s's apply was interrupted and its outcome is unknown, so Gantry does not apply it again: an operator chooses on its page (%s): mark it as failed or applied, or plan it again.",
			x.ExecutionID, pageurl.Execution(x.ExecutionID)), nil
	}
	state := "is at its " + x.Step + " step"
	switch x.Status {
	case models.ExecFailed:
		state = "failed"
	case models.ExecAborted:
		state = "was aborted"
	case models.ExecSucceeded:
		state = "succeeded"
	}
	return fmt.Sprintf("execution %s %s, so its %s job would do nothing if run again; its page (%s) says what happened, and a new merge deploys the unit again.",
		x.ExecutionID, state, what, pageurl.Execution(x.ExecutionID)), nil
}
