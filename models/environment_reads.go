package models

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
)

// The read models of the environments pages: each returns what a page
// shows, filtered and paged in SQL, in one query whatever the number of
// rows.

// EnvDeregistering is a state, not a status: an environment removed from
// gantry.yaml that waits for its allocation or cleanup to end.
const EnvDeregistering = "deregistering"

// environmentStateSQL is an environment's state as people see it: a dirty
// environment needs a human whatever else is true of it; any other waiting
// to leave is deregistering.
const environmentStateSQL = `CASE WHEN e.status = 'dirty' THEN 'dirty'
	WHEN e.deregister_requested_at IS NOT NULL AND e.status <> 'deregistered' THEN 'deregistering'
	ELSE e.status END`

// environmentNameSQL is Environment.Name in SQL.
const environmentNameSQL = `coalesce(nullif(e.name, ''), nullif(e.database, ''), e.account || '/' || e.region)`

// EnvironmentTarget is the deployment log's target of the environment key.
func EnvironmentTarget(key string) string { return "environment:" + key }

// EnvironmentsIndex is what the pools' index page shows: the registered
// pools, a page of each one's environments matching a filter, every pool's
// capacity and utilisation, and the dirty environments.
type EnvironmentsIndex struct {
	Pools        []Pool                          // by name
	Environments map[string][]EnvironmentListing // by pool
	States       map[string]map[string]int       // registered environments by pool and state
	Utilization  map[string][]UtilizationPoint   // by pool, hourly
	Dirty        []DirtyEnvironment
}

// EnvironmentsIndexQuery selects what EnvironmentsIndexPage reads.
type EnvironmentsIndexQuery struct {
	List EnvironmentListFilter
	// UtilizationSince is where the hourly utilisation starts.
	UtilizationSince time.Time
	// DirtyReasons are the log events that say why an environment is dirty.
	DirtyReasons []string
}

// EnvironmentsIndexPage reads the pools' index page in five queries,
// however many pools and environments there are.
func EnvironmentsIndexPage(ctx context.Context, db bun.IDB, q EnvironmentsIndexQuery) (*EnvironmentsIndex, error) {
	idx := &EnvironmentsIndex{Environments: map[string][]EnvironmentListing{}, States: map[string]map[string]int{}}
	var err error
	if idx.Pools, err = ListShownPools(ctx, db); err != nil {
		return nil, fmt.Errorf("listing pools: %w", err)
	}
	listed, err := ListEnvironmentPage(ctx, db, q.List)
	if err != nil {
		return nil, err
	}
	for _, e := range listed {
		idx.Environments[e.Pool] = append(idx.Environments[e.Pool], e)
	}
	counts, err := CountEnvironmentStates(ctx, db)
	if err != nil {
		return nil, err
	}
	for _, n := range counts {
		if idx.States[n.Pool] == nil {
			idx.States[n.Pool] = map[string]int{}
		}
		idx.States[n.Pool][n.State] = n.Count
	}
	if idx.Utilization, err = PoolUtilization(ctx, db, q.List.Pool, q.UtilizationSince, time.Hour); err != nil {
		return nil, err
	}
	if idx.Dirty, err = ListDirtyEnvironments(ctx, db, q.DirtyReasons); err != nil {
		return nil, err
	}
	return idx, nil
}

// EnvironmentListFilter selects the environments of the pools' tables.
type EnvironmentListFilter struct {
	Pool string // "": every registered pool
	// State is a status or EnvDeregistering; "": every registered
	// environment (all but the deregistered).
	State string
	// Query is part of a name, key or capability key=value, in any case.
	Query string
	// Offset and Limit page each pool's matching environments, by key.
	Offset, Limit int
}

// EnvironmentListing is one environment as the pools' tables list it:
// without its cleanup output, with who holds it until when, and how many
// environments of its pool matched the filter (for paging).
type EnvironmentListing struct {
	Environment `bun:",extend"`

	HeldBy    string     `bun:"held_by,scanonly"`
	HeldUntil *time.Time `bun:"held_until,scanonly"`
	Matching  int        `bun:"matching,scanonly"`
}

// ListEnvironmentPage is one page of each registered pool's environments
// matching f, by pool and key, each with its current allocation.
func ListEnvironmentPage(ctx context.Context, db bun.IDB, f EnvironmentListFilter) ([]EnvironmentListing, error) {
	matching := db.NewSelect().TableExpr("environments AS e").
		ColumnExpr(environmentColumns).
		ColumnExpr("row_number() OVER (PARTITION BY e.pool ORDER BY e.key) AS position").
		ColumnExpr("count(*) OVER (PARTITION BY e.pool) AS matching").
		Where("e.pool IN " + shownPoolsSQL)
	if f.Pool != "" {
		matching = matching.Where("e.pool = ?", f.Pool)
	}
	if f.State == "" {
		matching = matching.Where("e.status <> 'deregistered'")
	} else {
		matching = matching.Where(environmentStateSQL+" = ?", f.State)
	}
	if f.Query != "" {
		matching = matching.Where(`(strpos(lower(`+environmentNameSQL+`), lower(?0)) > 0
			OR strpos(lower(e.key), lower(?0)) > 0
			OR EXISTS (SELECT 1 FROM jsonb_each_text(e.capabilities) AS c(k, v) WHERE strpos(lower(c.k || '=' || c.v), lower(?0)) > 0))`, f.Query)
	}
	var out []EnvironmentListing
	err := db.NewSelect().TableExpr("(?) AS e", matching).
		ColumnExpr(environmentColumns).
		ColumnExpr("e.matching, coalesce(a.requester, '') AS held_by, a.expires_at AS held_until").
		Join("LEFT JOIN allocations AS a ON a.environment_id = e.id AND a.ended_at IS NULL").
		Where("e.position > ? AND e.position <= ?", f.Offset, f.Offset+f.Limit).
		OrderExpr("e.pool, e.key").Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("listing environments: %w", err)
	}
	return out, nil
}

