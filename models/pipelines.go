package models

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/uptrace/bun"
)

// Pipeline is a release pipeline as synced from gantry.yaml: its
// definition (the gantry.yaml entry, as JSON) and the event names of its
// steps at the last sync.
type Pipeline struct {
	bun.BaseModel `bun:"table:pipelines,alias:pl"`

	Name       string          `bun:",pk"`
	Definition json.RawMessage `bun:",type:jsonb,notnull"`
	Events     []string        `bun:",array"`
	RemovedAt  *time.Time
	CreatedAt  time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	UpdatedAt  time.Time `bun:",nullzero,notnull,default:current_timestamp"`
}

// Revision statuses.
const (
	RevisionInFlight = "in_flight"
	RevisionFinished = "finished"
)

// PipelineRevision is a revision registered for a pipeline; ID orders
// revisions by registration.
type PipelineRevision struct {
	bun.BaseModel `bun:"table:pipeline_revisions,alias:pr"`

	ID           int64 `bun:",pk,autoincrement"`
	Pipeline     string
	Revision     string
	Status       string
	RegisteredBy string
	CreatedAt    time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	FinishedAt   *time.Time
}

// PipelineArtifact is a build's artifact for one architecture.
type PipelineArtifact struct {
	bun.BaseModel `bun:"table:pipeline_artifacts,alias:pa"`

	RevisionID   int64  `bun:",pk"`
	Arch         string `bun:",pk"`
	Location     string
	RegisteredBy string
	CreatedAt    time.Time `bun:",nullzero,notnull,default:current_timestamp"`
}

// Step work statuses.
const (
	StepRunning = "running"
	StepDone    = "done"
	StepFailed  = "failed"
	StepSkipped = "skipped"
)

// PipelineStep is the work of one step for one revision.
type PipelineStep struct {
	bun.BaseModel `bun:"table:pipeline_steps,alias:ps"`

	RevisionID int64  `bun:",pk"`
	Event      string `bun:",pk"`
	Target     string `bun:",pk"`
	Status     string
	Attempt    int
	Reason     string
	Output     string
	StartedAt  time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	FinishedAt *time.Time
}

// UpsertPipeline registers or updates a pipeline (un-removing it).
func UpsertPipeline(ctx context.Context, tx bun.IDB, p *Pipeline) error {
	_, err := tx.NewInsert().Model(p).
		On("CONFLICT (name) DO UPDATE").
		Set("definition = EXCLUDED.definition, events = EXCLUDED.events, removed_at = NULL, updated_at = now()").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("registering pipeline %s: %w", p.Name, err)
	}
	return nil
}

// RemovePipelinesExcept marks removed every pipeline not in keep, and
// returns their names. Their history stays.
func RemovePipelinesExcept(ctx context.Context, tx bun.IDB, keep []string) ([]string, error) {
	var names []string
	q := tx.NewUpdate().Model((*Pipeline)(nil)).Set("removed_at = now()").Where("removed_at IS NULL")
	if len(keep) > 0 {
		q = q.Where("name NOT IN (?)", bun.In(keep))
	}
	if _, err := q.Returning("name").Exec(ctx, &names); err != nil {
		return nil, fmt.Errorf("removing pipelines: %w", err)
	}
	return names, nil
}

// ListPipelines lists the pipelines gantry.yaml has, by name.
func ListPipelines(ctx context.Context, db bun.IDB) ([]Pipeline, error) {
	var ps []Pipeline
	err := db.NewSelect().Model(&ps).Where("removed_at IS NULL").OrderExpr("name").Scan(ctx)
	return ps, err
}

// PipelineVersion is when the pipeline's row last changed (its definition
// with it): what a cached definition is checked against.
func PipelineVersion(ctx context.Context, db bun.IDB, name string) (time.Time, error) {
	var at time.Time
	err := db.NewSelect().Model((*Pipeline)(nil)).Column("updated_at").Where("name = ?", name).Where("removed_at IS NULL").Scan(ctx, &at)
	return at, notFound(err)
}

// PipelineByName is the pipeline gantry.yaml has under name.
func PipelineByName(ctx context.Context, db bun.IDB, name string) (*Pipeline, error) {
	p := new(Pipeline)
	if err := db.NewSelect().Model(p).Where("name = ?", name).Where("removed_at IS NULL").Scan(ctx); err != nil {
		return nil, notFound(err)
	}
	return p, nil
}

// WantProgress records, in the transaction of an append to the pipeline's
// log, that its progression has something new to read.
func WantProgress(ctx context.Context, tx bun.IDB, pipeline string) error {
	_, err := tx.NewRaw("INSERT INTO pipeline_wakeups (pipeline) VALUES (?)", pipeline).Exec(ctx)
	return err
}

