package models

// The allocation API's hot path: leasing and returning environments. Each
// function here is one statement whose arguments travel as bind parameters,
// so PostgreSQL parses and plans it once per connection (pgx keeps the
// prepared statement) instead of on every call, as it does for Bun's queries,
// whose arguments are written into the SQL text. Several changes that must
// happen together are one statement with data-modifying CTEs, so a lease or a
// return takes few round trips. They run inside the caller's transaction.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/uptrace/bun"
)

// Tx is a transaction that models can also reach through pgx: the statements
// here are sent by pgx on it, which takes their arguments as bind parameters
// and encodes and decodes PostgreSQL's binary format without database/sql in
// between. jobs.Tx is one.
type Tx interface {
	bun.IDB
	Pgx() pgx.Tx
}

// environmentColumns are an environment's columns but its cleanup output,
// which can be long and is not needed to lease or return it.
const environmentColumns = `e.id, e.key, e.pool, e.kind, e.account, e.region, e.admin_role, e.database, e.name,
	e.capabilities, e.status, e.deregister_requested_at, e.deregistered_at, e.last_released_at, e.cleanup_id,
	e.cleanup_started_at, e.cleanup_finished_at, e.created_at, e.updated_at`

type environmentScan struct {
	e    *Environment
	caps []byte
}

func (s *environmentScan) dest() []any {
	e := s.e
	return []any{&e.ID, &e.Key, &e.Pool, &e.Kind, &e.Account, &e.Region, &e.AdminRole, &e.Database, &e.SlotName,
		&s.caps, &e.Status, &e.DeregisterRequestedAt, &e.DeregisteredAt, &e.LastReleasedAt, &e.CleanupID,
		&e.CleanupStartedAt, &e.CleanupFinishedAt, &e.CreatedAt, &e.UpdatedAt}
}

func (s *environmentScan) done() error { return unmarshalCapabilities(s.caps, &s.e.Capabilities) }

const allocationColumns = `a.id, a.request_id, a.environment_id, a.pool, a.requester, a.client, a.credential_ref,
	a.capabilities, a.started_at, a.expires_at, a.ended_at, a.ended_by, a.outcome`

type allocationScan struct {
	a    *Allocation
	caps []byte
}

func (s *allocationScan) dest() []any {
	a := s.a
	return []any{&a.ID, &a.RequestID, &a.EnvironmentID, &a.Pool, &a.Requester, &a.Client, &a.CredentialRef,
		&s.caps, &a.StartedAt, &a.ExpiresAt, &a.EndedAt, &a.EndedBy, &a.Outcome}
}

func (s *allocationScan) done() error { return unmarshalCapabilities(s.caps, &s.a.Capabilities) }

// poolColumns are a pool's columns, its arrays as JSON (database/sql cannot
// scan PostgreSQL arrays).
const poolColumns = `p.name, p.kind, p.session_seconds, p.max_session_seconds, p.cleanup_timeout_seconds,
	array_to_json(p.clients), array_to_json(p.cleanup_command), p.postgres_admin_url_env, p.postgres_template,
	array_to_json(p.notify_emails), p.notify_webhook, p.removed_at, p.updated_at`

type poolScan struct {
	p                        *Pool
	clients, cleanup, emails []byte
}

func (s *poolScan) dest() []any {
	p := s.p
	return []any{&p.Name, &p.Kind, &p.SessionSeconds, &p.MaxSessionSeconds, &p.CleanupTimeoutSeconds,
		&s.clients, &s.cleanup, &p.PostgresAdminURLEnv, &p.PostgresTemplate, &s.emails, &p.NotifyWebhook,
		&p.RemovedAt, &p.UpdatedAt}
}

func (s *poolScan) done() error {
	for _, f := range []struct {
		raw []byte
		to  *[]string
	}{{s.clients, &s.p.Clients}, {s.cleanup, &s.p.CleanupCommand}, {s.emails, &s.p.NotifyEmails}} {
		*f.to = []string{}
		if err := json.Unmarshal(f.raw, f.to); err != nil {
			return fmt.Errorf("reading pool %s: %w", s.p.Name, err)
		}
	}
	return nil
}

func unmarshalCapabilities(raw []byte, to *map[string]string) error {
	*to = nil
	if err := json.Unmarshal(raw, to); err != nil {
		return fmt.Errorf("reading capabilities: %w", err)
	}
	if *to == nil {
		*to = map[string]string{}
	}
	return nil
}

