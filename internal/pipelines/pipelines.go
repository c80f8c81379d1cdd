// Package pipelines is the pipelines area (seed 004): release pipelines
// synced from gantry.yaml, revisions and their build artifacts registered
// through the API, and their progression stage by stage by reading the
// deployment log. The decisions (frontier, doable, batches, new steps) are
// the pure engine internal/progression; this package reads the log and the
// work under way into it, performs the steps it says are doable and writes
// each completion to the log.
//
// One file per step: sync.go (gantry.yaml into the database),
// revisions.go (revisions and artifacts), progress.go (a progression
// round), steps.go (performing one step), operators.go (retry and skip),
// gates.go (approval gates, through internal/approvals), queries.go (what
// the API and pages ask).
package pipelines

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/progression"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// Log events of this area beyond the steps' own (progression's constants).
const (
	EventPipelineRegistered = "pipeline-registered"
	EventPipelineChanged    = "pipeline-changed"
	EventPipelineRemoved    = "pipeline-removed"
	EventArtifactRegistered = "artifact-registered"
	EventStepRetried        = "pipeline-step-retried"
	EventStepSkipped        = "pipeline-step-skipped"
)

// Service is the pipelines area.
type Service struct {
	Queue     *jobs.Queue
	Logger    *slog.Logger
	Approvals *approvals.Service
	// Env is added to every step command's environment (GANTRY_COMMAND_ENV).
	Env []string
	// Now is the clock (time.Now).
	Now func() time.Time
	// AgentDeadAfter is how long a host's agent may stay silent while it
	// runs a step (runs_on: agent) before the step fails: the daemons
	// area's heartbeat TTL (DefaultAgentDeadAfter when zero).
	AgentDeadAfter time.Duration

	// shapes keeps each pipeline's compiled shape by name, for as long as
	// its definition is the one in the database: every step's job reads
	// the pipeline, and compiling a thousand hosts each time would cost
	// more than the step.
	shapes sync.Map // name → *loaded
}

// DeploymentID is the log's deployment of one revision through a pipeline:
// every entry of that revision carries it.
func DeploymentID(pipeline, revision string) string { return "pipeline:" + pipeline + "@" + revision }

// Actor is who a pipeline's own steps are logged as.
func Actor(pipeline string) string { return "pipeline:" + pipeline }

// loaded is a pipeline's definition and its engine shape.
type loaded struct {
	row   *models.Pipeline
	def   gantryfile.Pipeline
	shape *progression.Pipeline
}

func (s *Service) load(ctx context.Context, db bun.IDB, name string) (*loaded, error) {
	version, err := models.PipelineVersion(ctx, db, name)
	if err != nil {
		return nil, notFound(err, "pipeline "+name)
	}
	if c, ok := s.shapes.Load(name); ok && c.(*loaded).row.UpdatedAt.Equal(version) {
		return c.(*loaded), nil
	}
	row, err := models.PipelineByName(ctx, db, name)
	if err != nil {
		return nil, notFound(err, "pipeline "+name)
	}
	l, err := loadRow(row)
	if err != nil {
		return nil, err
	}
	s.shapes.Store(name, l)
	return l, nil
}

func loadRow(row *models.Pipeline) (*loaded, error) {
	l := &loaded{row: row}
	if err := json.Unmarshal(row.Definition, &l.def); err != nil {
		return nil, fmt.Errorf("reading pipeline %s's definition: %w", row.Name, err)
	}
	shape, err := l.def.Shape()
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: %w", row.Name, err)
	}
	l.shape = shape
	return l, nil
}

// levelOf names the level of a step's target: the events that start,
// finish and fail it.
type level struct {
	name                      string
	started, finished, failed string
}

var (
	levelPipeline = level{"pipeline", progression.PipelineStarted, progression.PipelineFinished, progression.PipelineFailed}
	levelStage    = level{"stage", progression.StageStarted, progression.StageFinished, progression.StageFailed}
	levelGroup    = level{"host group", progression.GroupStarted, progression.GroupFinished, progression.GroupFailed}
	levelHost     = level{"host", progression.HostStarted, progression.HostFinished, progression.HostFailed}
)

// enclosing are the targets that contain a step's target, innermost
// first, with their levels: a host's group, stage and pipeline.
func enclosing(shape *progression.Pipeline, info progression.StepInfo) []struct {
	target string
	lvl    level
} {
	type tl = struct {
		target string
		lvl    level
	}
	var out []tl
	if info.Host != "" {
		out = append(out, tl{shape.HostTarget(info.Stage, info.HostGroup, info.Host), levelHost})
	}
	if info.HostGroup != "" {
		out = append(out, tl{shape.GroupTarget(info.Stage, info.HostGroup), levelGroup})
	}
	if info.Stage != "" {
		out = append(out, tl{shape.StageTarget(info.Stage), levelStage})
	}
	return append(out, tl{shape.Name, levelPipeline})
}

func notFound(err error, what string) error {
	if err == models.ErrNotFound {
		return apperr.New(apperr.NotFound, "No %s.", what)
	}
	return err
}

// stepKey is a step's work as the do job names it.
func stepKey(revisionID int64, s progression.Step) string {
	return strconv.FormatInt(revisionID, 10) + " " + s.String()
}

// inTx runs fn in one transaction that its caller's cancellation does not
// cut short: these transactions are short, and a stopping worker waits for
// them so that a step that finished has its completion recorded rather
// than run again.
func (s *Service) inTx(ctx context.Context, fn func(ctx context.Context, tx jobs.Tx) error) error {
	return s.Queue.InTx(context.WithoutCancel(ctx), fn)
}

// progressTx records, in a transaction that appended to pipeline's log,
// that its progression has something new to read, and wakes it: a
// progression queued or running (held until this transaction ends, see
// models.ProgressionQueued) reads it; otherwise a new one is queued.
func progressTx(ctx context.Context, tx jobs.Tx, pipeline string) error {
	if err := models.WantProgress(ctx, tx, pipeline); err != nil {
		return err
	}
	args := jobs.ProgressPipelineArgs{Pipeline: pipeline}
	if queued, err := models.ProgressionQueued(ctx, tx, args.Kind(), pipeline); err != nil || queued {
		return err
	}
	return tx.Enqueue(ctx, args, nil)
}

// logStep appends one entry of a revision's deployment.
func logStep(ctx context.Context, tx jobs.Tx, rev *models.PipelineRevision, target, event, actor string, detail map[string]any) error {
	return models.AppendLog(ctx, tx, &models.LogEntry{
		DeploymentID: DeploymentID(rev.Pipeline, rev.Revision), TargetID: target, Revision: rev.Revision,
		Event: event, Actor: actor, Detail: detail,
	})
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// trimReason keeps a failure's reason to a line people can read.
func trimReason(r string) string {
	r = strings.TrimSpace(r)
	if len(r) > 500 {
		r = r[:500] + "…"
	}
	return r
}
