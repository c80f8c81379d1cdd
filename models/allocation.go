package models

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Who ended an allocation.
const (
	EndedByClient   = "client"
	EndedByTimeout  = "timeout"
	EndedByOperator = "operator"
)

// Allocation is one environment leased to one integration test (seed 001:
// a test that needs N environments holds N allocations, one request id).
type Allocation struct {
	bun.BaseModel `bun:"table:allocations,alias:a"`

	ID            uuid.UUID `bun:"type:uuid,pk"`
	RequestID     uuid.UUID `bun:"type:uuid"`
	EnvironmentID int64
	Pool          string
	Requester     string
	Client        string
	CredentialRef string
	Capabilities  map[string]string `bun:",type:jsonb"`
	StartedAt     time.Time         `bun:",nullzero,notnull,default:current_timestamp"`
	ExpiresAt     time.Time
	EndedAt       *time.Time
	EndedBy       *string
	Outcome       string

	Environment *Environment `bun:"rel:belongs-to,join:environment_id=id"`
}

// Active reports whether the allocation still holds its environment.
func (a *Allocation) Active() bool { return a.EndedAt == nil }

// SetCredentialRef records what revoking an allocation's credentials needs.
func SetCredentialRef(ctx context.Context, tx bun.IDB, id uuid.UUID, ref string) error {
	res, err := tx.NewUpdate().Model((*Allocation)(nil)).Set("credential_ref = ?", ref).Where("id = ?", id).Exec(ctx)
	return affectedOne(res, err)
}

// AllocationByID finds an allocation with its environment.
func AllocationByID(ctx context.Context, db bun.IDB, id uuid.UUID) (*Allocation, error) {
	a := new(Allocation)
	if err := db.NewSelect().Model(a).Relation("Environment").Where("a.id = ?", id).Scan(ctx); err != nil {
		return nil, notFound(err)
	}
	return a, nil
}

// LockAllocation reads an allocation and its environment, locking the
// allocation, so that a release, a timeout and an extension of the same
// allocation happen one at a time.
func LockAllocation(ctx context.Context, tx bun.IDB, id uuid.UUID) (*Allocation, error) {
	a := new(Allocation)
	if err := tx.NewSelect().Model(a).Relation("Environment").Where("a.id = ?", id).For("UPDATE OF a").Scan(ctx); err != nil {
		return nil, notFound(err)
	}
	return a, nil
}

// ExtendAllocation moves an active allocation's expiry.
func ExtendAllocation(ctx context.Context, tx bun.IDB, id uuid.UUID, until time.Time) error {
	res, err := tx.NewUpdate().Model((*Allocation)(nil)).Set("expires_at = ?", until).
		Where("id = ?", id).Where("ended_at IS NULL").Exec(ctx)
	return affectedOne(res, err)
}

// AllocationFilter selects allocation history; zero fields do not filter.
type AllocationFilter struct {
	Pool          string
	Requester     string
	EnvironmentID int64
	Since         time.Time
	ActiveOnly    bool
	Limit         int
}

// ListAllocations is the first page of history matching f, newest first;
// ListAllocationHistory pages further.
func ListAllocations(ctx context.Context, db bun.IDB, f AllocationFilter) ([]Allocation, error) {
	return ListAllocationHistory(ctx, db, f, nil)
}

// ActiveAllocationOf is the allocation holding an environment, if any.
func ActiveAllocationOf(ctx context.Context, db bun.IDB, envID int64) (*Allocation, error) {
	a := new(Allocation)
	err := db.NewSelect().Model(a).Where("environment_id = ?", envID).Where("ended_at IS NULL").Scan(ctx)
	if err != nil {
		return nil, notFound(err)
	}
	return a, nil
}

// PruneAllocations deletes ended allocations that started before cutoff.
func PruneAllocations(ctx context.Context, db bun.IDB, cutoff time.Time) (int64, error) {
	res, err := db.NewDelete().Model((*Allocation)(nil)).
		Where("started_at < ?", cutoff).Where("ended_at IS NOT NULL").Exec(ctx)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// UtilizationPoint is how many of a pool's environments were leased during
// one bucket of time.
type UtilizationPoint struct {
	Bucket time.Time `bun:"bucket"`
	InUse  int       `bun:"in_use"`
}
