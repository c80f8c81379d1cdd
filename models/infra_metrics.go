package models

import (
	"context"

	"github.com/uptrace/bun"
)

// InfraCount is how many runs or executions of a repository are in one
// status.
type InfraCount struct {
	Repository string `bun:"repository"`
	Status     string `bun:"status"`
	Count      int    `bun:"count"`
}

// CountRuns counts runs by repository and status.
func CountRuns(ctx context.Context, db bun.IDB) ([]InfraCount, error) {
	var out []InfraCount
	err := db.NewSelect().Model((*Run)(nil)).ColumnExpr("repository, status, count(*) AS count").
		GroupExpr("1, 2").OrderExpr("1, 2").Scan(ctx, &out)
	return out, err
}

// CountLiveExecutions counts the executions of unfinished runs by
// repository and status, a running one by its step (planning, voting,
// applying).
func CountLiveExecutions(ctx context.Context, db bun.IDB) ([]InfraCount, error) {
	var out []InfraCount
	err := db.NewSelect().Model((*Execution)(nil)).
		ColumnExpr("run.repository").
		ColumnExpr("CASE WHEN x.status = ? THEN x.step ELSE x.status END AS status", ExecRunning).
		ColumnExpr("count(*) AS count").
		Join("JOIN runs AS run ON run.id = x.run_id").
		Where("run.status IN (?)", bun.In([]string{RunScanning, RunRunning})).
		GroupExpr("1, 2").OrderExpr("1, 2").Scan(ctx, &out)
	return out, err
}

// LockedRepositories lists the repositories whose merge lock is held.
func LockedRepositories(ctx context.Context, db bun.IDB) ([]string, error) {
	var out []string
	err := db.NewSelect().Model((*MergeLock)(nil)).Column("repository").Order("repository").Scan(ctx, &out)
	return out, err
}
