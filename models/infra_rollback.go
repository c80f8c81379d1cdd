package models

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// NewResources are the resources of the providers an execution's apply
// introduced to its unit (see internal/tfstate), by full address: what a
// rollback destroys. Error says why they could not be read.
type NewResources struct {
	bun.BaseModel `bun:"table:execution_new_resources,alias:nr"`

	ExecutionID int64    `bun:",pk"`
	Providers   []string `bun:",array"`
	Addresses   []string `bun:",array"`
	Error       string
	RecordedAt  time.Time `bun:",nullzero,notnull,default:current_timestamp"`
}

// RecordNewResources records what an execution's apply introduced; an
// execution applies once, so a second record (a repeated transaction)
// replaces the first.
func RecordNewResources(ctx context.Context, db bun.IDB, r *NewResources) error {
	// A nil slice would be stored as NULL; none is an empty array.
	r.Providers, r.Addresses = nonNil(r.Providers), nonNil(r.Addresses)
	_, err := db.NewInsert().Model(r).On("CONFLICT (execution_id) DO UPDATE").
		Set("providers = EXCLUDED.providers, addresses = EXCLUDED.addresses, error = EXCLUDED.error, recorded_at = now()").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("recording the new provider resources of execution %d: %w", r.ExecutionID, err)
	}
	return nil
}

// NewResourcesOfRun lists what each of a run's applied executions
// introduced, by execution id.
func NewResourcesOfRun(ctx context.Context, db bun.IDB, runID int64) (map[int64]NewResources, error) {
	var rs []NewResources
	err := db.NewSelect().Model(&rs).
		Where("execution_id IN (SELECT id FROM executions WHERE run_id = ?)", runID).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the new provider resources of run %d: %w", runID, err)
	}
	out := make(map[int64]NewResources, len(rs))
	for _, r := range rs {
		out[r.ExecutionID] = r
	}
	return out, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
