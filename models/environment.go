package models

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Environment statuses. "Deregistering" is not a status: it is an
// environment in use or cleaning whose removal from gantry.yaml waits for its
// allocation to end (DeregisterRequestedAt is set).
const (
	EnvAvailable    = "available"
	EnvInUse        = "in_use"
	EnvCleaning     = "cleaning"
	EnvDirty        = "dirty"
	EnvDeregistered = "deregistered"
)

// Pool is a pool of environments as registered from gantry.yaml.
type Pool struct {
	bun.BaseModel `bun:"table:pools"`

	Name                  string `bun:",pk"`
	Kind                  string
	SessionSeconds        int
	MaxSessionSeconds     int
	CleanupTimeoutSeconds int
	Clients               []string `bun:",array"`
	CleanupCommand        []string `bun:",array"`
	PostgresAdminURLEnv   string
	PostgresTemplate      string
	NotifyEmails          []string `bun:",array"`
	NotifyWebhook         string
	RemovedAt             *time.Time
	UpdatedAt             time.Time `bun:",nullzero,notnull,default:current_timestamp"`
}

// Session is the default lease length.
func (p *Pool) Session() time.Duration { return time.Duration(p.SessionSeconds) * time.Second }

// MaxSession is how long a lease may last with extensions.
func (p *Pool) MaxSession() time.Duration { return time.Duration(p.MaxSessionSeconds) * time.Second }

// CleanupTimeout is how long cleanup may take before the environment is dirty.
func (p *Pool) CleanupTimeout() time.Duration {
	return time.Duration(p.CleanupTimeoutSeconds) * time.Second
}

// AllowsClient reports whether client may lease from the pool.
func (p *Pool) AllowsClient(client string) bool {
	if len(p.Clients) == 0 {
		return true
	}
	for _, c := range p.Clients {
		if c == client {
			return true
		}
	}
	return false
}

// Environment is one registered environment and its state.
type Environment struct {
	bun.BaseModel `bun:"table:environments,alias:env"`

	ID                    int64 `bun:",pk,autoincrement"`
	Key                   string
	Pool                  string
	Kind                  string
	Account               string
	Region                string
	AdminRole             string
	Database              string
	SlotName              string            `bun:"name"`
	Capabilities          map[string]string `bun:",type:jsonb"`
	Status                string
	DeregisterRequestedAt *time.Time
	DeregisteredAt        *time.Time
	LastReleasedAt        *time.Time
	CleanupID             *uuid.UUID `bun:"type:uuid"`
	CleanupOutput         string
	CleanupStartedAt      *time.Time
	CleanupFinishedAt     *time.Time
	CreatedAt             time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	UpdatedAt             time.Time `bun:",nullzero,notnull,default:current_timestamp"`
}

// Deregistering reports whether the environment waits to leave.
func (e *Environment) Deregistering() bool {
	return e.DeregisterRequestedAt != nil && e.Status != EnvDeregistered
}

// Name is how people call the environment: its database or account/region.
func (e *Environment) Name() string {
	if e.SlotName != "" {
		return e.SlotName
	}
	if e.Database != "" {
		return e.Database
	}
	return e.Account + "/" + e.Region
}

// UpsertPool registers or updates a pool (and un-removes it).
func UpsertPool(ctx context.Context, db bun.IDB, p *Pool) error {
	_, err := db.NewInsert().Model(p).
		On("CONFLICT (name) DO UPDATE").
		Set("kind = EXCLUDED.kind, session_seconds = EXCLUDED.session_seconds, max_session_seconds = EXCLUDED.max_session_seconds").
		Set("cleanup_timeout_seconds = EXCLUDED.cleanup_timeout_seconds, clients = EXCLUDED.clients, cleanup_command = EXCLUDED.cleanup_command").
		Set("postgres_admin_url_env = EXCLUDED.postgres_admin_url_env, postgres_template = EXCLUDED.postgres_template").
		Set("notify_emails = EXCLUDED.notify_emails, notify_webhook = EXCLUDED.notify_webhook, removed_at = NULL, updated_at = now()").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("registering pool %s: %w", p.Name, err)
	}
	return nil
}