// ProgressionQueued reports whether a progression job of pipeline is
// queued or running, and holds it (FOR SHARE) until the caller's
// transaction ends: the job cannot complete in between, so it reads what
// the caller appends. Share locks do not wait for each other, so the
// appends of many steps commit side by side instead of queueing on one
// job's row, as inserting a duplicate job (which River updates) would
// make them.
func ProgressionQueued(ctx context.Context, tx bun.IDB, kind, pipeline string) (bool, error) {
	var ids []int64
	err := tx.NewRaw(`SELECT id FROM river_job
		WHERE state IN ('available', 'pending', 'running', 'retryable', 'scheduled')
		  AND kind = ? AND args @> ?::jsonb
		FOR SHARE`, kind, `{"pipeline":`+strconv.Quote(pipeline)+`}`).Scan(ctx, &ids)
	return len(ids) > 0, err
}

// TakeWakeups removes the pipeline's wake-ups visible now: a round started
// after them reads what they announce.
func TakeWakeups(ctx context.Context, db bun.IDB, pipeline string) error {
	_, err := db.NewRaw("DELETE FROM pipeline_wakeups WHERE pipeline = ?", pipeline).Exec(ctx)
	return err
}

// HasWakeups reports whether an append committed since the last
// TakeWakeups.
func HasWakeups(ctx context.Context, db bun.IDB, pipeline string) (bool, error) {
	var ok bool
	err := db.NewRaw("SELECT EXISTS (SELECT 1 FROM pipeline_wakeups WHERE pipeline = ?)", pipeline).Scan(ctx, &ok)
	return ok, err
}

// PipelinesInFlight names the pipelines that have revisions in flight.
func PipelinesInFlight(ctx context.Context, db bun.IDB) ([]string, error) {
	var names []string
	err := db.NewSelect().Model((*PipelineRevision)(nil)).ColumnExpr("DISTINCT pr.pipeline").
		Join("JOIN pipelines AS pl ON pl.name = pr.pipeline AND pl.removed_at IS NULL").
		Where("pr.status = ?", RevisionInFlight).OrderExpr("pr.pipeline").Scan(ctx, &names)
	return names, err
}

// LatestRevisionID is the id of the pipeline's latest registered revision
// (0: none).
func LatestRevisionID(ctx context.Context, db bun.IDB, pipeline string) (int64, error) {
	var id int64
	err := db.NewSelect().Model((*PipelineRevision)(nil)).ColumnExpr("coalesce(max(id), 0)").
		Where("pipeline = ?", pipeline).Scan(ctx, &id)
	return id, err
}

// IntroduceSteps records that the kinds of step events appeared in the
// pipeline when revision after was the latest registered.
func IntroduceSteps(ctx context.Context, tx bun.IDB, pipeline string, events []string, after int64) error {
	for _, e := range events {
		_, err := tx.NewRaw(`INSERT INTO pipeline_step_introductions (pipeline, event, revision_after) VALUES (?, ?, ?)
			ON CONFLICT (pipeline, event) DO UPDATE SET revision_after = EXCLUDED.revision_after, introduced_at = now()`,
			pipeline, e, after).Exec(ctx)
		if err != nil {
			return fmt.Errorf("recording the introduction of %s: %w", e, err)
		}
	}
	return nil
}

// StepIntroductions are the pipeline's step introductions: event name →
// the latest revision id when it appeared.
func StepIntroductions(ctx context.Context, db bun.IDB, pipeline string) (map[string]int64, error) {
	var rows []struct {
		Event         string
		RevisionAfter int64
	}
	err := db.NewRaw("SELECT event, revision_after FROM pipeline_step_introductions WHERE pipeline = ?", pipeline).Scan(ctx, &rows)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Event] = r.RevisionAfter
	}
	return out, nil
}

// InsertRevision registers a revision; created is false when it was
// registered already (r is then the existing one).
func InsertRevision(ctx context.Context, tx bun.IDB, r *PipelineRevision) (created bool, err error) {
	res, err := tx.NewInsert().Model(r).On("CONFLICT (pipeline, revision) DO NOTHING").Returning("*").Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("registering revision %s of %s: %w", r.Revision, r.Pipeline, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, nil
	}
	existing, err := RevisionByName(ctx, tx, r.Pipeline, r.Revision)
	if err != nil {
		return false, err
	}
	*r = *existing
	return false, nil
}

// RevisionByName is the pipeline's revision named revision.
func RevisionByName(ctx context.Context, db bun.IDB, pipeline, revision string) (*PipelineRevision, error) {
	r := new(PipelineRevision)
	if err := db.NewSelect().Model(r).Where("pipeline = ? AND revision = ?", pipeline, revision).Scan(ctx); err != nil {
		return nil, notFound(err)
	}
	return r, nil
}

// RevisionByID is the revision with id.
func RevisionByID(ctx context.Context, db bun.IDB, id int64) (*PipelineRevision, error) {
	r := new(PipelineRevision)
	if err := db.NewSelect().Model(r).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, notFound(err)
	}
	return r, nil
}

