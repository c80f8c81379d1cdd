package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"
)

// WriteSteps records steps as done at once (the bookkeeping steps a
// progression round writes itself), in one statement, and returns those
// that had no record yet: a step another transaction recorded first is
// not written twice.
func WriteSteps(ctx context.Context, tx bun.IDB, steps []PipelineStep) ([]PipelineStep, error) {
	if len(steps) == 0 {
		return nil, nil
	}
	for i := range steps {
		steps[i].Status, steps[i].Attempt = StepDone, 1
	}
	var written []PipelineStep
	err := tx.NewInsert().Model(&steps).Value("finished_at", "now()").On("CONFLICT DO NOTHING").
		Returning("revision_id, event, target").Scan(ctx, &written)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("writing %d steps: %w", len(steps), err)
	}
	return written, nil
}

// AppendLogs writes the entries inside the caller's transaction in one
// statement, in their order.
func AppendLogs(ctx context.Context, tx bun.IDB, es []LogEntry) error {
	if len(es) == 0 {
		return nil
	}
	for i := range es {
		e := &es[i]
		if e.TargetID == "" || e.Event == "" || e.Actor == "" {
			return fmt.Errorf("log entry needs a target, an event and an actor (got %q, %q, %q)", e.TargetID, e.Event, e.Actor)
		}
		if e.Detail == nil {
			e.Detail = map[string]any{}
		}
	}
	if _, err := tx.NewInsert().Model(&es).Returning("id, created_at").Exec(ctx); err != nil {
		return fmt.Errorf("appending %d entries to the deployment log: %w", len(es), err)
	}
	return nil
}

// ArtifactsOfRevisions are the artifacts of the revisions, in one read.
func ArtifactsOfRevisions(ctx context.Context, db bun.IDB, revisionIDs []int64) ([]PipelineArtifact, error) {
	if len(revisionIDs) == 0 {
		return nil, nil
	}
	var as []PipelineArtifact
	err := db.NewSelect().Model(&as).Where("revision_id IN (?)", bun.In(revisionIDs)).Scan(ctx)
	return as, err
}

// ArtifactOf is a revision's artifact for arch.
func ArtifactOf(ctx context.Context, db bun.IDB, revisionID int64, arch string) (*PipelineArtifact, error) {
	a := new(PipelineArtifact)
	if err := db.NewSelect().Model(a).Where("revision_id = ? AND arch = ?", revisionID, arch).Scan(ctx); err != nil {
		return nil, notFound(err)
	}
	return a, nil
}
