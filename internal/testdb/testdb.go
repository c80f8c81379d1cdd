// Package testdb gives each test its own PostgreSQL database, cloned in tens
// of milliseconds from a template that has every migration applied. The
// template is named after the migrations' fingerprint, so changing a
// migration builds a fresh one; building it is serialised across the test
// binaries that `go test ./...` runs in parallel by an advisory lock.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gantryhq/gantry/migrations"
	"github.com/gantryhq/gantry/models"
)

// DefaultAdminURL is the machine's PostgreSQL as the project's machines have it.
const DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

const templateLockKey = 7_461_210_002

// AdminURL is the server tests create databases on (GANTRY_TEST_DATABASE_URL).
func AdminURL() string {
	if u := os.Getenv("GANTRY_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultAdminURL
}

// New creates a fresh migrated database for t, opens the process-style pool
// on it, and drops it when t ends.
func New(t testing.TB) *models.DB {
	t.Helper()
	dbURL := NewURL(t)
	db, err := models.Open(context.Background(), dbURL, 10)
	if err != nil {
		t.Fatalf("testdb: opening %s: %v", dbURL, err)
	}
	t.Cleanup(db.Close)
	return db
}

// NewURL creates a fresh migrated database and returns its URL; it is
// dropped (with any connections still open) when t ends.
func NewURL(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatalf("testdb: PostgreSQL is not reachable at %s (set GANTRY_TEST_DATABASE_URL, or run `make test`, which starts one): %v", AdminURL(), err)
	}
	defer admin.Close(context.Background())

	tpl, err := ensureTemplate(ctx, admin)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	name := "gantry_t_" + randomSuffix()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tpl}.Sanitize()); err != nil {
		t.Fatalf("testdb: cloning %s: %v", tpl, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, AdminURL())
		if err != nil {
			t.Logf("testdb: cannot drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Logf("testdb: dropping %s: %v", name, err)
		}
	})
	return withDatabase(AdminURL(), name)
}

func ensureTemplate(ctx context.Context, admin *pgx.Conn) (string, error) {
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return "", fmt.Errorf("locking template: %w", err)
	}
	defer admin.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", templateLockKey) //nolint:errcheck

	pool, err := pgxpool.New(ctx, AdminURL())
	if err != nil {
		return "", err
	}
	m, err := migrations.New(pool, nil)
	pool.Close()
	if err != nil {
		return "", err
	}
	name := "gantry_tpl_" + m.Fingerprint()

	var ready bool
	err = admin.QueryRow(ctx, `SELECT coalesce(shobj_description(oid, 'pg_database') = 'ready', false) FROM pg_database WHERE datname = $1`, name).Scan(&ready)
	if err == nil && ready {
		return name, nil
	}
	if err == nil { // a build that died half-way
		if _, err := admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			return "", fmt.Errorf("dropping unfinished template: %w", err)
		}
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("creating template: %w", err)
	}
	db, err := models.Open(ctx, withDatabase(AdminURL(), name), 4)
	if err != nil {
		return "", err
	}
	mig, err := migrations.New(db.Pool, db.Bun)
	if err == nil {
		_, err = mig.Up(ctx)
	}
	db.Close()
	if err != nil {
		return "", fmt.Errorf("migrating template: %w", err)
	}
	if _, err := admin.Exec(ctx, "COMMENT ON DATABASE "+pgx.Identifier{name}.Sanitize()+" IS 'ready'"); err != nil {
		return "", err
	}
	return name, nil
}

func withDatabase(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