// RemovePoolsExcept marks pools not in keep as removed, returning their names.
func RemovePoolsExcept(ctx context.Context, db bun.IDB, keep []string) ([]string, error) {
	var removed []string
	q := db.NewUpdate().Model((*Pool)(nil)).Set("removed_at = now(), updated_at = now()").
		Where("removed_at IS NULL").Returning("name")
	if len(keep) > 0 {
		q = q.Where("name NOT IN (?)", bun.In(keep))
	}
	_, err := q.Exec(ctx, &removed)
	return removed, err
}

// PoolByName finds a registered pool.
func PoolByName(ctx context.Context, db bun.IDB, name string) (*Pool, error) {
	p := new(Pool)
	if err := db.NewSelect().Model(p).Where("name = ?", name).Where("removed_at IS NULL").Scan(ctx); err != nil {
		return nil, notFound(err)
	}
	return p, nil
}

// ListPools lists the registered pools by name.
func ListPools(ctx context.Context, db bun.IDB) ([]Pool, error) {
	var pools []Pool
	err := db.NewSelect().Model(&pools).Where("removed_at IS NULL").Order("name").Scan(ctx)
	return pools, err
}

// shownPoolsSQL selects the pools the pages show: those registered, and
// those removed from gantry.yaml whose environments have not all left yet
// (held ones leave when their allocations end).
const shownPoolsSQL = `(SELECT name FROM pools WHERE removed_at IS NULL
	OR EXISTS (SELECT 1 FROM environments AS g WHERE g.pool = pools.name AND g.status <> 'deregistered'))`

// ListShownPools is ListPools and the removed pools whose environments
// are still leaving.
func ListShownPools(ctx context.Context, db bun.IDB) ([]Pool, error) {
	var pools []Pool
	err := db.NewSelect().Model(&pools).Where("name IN " + shownPoolsSQL).Order("name").Scan(ctx)
	return pools, err
}

// UpsertEnvironment registers an environment or updates its description. An
// environment that was deregistered (or was going to be) comes back.
func UpsertEnvironment(ctx context.Context, db bun.IDB, e *Environment) error {
	e.Status = EnvAvailable
	_, err := db.NewInsert().Model(e).
		On("CONFLICT (key) DO UPDATE").
		Set("pool = EXCLUDED.pool, kind = EXCLUDED.kind, account = EXCLUDED.account, region = EXCLUDED.region").
		Set("admin_role = EXCLUDED.admin_role, database = EXCLUDED.database, name = EXCLUDED.name, capabilities = EXCLUDED.capabilities").
		Set("status = CASE WHEN env.status = 'deregistered' THEN 'available' ELSE env.status END").
		Set("deregister_requested_at = NULL, deregistered_at = NULL, updated_at = now()").
		Returning("*").Exec(ctx)
	if err != nil {
		return fmt.Errorf("registering environment %s: %w", e.Key, err)
	}
	return nil
}

// DeregisterExcept removes the environments whose keys are not in keep: at
// once when nothing holds them, after their allocation otherwise. It returns
// the environments it touched.
func DeregisterExcept(ctx context.Context, db bun.IDB, keep []string) ([]Environment, error) {
	var touched []Environment
	q := db.NewUpdate().Model(&touched).
		Set("status = CASE WHEN status IN ('available', 'dirty') THEN 'deregistered' ELSE status END").
		Set("deregistered_at = CASE WHEN status IN ('available', 'dirty') THEN now() END").
		Set("deregister_requested_at = coalesce(deregister_requested_at, now()), updated_at = now()").
		Where("status <> 'deregistered'").Where("deregister_requested_at IS NULL").
		Returning("*")
	if len(keep) > 0 {
		q = q.Where("key NOT IN (?)", bun.In(keep))
	}
	_, err := q.Exec(ctx)
	return touched, err
}

// EnvironmentByID finds an environment.
func EnvironmentByID(ctx context.Context, db bun.IDB, id int64) (*Environment, error) {
	e := new(Environment)
	if err := db.NewSelect().Model(e).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, notFound(err)
	}
	return e, nil
}