// PoolStateCount is how many of a pool's registered environments are in a
// state (a status or EnvDeregistering, as people see it).
type PoolStateCount struct {
	Pool  string `bun:"pool"`
	State string `bun:"state"`
	Count int    `bun:"count"`
}

// CountEnvironmentStates counts every pool's registered environments by
// state.
func CountEnvironmentStates(ctx context.Context, db bun.IDB) ([]PoolStateCount, error) {
	var out []PoolStateCount
	err := db.NewSelect().TableExpr("environments AS e").
		ColumnExpr("e.pool").ColumnExpr(environmentStateSQL+" AS state").ColumnExpr("count(*) AS count").
		Where("e.status <> 'deregistered'").
		GroupExpr("1, 2").OrderExpr("1, 2").Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("counting environments by state: %w", err)
	}
	return out, nil
}

// DirtyEnvironment is a dirty environment with why: the newest of its log
// entries whose event is one of those asked for, and that entry's error.
type DirtyEnvironment struct {
	Environment `bun:",extend"`

	ReasonEvent string `bun:"reason_event,scanonly"`
	ReasonError string `bun:"reason_error,scanonly"`
}

// ListDirtyEnvironments lists the dirty environments of every pool, by pool
// and key, each with the newest of its log entries among reasonEvents.
func ListDirtyEnvironments(ctx context.Context, db bun.IDB, reasonEvents []string) ([]DirtyEnvironment, error) {
	var out []DirtyEnvironment
	err := db.NewSelect().TableExpr("environments AS e").ColumnExpr("e.*").
		ColumnExpr("coalesce(l.event, '') AS reason_event, coalesce(l.detail->>'error', '') AS reason_error").
		Join(`LEFT JOIN LATERAL (
			SELECT l.event, l.detail FROM deployment_log AS l
			WHERE l.target_id = ? || e.key AND l.event = ANY (?)
			ORDER BY l.id DESC LIMIT 1) AS l ON true`, EnvironmentTarget(""), pgdialect.Array(reasonEvents)).
		Where("e.status = 'dirty'").OrderExpr("e.pool, e.key").Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("listing dirty environments: %w", err)
	}
	return out, nil
}

// EnvironmentChoice is an environment as the history's filter offers it.
type EnvironmentChoice struct {
	ID           int64  `bun:"id"`
	Name         string `bun:"name"`
	Pool         string `bun:"pool"`
	Deregistered bool   `bun:"deregistered"`
}

// ListEnvironmentChoices lists every environment ever registered, by pool
// and key.
func ListEnvironmentChoices(ctx context.Context, db bun.IDB) ([]EnvironmentChoice, error) {
	var out []EnvironmentChoice
	err := db.NewSelect().TableExpr("environments AS e").
		ColumnExpr("e.id, "+environmentNameSQL+" AS name, e.pool, e.status = ? AS deregistered", EnvDeregistered).
		OrderExpr("e.pool, e.key").Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("listing environments: %w", err)
	}
	return out, nil
}

// ListHistoryPools names the pools the allocation history can hold: the
// registered ones and those of every environment, even when removed from
// gantry.yaml, in byte order.
func ListHistoryPools(ctx context.Context, db bun.IDB) ([]string, error) {
	var out []string
	err := db.NewRaw(`SELECT name FROM (
			SELECT name FROM pools WHERE removed_at IS NULL UNION SELECT pool FROM environments
		) AS p ORDER BY name COLLATE "C"`).Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("listing pools of the history: %w", err)
	}
	return out, nil
}

// PoolUtilization counts, per bucket from since until now, the allocations
// of each registered pool (or of pool, when set) that overlapped the bucket.
func PoolUtilization(ctx context.Context, db bun.IDB, pool string, since time.Time, bucket time.Duration) (map[string][]UtilizationPoint, error) {
	var rows []struct {
		Pool   string    `bun:"pool"`
		Bucket time.Time `bun:"bucket"`
		InUse  int       `bun:"in_use"`
	}
	step := fmt.Sprintf("%d seconds", int(bucket.Seconds()))
	err := db.NewRaw(`
		SELECT p.name AS pool, b.bucket, count(a.id) AS in_use
		FROM pools AS p
		CROSS JOIN generate_series(?::timestamptz, now(), ?::interval) AS b(bucket)
		LEFT JOIN allocations AS a ON a.pool = p.name
			AND a.started_at < b.bucket + ?::interval
			AND coalesce(a.ended_at, now()) >= b.bucket
		WHERE p.removed_at IS NULL AND (? = '' OR p.name = ?)
		GROUP BY p.name, b.bucket ORDER BY p.name, b.bucket`, since, step, step, pool, pool).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("measuring utilisation: %w", err)
	}
	out := map[string][]UtilizationPoint{}
	for _, r := range rows {
		out[r.Pool] = append(out[r.Pool], UtilizationPoint{Bucket: r.Bucket, InUse: r.InUse})
	}
	return out, nil
}
