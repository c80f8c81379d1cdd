package models

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// OutputChanges is what an execution's apply did to its unit's root
// outputs: the names of those that changed (never their values), the units
// outside the run that read the unit and were added to the run because of
// it (Readers), CompareError when the outputs could not be compared (every
// reader is added then), and Error when the readers could not be worked
// out (the run fails when it ends).
type OutputChanges struct {
	bun.BaseModel `bun:"table:execution_output_changes,alias:oc"`

	ExecutionID  int64    `bun:",pk"`
	Outputs      []string `bun:",array"`
	Readers      []string `bun:",array"`
	CompareError string
	Error        string
	RecordedAt   time.Time `bun:",nullzero,notnull,default:current_timestamp"`
}

// Ripple says why a run gained an execution: the apply of Source (an
// execution of the same run, at SourceUnit) changed Outputs its unit reads.
type Ripple struct {
	bun.BaseModel `bun:"table:execution_ripples,alias:rp"`

	ExecutionID int64 `bun:",pk"`
	SourceID    int64
	SourceUnit  string
	Outputs     []string `bun:",array"`
}

// RecordOutputChanges records what an apply did to its unit's outputs; an
// execution applies once, so a second record (a repeated transaction)
// replaces the first.
func RecordOutputChanges(ctx context.Context, db bun.IDB, c *OutputChanges) error {
	c.Outputs, c.Readers = nonNil(c.Outputs), nonNil(c.Readers)
	_, err := db.NewInsert().Model(c).On("CONFLICT (execution_id) DO UPDATE").
		Set("outputs = EXCLUDED.outputs, readers = EXCLUDED.readers, compare_error = EXCLUDED.compare_error, error = EXCLUDED.error, recorded_at = now()").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("recording the output changes of execution %d: %w", c.ExecutionID, err)
	}
	return nil
}

// InsertRipples records why executions were added to a run.
func InsertRipples(ctx context.Context, db bun.IDB, rs []*Ripple) error {
	if len(rs) == 0 {
		return nil
	}
	if _, err := db.NewInsert().Model(&rs).Exec(ctx); err != nil {
		return fmt.Errorf("recording ripple executions: %w", err)
	}
	return nil
}

// RipplesOfRun are the ripple reasons of a run's executions and the
// output changes of its applies, each by execution id.
func RipplesOfRun(ctx context.Context, db bun.IDB, runID int64) (map[int64]Ripple, map[int64]OutputChanges, error) {
	var rs []Ripple
	if err := db.NewSelect().Model(&rs).
		Where("execution_id IN (SELECT id FROM executions WHERE run_id = ?)", runID).Scan(ctx); err != nil {
		return nil, nil, fmt.Errorf("listing the ripple executions of run %d: %w", runID, err)
	}
	var cs []OutputChanges
	if err := db.NewSelect().Model(&cs).
		Where("execution_id IN (SELECT id FROM executions WHERE run_id = ?)", runID).Scan(ctx); err != nil {
		return nil, nil, fmt.Errorf("listing the output changes of run %d: %w", runID, err)
	}
	ripples := make(map[int64]Ripple, len(rs))
	for _, r := range rs {
		ripples[r.ExecutionID] = r
	}
	changes := make(map[int64]OutputChanges, len(cs))
	for _, c := range cs {
		changes[c.ExecutionID] = c
	}
	return ripples, changes, nil
}

// RippleOf is why an execution was added to its run, or nil when it was
// not a ripple.
func RippleOf(ctx context.Context, db bun.IDB, executionID int64) (*Ripple, error) {
	var rs []Ripple
	if err := db.NewSelect().Model(&rs).Where("execution_id = ?", executionID).Scan(ctx); err != nil {
		return nil, fmt.Errorf("reading the ripple of execution %d: %w", executionID, err)
	}
	if len(rs) == 0 {
		return nil, nil
	}
	return &rs[0], nil
}

// RippleErrors are the errors of the run's output changes: ripples that
// could not be worked out, which fail the run.
func RippleErrors(ctx context.Context, db bun.IDB, runID int64) ([]string, error) {
	var errs []string
	err := db.NewSelect().Model((*OutputChanges)(nil)).Column("error").
		Where("error <> '' AND execution_id IN (SELECT id FROM executions WHERE run_id = ?)", runID).
		OrderExpr("execution_id").Scan(ctx, &errs)
	if err != nil {
		return nil, fmt.Errorf("reading the ripple errors of run %d: %w", runID, err)
	}
	return errs, nil
}

// RipplesOf are the ripple reasons of the executions among ids, by
// execution id.
func RipplesOf(ctx context.Context, db bun.IDB, ids []int64) (map[int64]Ripple, error) {
	out := map[int64]Ripple{}
	if len(ids) == 0 {
		return out, nil
	}
	var rs []Ripple
	if err := db.NewSelect().Model(&rs).Where("execution_id IN (?)", bun.In(ids)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("reading ripple reasons: %w", err)
	}
	for _, r := range rs {
		out[r.ExecutionID] = r
	}
	return out, nil
}