// EnvironmentFilter selects environments; zero fields do not filter.
type EnvironmentFilter struct {
	Pool             string
	WithDeregistered bool
}

// ListEnvironments lists environments by pool and name.
func ListEnvironments(ctx context.Context, db bun.IDB, f EnvironmentFilter) ([]Environment, error) {
	var envs []Environment
	q := db.NewSelect().Model(&envs).OrderExpr("pool, key")
	if f.Pool != "" {
		q = q.Where("pool = ?", f.Pool)
	}
	if !f.WithDeregistered {
		q = q.Where("status <> 'deregistered'")
	}
	err := q.Scan(ctx)
	return envs, err
}

// StartCleaning marks an environment as cleaning under cleanupID.
func StartCleaning(ctx context.Context, tx bun.IDB, envID int64, cleanupID uuid.UUID) error {
	res, err := tx.NewUpdate().Model((*Environment)(nil)).
		Set("status = 'cleaning', cleanup_id = ?, cleanup_output = '', cleanup_started_at = now(), cleanup_finished_at = NULL, updated_at = now()", cleanupID).
		Where("id = ?", envID).Exec(ctx)
	return affectedOne(res, err)
}

// AppendCleanupOutput adds command output to the cleanup under way.
func AppendCleanupOutput(ctx context.Context, db bun.IDB, envID int64, cleanupID uuid.UUID, text string) error {
	_, err := db.NewUpdate().Model((*Environment)(nil)).
		Set("cleanup_output = cleanup_output || ?", text).
		Where("id = ?", envID).Where("cleanup_id = ?", cleanupID).Exec(ctx)
	return err
}

// FinishCleaning ends the cleanup cleanupID: clean environments become
// available (or deregistered when they were removed meanwhile), failed ones
// dirty. It changes nothing and returns false when that cleanup is no longer
// the current one (it timed out, or a retry replaced it), so a late finisher
// cannot undo a later decision.
func FinishCleaning(ctx context.Context, db bun.IDB, envID int64, cleanupID uuid.UUID, clean bool) (*Environment, bool, error) {
	e := new(Environment)
	q := db.NewUpdate().Model(e).
		Set("cleanup_finished_at = now(), updated_at = now()").
		Where("id = ?", envID).Where("status = 'cleaning'").Where("cleanup_id = ?", cleanupID).
		Returning("*")
	if clean {
		q = q.Set("status = CASE WHEN deregister_requested_at IS NULL THEN 'available' ELSE 'deregistered' END").
			Set("deregistered_at = CASE WHEN deregister_requested_at IS NULL THEN NULL ELSE now() END").
			Set("last_released_at = now()")
	} else {
		q = q.Set("status = 'dirty'")
	}
	res, err := q.Exec(ctx)
	if err != nil {
		return nil, false, err
	}
	n, err := res.RowsAffected()
	return e, n == 1, err
}

// MarkClean is the operator's "this dirty environment is fine": it becomes
// available (or leaves, when removed from the configuration meanwhile).
func MarkClean(ctx context.Context, db bun.IDB, envID int64) (*Environment, error) {
	e := new(Environment)
	res, err := db.NewUpdate().Model(e).
		Set("status = CASE WHEN deregister_requested_at IS NULL THEN 'available' ELSE 'deregistered' END").
		Set("deregistered_at = CASE WHEN deregister_requested_at IS NULL THEN NULL ELSE now() END").
		Set("last_released_at = now(), updated_at = now()").
		Where("id = ?", envID).Where("status = 'dirty'").Returning("*").Exec(ctx)
	if err := affectedOne(res, err); err != nil {
		return nil, err
	}
	return e, nil
}

// LockEnvironment reads an environment with a row lock, for state changes
// that must not race (operator actions).
func LockEnvironment(ctx context.Context, tx bun.IDB, id int64) (*Environment, error) {
	e := new(Environment)
	if err := tx.NewSelect().Model(e).Where("id = ?", id).For("UPDATE").Scan(ctx); err != nil {
		return nil, notFound(err)
	}
	return e, nil
}