// InFlightRevisions are the pipeline's revisions not finished, oldest first.
func InFlightRevisions(ctx context.Context, db bun.IDB, pipeline string) ([]PipelineRevision, error) {
	var rs []PipelineRevision
	err := db.NewSelect().Model(&rs).Where("pipeline = ? AND status = ?", pipeline, RevisionInFlight).OrderExpr("id").Scan(ctx)
	return rs, err
}

// RevisionFilter selects a page of a pipeline's revisions.
type RevisionFilter struct {
	Pipeline string
	Status   string // "" any
	Limit    int
	Offset   int
}

// ListRevisions lists a pipeline's revisions, newest first, and how many
// match.
func ListRevisions(ctx context.Context, db bun.IDB, f RevisionFilter) ([]PipelineRevision, int, error) {
	limit := f.Limit
	if limit <= 0 || limit > 200 {
		limit = 50
	}
	var rs []PipelineRevision
	q := db.NewSelect().Model(&rs).Where("pipeline = ?", f.Pipeline)
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	n, err := q.OrderExpr("id DESC").Limit(int64(limit)).Offset(int64(f.Offset)).ScanAndCount(ctx)
	return rs, int(n), err
}

// FinishRevision marks a revision finished (through the whole pipeline).
func FinishRevision(ctx context.Context, tx bun.IDB, id int64) error {
	_, err := tx.NewUpdate().Model((*PipelineRevision)(nil)).Set("status = ?, finished_at = now()", RevisionFinished).
		Where("id = ? AND status = ?", id, RevisionInFlight).Exec(ctx)
	return err
}

// InsertArtifact registers an artifact; false when the revision already
// has one for the architecture (a is then that one).
func InsertArtifact(ctx context.Context, tx bun.IDB, a *PipelineArtifact) (bool, error) {
	res, err := tx.NewInsert().Model(a).On("CONFLICT (revision_id, arch) DO NOTHING").Returning("*").Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("registering artifact %s: %w", a.Arch, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, nil
	}
	err = tx.NewSelect().Model(a).Where("revision_id = ? AND arch = ?", a.RevisionID, a.Arch).Scan(ctx)
	return false, err
}

// ArtifactsOf are a revision's artifacts by architecture.
func ArtifactsOf(ctx context.Context, db bun.IDB, revisionID int64) ([]PipelineArtifact, error) {
	var as []PipelineArtifact
	err := db.NewSelect().Model(&as).Where("revision_id = ?", revisionID).OrderExpr("arch").Scan(ctx)
	return as, err
}

// StartSteps records that the steps' work starts (attempt 1), in one
// statement, and returns those that had no record yet (the others started
// before).
func StartSteps(ctx context.Context, tx bun.IDB, steps []PipelineStep) ([]PipelineStep, error) {
	if len(steps) == 0 {
		return nil, nil
	}
	for i := range steps {
		steps[i].Status, steps[i].Attempt = StepRunning, 1
	}
	var started []PipelineStep
	err := tx.NewInsert().Model(&steps).On("CONFLICT DO NOTHING").Returning("revision_id, event, target, attempt").Scan(ctx, &started)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("starting %d steps: %w", len(steps), err)
	}
	return started, nil
}

// StepByKey is one step's work.
func StepByKey(ctx context.Context, db bun.IDB, revisionID int64, event, target string) (*PipelineStep, error) {
	s := new(PipelineStep)
	err := db.NewSelect().Model(s).Where("revision_id = ? AND event = ? AND target = ?", revisionID, event, target).Scan(ctx)
	if err != nil {
		return nil, notFound(err)
	}
	return s, nil
}

// LockStep is StepByKey, locked for the transaction.
func LockStep(ctx context.Context, tx bun.IDB, revisionID int64, event, target string) (*PipelineStep, error) {
	s := new(PipelineStep)
	err := tx.NewSelect().Model(s).Where("revision_id = ? AND event = ? AND target = ?", revisionID, event, target).For("UPDATE").Scan(ctx)
	if err != nil {
		return nil, notFound(err)
	}
	return s, nil
}

