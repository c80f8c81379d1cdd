package models

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Why a rollback execution was made.
const (
	RollbackRunFailed   = "run-failed"   // an execution of its run failed, was aborted or rejected
	RollbackUnitDeleted = "unit-deleted" // a later merge deleted the unit (the seed's revert)
)

// Rollback is what a rollback execution destroys and from which commit,
// and what became of a failed one.
type Rollback struct {
	bun.BaseModel `bun:"table:execution_rollbacks,alias:rb"`

	ExecutionID int64 `bun:",pk"` // the rollback execution
	RollbackOf  int64 // the execution whose new provider resources it destroys
	Reason      string
	Commit      string
	Addresses   []string `bun:",array"`
	// Remaining are the addresses still in the state after a failed
	// rollback; nil when not known (RemainingError says why).
	Remaining      []string `bun:",array"`
	RemainingError string
	ResolvedBy     string
	ResolvedReason string
	ResolvedAt     *time.Time
}

// Resolved reports whether an operator marked the failed rollback resolved.
func (r *Rollback) Resolved() bool { return r.ResolvedAt != nil }

// InsertRollback records the rollback execution x (inserted with it) of
// r.RollbackOf.
func InsertRollback(ctx context.Context, tx bun.IDB, x *Execution, r *Rollback) error {
	x.RollbackOf = &r.RollbackOf
	if err := InsertExecutions(ctx, tx, []*Execution{x}); err != nil {
		return fmt.Errorf("inserting the rollback of execution %d: %w", r.RollbackOf, err)
	}
	r.ExecutionID, r.Addresses = x.ID, nonNil(r.Addresses)
	if _, err := tx.NewInsert().Model(r).Exec(ctx); err != nil {
		return fmt.Errorf("recording the rollback of execution %d: %w", r.RollbackOf, err)
	}
	return nil
}

// RollbacksOfRun lists a run's rollbacks by rollback execution id.
func RollbacksOfRun(ctx context.Context, db bun.IDB, runID int64) (map[int64]Rollback, error) {
	var rs []Rollback
	err := db.NewSelect().Model(&rs).
		Where("execution_id IN (SELECT id FROM executions WHERE run_id = ?)", runID).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the rollbacks of run %d: %w", runID, err)
	}
	out := make(map[int64]Rollback, len(rs))
	for _, r := range rs {
		out[r.ExecutionID] = r
	}
	return out, nil
}

// RollbackByExecution finds the rollback of rollback execution id.
func RollbackByExecution(ctx context.Context, db bun.IDB, id int64) (*Rollback, error) {
	r := new(Rollback)
	err := db.NewSelect().Model(r).Where("execution_id = ?", id).Scan(ctx)
	return r, notFound(err)
}

// UpdateRollback writes the given columns of r.
func UpdateRollback(ctx context.Context, tx bun.IDB, r *Rollback, columns ...string) error {
	_, err := tx.NewUpdate().Model(r).Column(columns...).WherePK().Exec(ctx)
	if err != nil {
		return fmt.Errorf("updating the rollback execution %d: %w", r.ExecutionID, err)
	}
	return nil
}

// StandingNewResources lists, oldest first, the executions of repo's runs
// before beforeRun at the unit paths given that recorded new provider
// resources which no rollback execution has been made for.
func StandingNewResources(ctx context.Context, db bun.IDB, repo string, beforeRun int64, paths []string) ([]Execution, error) {
	var xs []Execution
	if len(paths) == 0 {
		return xs, nil
	}
	err := db.NewSelect().Model(&xs).ExcludeColumn("plan_output", "apply_output", "plan_file").
		Where("x.run_id IN (SELECT id FROM runs WHERE repository = ? AND id < ?)", repo, beforeRun).
		Where("x.cfg_path IN (?)", bun.In(paths)).Where("x.rollback_of IS NULL").
		Where("EXISTS (SELECT 1 FROM execution_new_resources AS nr WHERE nr.execution_id = x.id AND cardinality(nr.addresses) > 0)").
		Where("NOT EXISTS (SELECT 1 FROM execution_rollbacks AS rb WHERE rb.rollback_of = x.id)").
		OrderExpr("x.id").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the standing new provider resources of %s: %w", repo, err)
	}
	return xs, nil
}

// NewResourcesOf finds what the executions given recorded, by execution id.
func NewResourcesOf(ctx context.Context, db bun.IDB, ids []int64) (map[int64]NewResources, error) {
	var rs []NewResources
	out := map[int64]NewResources{}
	if len(ids) == 0 {
		return out, nil
	}
	if err := db.NewSelect().Model(&rs).Where("execution_id IN (?)", bun.In(ids)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("reading new provider resources: %w", err)
	}
	for _, r := range rs {
		out[r.ExecutionID] = r
	}
	return out, nil
}

// RunRollingBack reports whether a run is rolling back: one of its
// rollbacks runs, or failed and waits for an operator.
func RunRollingBack(ctx context.Context, db bun.IDB, runID int64) (bool, error) {
	n, err := db.NewSelect().Model((*Execution)(nil)).Where("x.run_id = ?", runID).Where("x.rollback_of IS NOT NULL").
		Where("x.status = ? OR (x.status = ? AND NOT EXISTS (SELECT 1 FROM execution_rollbacks AS rb WHERE rb.execution_id = x.id AND rb.resolved_at IS NOT NULL))",
			ExecRunning, ExecFailed).Count(ctx)
	if err != nil {
		return false, fmt.Errorf("reading whether run %d rolls back: %w", runID, err)
	}
	return n > 0, nil
}