// PoolCapacity counts a pool's environments by state.
type PoolCapacity struct {
	Pool          string `bun:"pool"`
	Available     int    `bun:"available"`
	InUse         int    `bun:"in_use"`
	Cleaning      int    `bun:"cleaning"`
	Dirty         int    `bun:"dirty"`
	Deregistering int    `bun:"deregistering"`
}

// Total is every registered environment of the pool.
func (c PoolCapacity) Total() int {
	return c.Available + c.InUse + c.Cleaning + c.Dirty + c.Deregistering
}

// Capacity counts every registered pool's environments; deregistering ones
// are counted apart from the status they are in.
func Capacity(ctx context.Context, db bun.IDB) ([]PoolCapacity, error) {
	var out []PoolCapacity
	err := db.NewSelect().TableExpr("pools AS p").
		ColumnExpr("p.name AS pool").
		ColumnExpr("count(e.id) FILTER (WHERE e.status = 'available' AND e.deregister_requested_at IS NULL) AS available").
		ColumnExpr("count(e.id) FILTER (WHERE e.status = 'in_use' AND e.deregister_requested_at IS NULL) AS in_use").
		ColumnExpr("count(e.id) FILTER (WHERE e.status = 'cleaning' AND e.deregister_requested_at IS NULL) AS cleaning").
		ColumnExpr("count(e.id) FILTER (WHERE e.status = 'dirty' AND e.deregister_requested_at IS NULL) AS dirty").
		ColumnExpr("count(e.id) FILTER (WHERE e.status IN ('in_use', 'cleaning') AND e.deregister_requested_at IS NOT NULL) AS deregistering").
		Join("LEFT JOIN environments AS e ON e.pool = p.name").
		Where("p.removed_at IS NULL").
		GroupExpr("p.name").OrderExpr("p.name").Scan(ctx, &out)
	return out, err
}

// Client is an identity on the allow list.
type Client struct {
	bun.BaseModel `bun:"table:clients"`

	Name        string   `bun:",pk"`
	Users       []string `bun:",array"`
	AWSAccounts []string `bun:",array"`
	Rate        float64
}

// ReplaceClients makes the allow list exactly clients.
func ReplaceClients(ctx context.Context, tx bun.IDB, clients []Client) error {
	if _, err := tx.NewDelete().Model((*Client)(nil)).Where("true").Exec(ctx); err != nil {
		return err
	}
	if len(clients) == 0 {
		return nil
	}
	_, err := tx.NewInsert().Model(&clients).Exec(ctx)
	return err
}

// ClientOfUser is the client whose users include email.
func ClientOfUser(ctx context.Context, db bun.IDB, email string) (*Client, error) {
	c := new(Client)
	err := db.NewSelect().Model(c).Where("lower(?) = ANY (SELECT lower(u) FROM unnest(users) AS u)", email).Limit(1).Scan(ctx)
	if err != nil {
		return nil, notFound(err)
	}
	return c, nil
}

// ClientOfAWSAccount is the client whose aws_accounts include account.
func ClientOfAWSAccount(ctx context.Context, db bun.IDB, account string) (*Client, error) {
	c := new(Client)
	if err := db.NewSelect().Model(c).Where("? = ANY (aws_accounts)", account).Limit(1).Scan(ctx); err != nil {
		return nil, notFound(err)
	}
	return c, nil
}

// PoolByNameAny finds a pool even after it was removed from the
// configuration, for the allocations and cleanups it still has.
func PoolByNameAny(ctx context.Context, db bun.IDB, name string) (*Pool, error) {
	p := new(Pool)
	if err := db.NewSelect().Model(p).Where("name = ?", name).Scan(ctx); err != nil {
		return nil, notFound(err)
	}
	return p, nil
}

// configSyncLockKey serialises gantry.yaml syncs of processes starting at once.
const configSyncLockKey = 7_461_210_003

// LockConfigSync holds the configuration sync lock until tx ends.
func LockConfigSync(ctx context.Context, tx bun.IDB) error {
	_, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(?)", configSyncLockKey)
	return err
}

func capabilitiesJSON(caps map[string]string) string {
	if caps == nil {
		return "{}"
	}
	b, _ := json.Marshal(caps)
	return string(b)
}
