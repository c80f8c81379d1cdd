package models

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// AllocationCursor is where a page of allocation history continues: the
// allocations that started before StartedAt, or at StartedAt with a smaller
// ID. The allocations of one request share their start time, so paging by
// time alone would skip some of them.
type AllocationCursor struct {
	StartedAt time.Time
	ID        uuid.UUID
}

// ListAllocationHistory is one page of allocation history matching f,
// newest first, continuing after cursor when it is set. It answers the
// seed's two questions: who held environment E, what did requester T hold.
func ListAllocationHistory(ctx context.Context, db bun.IDB, f AllocationFilter, after *AllocationCursor) ([]Allocation, error) {
	limit := f.Limit
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	var out []Allocation
	q := db.NewSelect().Model(&out).Relation("Environment").OrderExpr("a.started_at DESC, a.id DESC").Limit(int64(limit))
	if f.Pool != "" {
		q = q.Where("a.pool = ?", f.Pool)
	}
	if f.Requester != "" {
		q = q.Where("a.requester = ?", f.Requester)
	}
	if f.EnvironmentID != 0 {
		q = q.Where("a.environment_id = ?", f.EnvironmentID)
	}
	if !f.Since.IsZero() {
		q = q.Where("a.started_at >= ?", f.Since)
	}
	if f.ActiveOnly {
		q = q.Where("a.ended_at IS NULL")
	}
	if after != nil {
		q = q.Where("(a.started_at, a.id) < (?, ?)", after.StartedAt, after.ID)
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("listing allocation history: %w", err)
	}
	return out, nil
}

// RecentRequesters are the requesters of the kept history, most recently
// seen first, at most limit of them (for suggesting filter values).
func RecentRequesters(ctx context.Context, db bun.IDB, limit int) ([]string, error) {
	var out []string
	err := db.NewSelect().Model((*Allocation)(nil)).Column("requester").
		GroupExpr("requester").OrderExpr("max(started_at) DESC").Limit(int64(limit)).Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("listing requesters: %w", err)
	}
	return out, nil
}
