package models

import (
	"context"

	"github.com/uptrace/bun"
)

// JobCount is how many River jobs of a kind are in a state.
type JobCount struct {
	State string `bun:"state"`
	Kind  string `bun:"kind"`
	Count int    `bun:"count"`
}

// CountJobs groups River's jobs by state and kind, for metrics and the jobs page.
func CountJobs(ctx context.Context, db bun.IDB) ([]JobCount, error) {
	var counts []JobCount
	err := db.NewSelect().TableExpr("river_job").
		ColumnExpr("state::text AS state, kind, count(*) AS count").
		GroupExpr("state, kind").OrderExpr("state, kind").
		Scan(ctx, &counts)
	return counts, err
}
