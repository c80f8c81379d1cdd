package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// ProgressPipelineArgs runs a pipeline's progression. It is inserted in
// the transaction of every append to the pipeline's log, and by the sweep.
type ProgressPipelineArgs struct {
	Pipeline string `json:"pipeline"`
}

func (ProgressPipelineArgs) Kind() string { return "progress_pipeline" }

// One progression per pipeline is queued or running at a time (unique by
// its pipeline, among the states River requires); an append while it runs
// is seen by its next round. A completed one does not count, or the next
// append could never start another.
func (ProgressPipelineArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueuePipelines, MaxAttempts: 25, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

// ProgressPipelineWorker is idempotent: a round reads the log and the work
// under way and starts each doable step only if the step has no work
// record yet (inserted with its job, in one transaction). It completes its
// job in the transaction that finds no append left unread, with the
// pipeline's row locked: an append that commits after that finds the job
// completed, so its own progression job is inserted rather than dropped as
// a duplicate of this one.
type ProgressPipelineWorker struct {
	river.WorkerDefaults[ProgressPipelineArgs]
	Pipelines Pipelines
}

func (w *ProgressPipelineWorker) Work(ctx context.Context, job *river.Job[ProgressPipelineArgs]) error {
	return w.Pipelines.Progress(ctx, job.Args.Pipeline, func(ctx context.Context, tx Tx) error {
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx.Pgx(), job)
		return err
	})
}

// PipelinesSweepInterval is how often every pipeline in flight is woken
// whatever happened (Kargo re-checks every 5 minutes by default).
const PipelinesSweepInterval = 15 * time.Second

// SweepPipelinesArgs wakes every pipeline in flight.
type SweepPipelinesArgs struct{}

func (SweepPipelinesArgs) Kind() string { return "sweep_pipelines" }
func (SweepPipelinesArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, UniqueOpts: river.UniqueOpts{ByPeriod: PipelinesSweepInterval}}
}

// SweepPipelinesWorker is idempotent: it only enqueues progressions, which
// are unique per pipeline.
type SweepPipelinesWorker struct {
	river.WorkerDefaults[SweepPipelinesArgs]
	Pipelines Pipelines
}

func (w *SweepPipelinesWorker) Work(ctx context.Context, _ *river.Job[SweepPipelinesArgs]) error {
	return w.Pipelines.Sweep(ctx)
}