// EndStep ends the running attempt of a step as status (done or failed)
// with why and its output; false when that attempt is not running any
// more (it ended already, or was retried).
func EndStep(ctx context.Context, tx bun.IDB, s *PipelineStep, status, reason, output string) (bool, error) {
	res, err := tx.NewUpdate().Model((*PipelineStep)(nil)).
		Set("status = ?, reason = ?, output = ?, finished_at = now()", status, reason, output).
		Where("revision_id = ? AND event = ? AND target = ?", s.RevisionID, s.Event, s.Target).
		Where("status = ? AND attempt = ?", StepRunning, s.Attempt).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("ending %s on %s: %w", s.Event, s.Target, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// AppendStepOutput adds a piece of a running attempt's output.
func AppendStepOutput(ctx context.Context, db bun.IDB, s *PipelineStep, text string) error {
	_, err := db.NewUpdate().Model((*PipelineStep)(nil)).Set("output = output || ?", text).
		Where("revision_id = ? AND event = ? AND target = ?", s.RevisionID, s.Event, s.Target).
		Where("status = ? AND attempt = ?", StepRunning, s.Attempt).Exec(ctx)
	return err
}

// RetryStep starts a failed step again under a new attempt; false when it
// is not failed.
func RetryStep(ctx context.Context, tx bun.IDB, s *PipelineStep) (bool, error) {
	res, err := tx.NewUpdate().Model(s).
		Set("status = ?, attempt = attempt + 1, reason = '', output = '', started_at = now(), finished_at = NULL", StepRunning).
		Where("revision_id = ? AND event = ? AND target = ?", s.RevisionID, s.Event, s.Target).
		Where("status = ?", StepFailed).Returning("*").Exec(ctx)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// SkipStep marks a failed step skipped; false when it is not failed.
func SkipStep(ctx context.Context, tx bun.IDB, s *PipelineStep) (bool, error) {
	res, err := tx.NewUpdate().Model((*PipelineStep)(nil)).Set("status = ?, finished_at = now()", StepSkipped).
		Where("revision_id = ? AND event = ? AND target = ?", s.RevisionID, s.Event, s.Target).
		Where("status = ?", StepFailed).Exec(ctx)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// OpenSteps are the running and failed steps of the revisions.
func OpenSteps(ctx context.Context, db bun.IDB, revisionIDs []int64) ([]PipelineStep, error) {
	if len(revisionIDs) == 0 {
		return nil, nil
	}
	var ss []PipelineStep
	err := db.NewSelect().Model(&ss).ExcludeColumn("output").
		Where("revision_id IN (?)", bun.In(revisionIDs)).Where("status IN (?, ?)", StepRunning, StepFailed).Scan(ctx)
	return ss, err
}

// StepsOf are every step's work of a revision, in the order they started.
func StepsOf(ctx context.Context, db bun.IDB, revisionID int64) ([]PipelineStep, error) {
	var ss []PipelineStep
	err := db.NewSelect().Model(&ss).Where("revision_id = ?", revisionID).OrderExpr("started_at, event, target").Scan(ctx)
	return ss, err
}

// DeploymentEntry is the part of a log entry progression reads.
type DeploymentEntry struct {
	ID           int64
	DeploymentID string
	TargetID     string
	Event        string
	Detail       map[string]any `bun:",type:jsonb"`
}

// DeploymentLogs are the log entries of the deployments, in log order.
func DeploymentLogs(ctx context.Context, db bun.IDB, deploymentIDs []string) ([]DeploymentEntry, error) {
	if len(deploymentIDs) == 0 {
		return nil, nil
	}
	var es []DeploymentEntry
	// Only an operator's skip needs its detail (which step it skipped).
	err := db.NewSelect().Model((*LogEntry)(nil)).Column("id", "deployment_id", "target_id", "event").
		ColumnExpr("CASE WHEN event = 'pipeline-step-skipped' THEN detail END AS detail").
		Where("deployment_id IN (?)", bun.In(deploymentIDs)).OrderExpr("id").Scan(ctx, &es)
	return es, err
}

// InProgressAt is the start entries of revisions that started at a
// level (started) on target and have not finished it (succeeded) since,
// oldest first. A failed revision stays in progress: it waits for an
// operator to retry or skip.
func InProgressAt(ctx context.Context, db bun.IDB, target, started, succeeded string) ([]LogEntry, error) {
	return InProgress(ctx, db, target, Granularity{Started: started, Succeeded: succeeded, Failed: succeeded})
}

// LatestAt is LatestRevision without ErrNotFound: nil when no revision
// reached event on target.
func LatestAt(ctx context.Context, db bun.IDB, target, event string) (*LogEntry, error) {
	e, err := LatestRevision(ctx, db, target, event)
	if errors.Is(err, ErrNotFound) || errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return e, err
}

// StepOutputFrom is a step's output from character offset on, the offset
// after it, and the step's status: what a page polls while its command runs.
func StepOutputFrom(ctx context.Context, db bun.IDB, revisionID int64, event, target string, offset int) (text string, next int, status string, err error) {
	var row struct {
		Text   string
		Next   int
		Status string
	}
	err = db.NewRaw(`SELECT substr(output, ? + 1) AS text, char_length(output) AS next, status FROM pipeline_steps
		WHERE revision_id = ? AND event = ? AND target = ?`, offset, revisionID, event, target).Scan(ctx, &row)
	return row.Text, row.Next, row.Status, notFound(err)
}
