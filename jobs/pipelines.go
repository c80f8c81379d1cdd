package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"
)

// QueuePipelines is the pipelines area's queue.
const QueuePipelines = "pipelines"

// Pipelines is what the pipelines workers need; internal/pipelines
// implements it (declared here to keep jobs free of the areas).
type Pipelines interface {
	// Progress runs progression rounds for a pipeline until no append to
	// its log is left unread: each round computes the doable steps,
	// writes the bookkeeping ones itself and enqueues one DoPipelineStep
	// job per step that does work. complete, when set, marks
	// the job completed in the transaction that finds nothing left unread.
	Progress(ctx context.Context, pipeline string, complete func(ctx context.Context, tx Tx) error) error
	// DoStep performs one step of one revision and appends its completion
	// (or its failure) in the transaction that records its state.
	DoStep(ctx context.Context, args DoPipelineStepArgs) error
	// Sweep wakes the progression of every pipeline with revisions in
	// flight, in case a wake-up was lost.
	Sweep(ctx context.Context) error
	// StaleJob says why running one of the area's jobs again would do
	// nothing (Area.Stale).
	StaleJob(ctx context.Context, kind string, args []byte) (string, error)
}

// A step's job is inserted the moment the step before it completes, so
// the pipeline's queue polls often and fetches at once when notified
// (each step of a revision waits for the one before: docs/performance.md).
const (
	PipelinesPollInterval  = 100 * time.Millisecond
	PipelinesFetchCooldown = 10 * time.Millisecond
)

// PipelinesLongestJob is the longest a step's command may run
// (gantry.yaml refuses longer timeouts), plus the margin to record it.
const PipelinesLongestJob = time.Hour + 5*time.Minute

// PipelinesArea is the pipelines area's background work.
func PipelinesArea(p Pipelines) Area {
	return Area{
		Queue: QueueConfig{Name: QueuePipelines, FetchPollInterval: PipelinesPollInterval, FetchCooldown: PipelinesFetchCooldown},
		AddWorkers: func(w *river.Workers) {
			river.AddWorker(w, &ProgressPipelineWorker{Pipelines: p})
			river.AddWorker(w, &DoPipelineStepWorker{Pipelines: p})
			river.AddWorker(w, &SweepPipelinesWorker{Pipelines: p})
		},
		Periodic: []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(PipelinesSweepInterval),
				func() (river.JobArgs, *river.InsertOpts) { return SweepPipelinesArgs{}, nil },
				&river.PeriodicJobOpts{ID: "sweep_pipelines", RunOnStart: true}),
		},
		LongestJob: PipelinesLongestJob,
		Stale:      p.StaleJob,
	}
}
