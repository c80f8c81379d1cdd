// Package migrations holds Gantry's schema as SQL files and applies them,
// together with River's own schema, under one advisory lock so that several
// processes starting at once (a release command and a rolling deploy) migrate
// exactly once.
package migrations

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/migrate"
)

//go:embed *.sql
var files embed.FS

// advisoryLockKey is an arbitrary constant shared by every gantry process.
const advisoryLockKey = 7_461_210_001

// Status is one migration, Gantry's or River's, and whether it is applied.
type Status struct {
	Source    string    `json:"source"` // "gantry" or "river"
	Name      string    `json:"name"`
	Applied   bool      `json:"applied"`
	AppliedAt time.Time `json:"applied_at,omitzero"` // River records none
}

// Migrator applies Gantry's and River's migrations.
type Migrator struct {
	pool  *pgxpool.Pool
	bun   *migrate.Migrator
	river *rivermigrate.Migrator[pgx.Tx]
}

// New returns a Migrator over the process's pool and Bun database.
func New(pool *pgxpool.Pool, db *bun.DB) (*Migrator, error) {
	set := migrate.NewMigrations()
	if err := set.Discover(files); err != nil {
		return nil, fmt.Errorf("reading embedded migrations: %w", err)
	}
	rm, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return nil, fmt.Errorf("creating River migrator: %w", err)
	}
	return &Migrator{
		pool:  pool,
		bun:   migrate.NewMigrator(db, set, migrate.WithMarkAppliedOnSuccess(true), migrate.WithTableName("gantry_migrations"), migrate.WithLocksTableName("gantry_migration_locks")),
		river: rm,
	}, nil
}

// Up applies River's migrations, then Gantry's, and returns the names applied.
func (m *Migrator) Up(ctx context.Context) ([]string, error) {
	var applied []string
	err := m.locked(ctx, func() error {
		res, err := m.river.Migrate(ctx, rivermigrate.DirectionUp, nil)
		if err != nil {
			return fmt.Errorf("applying River migrations: %w", err)
		}
		for _, v := range res.Versions {
			applied = append(applied, fmt.Sprintf("river %03d %s", v.Version, v.Name))
		}
		group, err := m.bun.Migrate(ctx)
		if err != nil {
			return fmt.Errorf("applying Gantry migrations: %w", err)
		}
		for _, mg := range group.Migrations {
			applied = append(applied, "gantry "+mg.Name+"_"+mg.Comment)
		}
		return nil
	})
	return applied, err
}

// Down rolls back the last group of Gantry migrations. River's schema is left
// alone: rolling it back would drop queued jobs, which is never what an
// operator undoing a Gantry change wants.
func (m *Migrator) Down(ctx context.Context) ([]string, error) {
	var rolled []string
	err := m.locked(ctx, func() error {
		group, err := m.bun.Rollback(ctx)
		if err != nil {
			return fmt.Errorf("rolling back Gantry migrations: %w", err)
		}
		for _, mg := range group.Migrations {
			rolled = append(rolled, "gantry "+mg.Name+"_"+mg.Comment)
		}
		return nil
	})
	return rolled, err
}

// Status lists every known migration of both sources, oldest first.
func (m *Migrator) Status(ctx context.Context) ([]Status, error) {
	if err := m.bun.Init(ctx); err != nil {
		return nil, fmt.Errorf("creating migrations table: %w", err)
	}
	existing, err := m.river.ExistingVersions(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading River migrations: %w", err)
	}
	done := make(map[int]bool, len(existing))
	for _, v := range existing {
		done[v.Version] = true
	}
	var out []Status
	for _, v := range m.river.AllVersions() {
		// River records no time of application.
		out = append(out, Status{Source: "river", Name: fmt.Sprintf("%03d_%s", v.Version, v.Name), Applied: done[v.Version]})
	}
	ms, err := m.bun.MigrationsWithStatus(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading Gantry migrations: %w", err)
	}
	for _, mg := range ms {
		out = append(out, Status{Source: "gantry", Name: mg.Name + "_" + mg.Comment, Applied: mg.IsApplied(), AppliedAt: mg.MigratedAt})
	}
	return out, nil
}

// Pending counts migrations not yet applied; /readyz is not ready while any are.
func (m *Migrator) Pending(ctx context.Context) (int, error) {
	st, err := m.Status(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range st {
		if !s.Applied {
			n++
		}
	}
	return n, nil
}

// Create writes an empty pair of transactional SQL files into dir.
func Create(dir, name string) ([]string, error) {
	if !validName(name) {
		return nil, fmt.Errorf("migration name %q: use lower-case letters, digits and underscores", name)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory: run gantry migrate create from the repository root", dir)
	}
	stamp := time.Now().UTC().Format("20060102150405")
	var paths []string
	for _, suffix := range []string{".tx.up.sql", ".tx.down.sql"} {
		p := filepath.Join(dir, stamp+"_"+name+suffix)
		body := "-- " + strings.TrimSuffix(suffix[1:], ".sql") + " migration: " + name + "\n"
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return nil, fmt.Errorf("writing %s: %w", p, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// Fingerprint identifies the embedded schema; tests name their template
// database after it so that a changed migration builds a fresh template.
func (m *Migrator) Fingerprint() string {
	entries, _ := files.ReadDir(".")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	h := fnv.New64a()
	for _, n := range names {
		b, _ := files.ReadFile(n)
		h.Write([]byte(n))
		h.Write(b)
	}
	fmt.Fprint(h, len(m.river.AllVersions()))
	return fmt.Sprintf("%012x", h.Sum64()&0xffffffffffff)
}

func (m *Migrator) locked(ctx context.Context, fn func() error) error {
	conn, err := m.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquiring connection for migration lock: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", advisoryLockKey); err != nil {
		return fmt.Errorf("taking migration lock: %w", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", advisoryLockKey)
	}()
	if err := m.bun.Init(ctx); err != nil {
		return fmt.Errorf("creating migrations table: %w", err)
	}
	return fn()
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}
