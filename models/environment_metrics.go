package models

import (
	"context"

	"github.com/uptrace/bun"
)

// EnvironmentCount is how many environments of a pool are in a state;
// "deregistering" counts those waiting to leave apart from their status.
type EnvironmentCount struct {
	Pool   string `bun:"pool"`
	Status string `bun:"status"`
	Count  int    `bun:"count"`
}

// CountEnvironments groups registered environments by pool and state.
func CountEnvironments(ctx context.Context, db bun.IDB) ([]EnvironmentCount, error) {
	var out []EnvironmentCount
	err := db.NewSelect().Model((*Environment)(nil)).
		ColumnExpr("pool").
		ColumnExpr("CASE WHEN deregister_requested_at IS NOT NULL THEN 'deregistering' ELSE status END AS status").
		ColumnExpr("count(*) AS count").
		Where("status <> 'deregistered'").
		GroupExpr("1, 2").OrderExpr("1, 2").Scan(ctx, &out)
	return out, err
}
