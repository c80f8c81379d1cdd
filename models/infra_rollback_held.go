package models

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
)

// HeldRollbacks counts, by repository, the rollbacks that failed and wait
// for an operator: failed, not marked resolved, in a run that is not over.
// Repositories with none are absent.
func HeldRollbacks(ctx context.Context, db bun.IDB) (map[string]int, error) {
	var rows []InfraCount
	err := db.NewSelect().Model((*Execution)(nil)).
		ColumnExpr("run.repository").ColumnExpr("count(*) AS count").
		Join("JOIN runs AS run ON run.id = x.run_id").
		Join("JOIN execution_rollbacks AS rb ON rb.execution_id = x.id").
		Where("x.status = ?", ExecFailed).Where("rb.resolved_at IS NULL").
		Where("run.status IN (?)", bun.In([]string{RunScanning, RunRunning})).
		GroupExpr("1").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("counting the held rollbacks: %w", err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Repository] = r.Count
	}
	return out, nil
}