// LockLeasable locks up to limit environments of the registered pool named
// pool that may be leased now and match at least one of the requirements, in
// the order they should be taken (released longest ago first), skipping rows
// other transactions have locked: concurrent allocations take different
// environments instead of waiting for each other. It returns the pool too,
// read in the same statement, unless it locked nothing: then the pool is nil
// (not registered, or nothing leasable) and the caller reads it with
// PoolByName to tell why. The environments come without their cleanup
// output.
func LockLeasable(ctx context.Context, tx Tx, pool string, requirements []map[string]string, limit int) (*Pool, []Environment, error) {
	// nil: any environment will do (some requirement is empty).
	var wanted []string
	for _, r := range requirements {
		if len(r) == 0 {
			wanted = nil
			break
		}
		wanted = append(wanted, capabilitiesJSON(r))
	}
	rows, err := tx.Pgx().Query(ctx, `SELECT `+poolColumns+`, `+environmentColumns+`
		FROM pools p CROSS JOIN LATERAL (
			SELECT * FROM environments e
			WHERE e.pool = p.name AND e.status = 'available' AND e.deregister_requested_at IS NULL
				AND ($2::jsonb[] IS NULL OR e.capabilities @> ANY ($2::jsonb[]))
			ORDER BY e.last_released_at ASC NULLS FIRST, e.id
			LIMIT $3
			FOR UPDATE SKIP LOCKED
		) e
		WHERE p.name = $1 AND p.removed_at IS NULL`, pool, wanted, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("locking environments of %s: %w", pool, err)
	}
	defer rows.Close()
	var p *Pool
	var envs []Environment
	for rows.Next() {
		ps := poolScan{p: new(Pool)}
		envs = append(envs, Environment{})
		es := environmentScan{e: &envs[len(envs)-1]}
		if err := rows.Scan(append(ps.dest(), es.dest()...)...); err != nil {
			return nil, nil, fmt.Errorf("locking environments of %s: %w", pool, err)
		}
		if err := es.done(); err != nil {
			return nil, nil, err
		}
		if p == nil {
			if err := ps.done(); err != nil {
				return nil, nil, err
			}
			p = ps.p
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("locking environments of %s: %w", pool, err)
	}
	return p, envs, nil
}

// RecordAllocations records the allocations of one request, marks their
// environments (locked by LockLeasable, still available) in use and appends
// entries to the deployment log, in one statement; it fills in each
// allocation's start. It fails, changing nothing, when an environment is no
// longer available, and the unique index on active allocations refuses a
// second lease of an environment whatever the caller did.
func RecordAllocations(ctx context.Context, tx Tx, allocs []*Allocation, entries []*LogEntry) error {
	n := len(allocs)
	ids, requests, envs := make([]uuid.UUID, n), make([]uuid.UUID, n), make([]int64, n)
	pools, requesters, clients, caps := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	expires := make([]time.Time, n)
	for i, a := range allocs {
		ids[i], requests[i], envs[i] = a.ID, a.RequestID, a.EnvironmentID
		pools[i], requesters[i], clients[i], caps[i] = a.Pool, a.Requester, a.Client, capabilitiesJSON(a.Capabilities)
		expires[i] = a.ExpiresAt
	}
	log, err := logColumns(entries)
	if err != nil {
		return err
	}
	rows, err := tx.Pgx().Query(ctx, `WITH a AS (
			INSERT INTO allocations (id, request_id, environment_id, pool, requester, client, capabilities, expires_at)
			SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::jsonb[], $8::timestamptz[])
			RETURNING id, started_at
		), e AS (
			UPDATE environments SET status = 'in_use', updated_at = now()
			WHERE id = ANY ($3::bigint[]) AND status = 'available' AND deregister_requested_at IS NULL
			RETURNING id
		), l AS (
			INSERT INTO deployment_log (deployment_id, target_id, revision, event, actor, detail)
			SELECT * FROM unnest($9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::jsonb[])
			RETURNING id
		)
		SELECT a.id, a.started_at, (SELECT count(*) FROM e), (SELECT count(*) FROM l) FROM a`,
		ids, requests, envs, pools, requesters, clients, caps, expires,
		log.deployments, log.targets, log.revisions, log.events, log.actors, log.details)
	if err != nil {
		return fmt.Errorf("recording allocations: %w", uniqueViolation(err))
	}
	defer rows.Close()
	started := make(map[uuid.UUID]time.Time, n)
	var inUse, logged int
	for rows.Next() {
		var id uuid.UUID
		var at time.Time
		if err := rows.Scan(&id, &at, &inUse, &logged); err != nil {
			return fmt.Errorf("recording allocations: %w", err)
		}
		started[id] = at
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("recording allocations: %w", uniqueViolation(err))
	}
	if len(started) != n || inUse != n || logged != len(entries) {
		// The caller's transaction must roll back: the statement changed
		// some rows but not all.
		return fmt.Errorf("recording allocations: %d of %d recorded, %d environments marked in use, %d of %d log entries",
			len(started), n, inUse, logged, len(entries))
	}
	for _, a := range allocs {
		a.StartedAt = started[a.ID]
	}
	return nil
}

// EndActiveAllocation ends allocation id when it is active and (unless
// client is empty) held by client, and returns it with its environment and
// pool. It returns ErrNotFound when no such allocation is active; the caller
// tells "already ended" from "no such allocation" with AllocationByID. The
// allocation's row stays locked until the transaction ends, so a release, a
// timeout and an extension of one allocation happen one at a time.
func EndActiveAllocation(ctx context.Context, tx Tx, id uuid.UUID, client, by, outcome string) (*Allocation, *Pool, error) {
	rows, err := tx.Pgx().Query(ctx, `WITH a AS (
			UPDATE allocations AS a SET ended_at = now(), ended_by = $2, outcome = $3
			WHERE a.id = $1 AND a.ended_at IS NULL AND ($4 = '' OR a.client = $4)
			RETURNING a.*
		)
		SELECT `+allocationColumns+`, `+environmentColumns+`, `+poolColumns+`
		FROM a JOIN environments e ON e.id = a.environment_id JOIN pools p ON p.name = a.pool`,
		id, by, outcome, client)
	if err != nil {
		return nil, nil, fmt.Errorf("ending allocation %s: %w", id, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, nil, fmt.Errorf("ending allocation %s: %w", id, err)
		}
		return nil, nil, ErrNotFound
	}
	a := &Allocation{Environment: new(Environment)}
	as, es, ps := allocationScan{a: a}, environmentScan{e: a.Environment}, poolScan{p: new(Pool)}
	if err := rows.Scan(append(append(as.dest(), es.dest()...), ps.dest()...)...); err != nil {
		return nil, nil, fmt.Errorf("ending allocation %s: %w", id, err)
	}
	if err := errors.Join(as.done(), es.done(), ps.done()); err != nil {
		return nil, nil, err
	}
	rows.Close()
	return a, ps.p, rows.Err()
}

// ReturnEnvironment makes a released environment that needs no cleaning
// available again (or deregistered, when it was removed from the
// configuration meanwhile) and appends entries to the deployment log, in one
// statement. It returns the environment's new status.
func ReturnEnvironment(ctx context.Context, tx Tx, envID int64, entries []*LogEntry) (string, error) {
	log, err := logColumns(entries)
	if err != nil {
		return "", err
	}
	rows, err := tx.Pgx().Query(ctx, `WITH e AS (
			UPDATE environments
			SET status = CASE WHEN deregister_requested_at IS NULL THEN 'available' ELSE 'deregistered' END,
				deregistered_at = CASE WHEN deregister_requested_at IS NULL THEN NULL ELSE now() END,
				last_released_at = now(), cleanup_id = NULL, updated_at = now()
			WHERE id = $1 AND status = 'in_use'
			RETURNING status
		), l AS (
			INSERT INTO deployment_log (deployment_id, target_id, revision, event, actor, detail)
			SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::jsonb[])
			RETURNING id
		)
		SELECT e.status, (SELECT count(*) FROM l) FROM e`,
		envID, log.deployments, log.targets, log.revisions, log.events, log.actors, log.details)
	if err != nil {
		return "", fmt.Errorf("returning environment %d: %w", envID, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return "", fmt.Errorf("returning environment %d: %w", envID, err)
		}
		// The caller's transaction must roll back: the log entries may be in.
		return "", fmt.Errorf("returning environment %d: %w", envID, ErrNotFound)
	}
	var status string
	var logged int
	if err := rows.Scan(&status, &logged); err != nil {
		return "", fmt.Errorf("returning environment %d: %w", envID, err)
	}
	if logged != len(entries) {
		return "", fmt.Errorf("returning environment %d: %d of %d log entries appended", envID, logged, len(entries))
	}
	rows.Close()
	return status, rows.Err()
}

// logArrays are log entries as one array per column, for INSERT … SELECT
// FROM unnest(…).
type logArrays struct {
	deployments, targets, revisions, events, actors, details []string
}

func logColumns(entries []*LogEntry) (logArrays, error) {
	n := len(entries)
	l := logArrays{make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)}
	for i, e := range entries {
		if e.TargetID == "" || e.Event == "" || e.Actor == "" {
			return l, fmt.Errorf("log entry needs a target, an event and an actor (got %q, %q, %q)", e.TargetID, e.Event, e.Actor)
		}
		detail := e.Detail
		if detail == nil {
			detail = map[string]any{}
		}
		raw, err := json.Marshal(detail)
		if err != nil {
			return l, fmt.Errorf("encoding the detail of %s: %w", e.Event, err)
		}
		l.deployments[i], l.targets[i], l.revisions[i] = e.DeploymentID, e.TargetID, e.Revision
		l.events[i], l.actors[i], l.details[i] = e.Event, e.Actor, string(raw)
	}
	return l, nil
}
