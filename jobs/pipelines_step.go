package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"
)

// DoPipelineStepArgs performs one step (Event on Target) of one revision,
// for one attempt of it (an operator's retry starts a new attempt).
type DoPipelineStepArgs struct {
	RevisionID int64  `json:"revision_id"`
	Event      string `json:"event"`
	Target     string `json:"target"`
	Attempt    int    `json:"attempt"`
}

func (DoPipelineStepArgs) Kind() string { return "do_pipeline_step" }
func (DoPipelineStepArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueuePipelines, MaxAttempts: 10, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// DoPipelineStepWorker never completes a step twice: its completion is
// written only while that attempt of the step is still running, in the
// transaction that ends it (the log entry and the state change together),
// so a redelivered job finds the step done and does nothing. A worker
// killed mid-command leaves the step running; River runs the job again and
// the command runs again, to one completion.
//
// A step with runs_on: agent runs on its host's agent instead: its job
// writes the dispatch and then watches, snoozing between looks (it holds
// no worker while the agent runs the command), until the agent's report
// has ended the step or the agent has gone silent, which fails it.
type DoPipelineStepWorker struct {
	river.WorkerDefaults[DoPipelineStepArgs]
	Pipelines Pipelines
}

// Timeout: the step's own command timeout ends a command; River's bound is
// the longest a step may take.
func (w *DoPipelineStepWorker) Timeout(*river.Job[DoPipelineStepArgs]) time.Duration {
	return PipelinesLongestJob
}

func (w *DoPipelineStepWorker) Work(ctx context.Context, job *river.Job[DoPipelineStepArgs]) error {
	return w.Pipelines.DoStep(ctx, job.Args)
}
