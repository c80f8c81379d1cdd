package pgenv_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/pgenv"
)

// These tests run against a real server: GANTRY_TEST_DATABASE_URL, or the
// machine's PostgreSQL. Each test makes its own databases and roles, with
// random names, and removes them when it ends.

func adminURL() string {
	if u := os.Getenv("GANTRY_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

type bundle struct {
	srv   *pgenv.Server
	admin *pgx.Conn // the same admin, for arranging and asserting
	url   string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupAs(t, adminURL())
}

func setupAs(t *testing.T, adminURL string) *bundle {
	t.Helper()
	ctx := t.Context()
	srv, err := pgenv.New(ctx, adminURL)
	require.NoError(t, err, "PostgreSQL must be reachable at %s (GANTRY_TEST_DATABASE_URL)", adminURL)
	t.Cleanup(srv.Close)
	admin, err := pgx.ConnectConfig(ctx, connConfig(t, adminURL))
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(context.Background()) })
	return &bundle{srv: srv, admin: admin, url: adminURL}
}

func suffix() string { return strings.ToLower(rand.Text()[:10]) }

// database names a database for this test and drops it when the test ends.
func (b *bundle) database(t *testing.T, prefix string) string {
	t.Helper()
	name := prefix + suffix()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminURL())
		if err != nil {
			t.Logf("dropping %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Logf("dropping %s: %v", name, err)
		}
	})
	return name
}

// environment is a fresh, empty environment database.
func (b *bundle) environment(t *testing.T) string {
	t.Helper()
	db := b.database(t, "gantry_pgenv_t_")
	require.NoError(t, b.srv.Ensure(t.Context(), db))
	return db
}

// grant grants db for an hour (or until) and revokes the role when the test
// ends, before its databases are dropped.
func (b *bundle) grant(t *testing.T, db string, until time.Time) pgenv.Credentials {
	t.Helper()
	creds, err := b.srv.Grant(t.Context(), db, until)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.srv.Revoke(ctx, creds.Role); err != nil {
			t.Logf("revoking %s: %v", creds.Role, err)
		}
	})
	return creds
}

func connect(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// connConfig parses a URL that may carry pgxpool's parameters.
func connConfig(t *testing.T, dbURL string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	require.NoError(t, err)
	return cfg.ConnConfig
}

func (b *bundle) connectTo(t *testing.T, db string) *pgx.Conn {
	t.Helper()
	cfg := connConfig(t, b.url)
	cfg.Database = db
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func tables(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, _ := conn.Query(t.Context(), `SELECT schemaname || '.' || tablename FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1`)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return names
}

func roleExists(t *testing.T, b *bundle, role string) bool {
	t.Helper()
	var exists bool
	require.NoError(t, b.admin.QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)`, role).Scan(&exists))
	return exists
}

// passwordsChecked reports whether the server authenticates creds' kind of
// connection by password; under trust it does not, and VALID UNTIL is not
// enforced either.
func passwordsChecked(t *testing.T, creds pgenv.Credentials) bool {
	t.Helper()
	cfg, err := pgx.ParseConfig(creds.URL)
	require.NoError(t, err)
	cfg.Password = "wrong-" + creds.Password
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		return true
	}
	conn.Close(t.Context())
	return false
}

func TestGrantConnectsAndCreatesTables(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db := b.environment(t)
	creds := b.grant(t, db, time.Now().Add(time.Hour))
	require.True(t, strings.HasPrefix(creds.Role, pgenv.RolePrefix), creds.Role)

	conn := connect(t, creds.URL)
	var user, current string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT current_user, current_database()`).Scan(&user, &current))
	require.Equal(t, creds.Role, user)
	require.Equal(t, db, current)
	_, err := conn.Exec(t.Context(), `CREATE TABLE widgets (id bigint PRIMARY KEY); INSERT INTO widgets VALUES (1)`)
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), `CREATE SCHEMA scratch; CREATE TABLE scratch.t (x int); DROP TABLE widgets`)
	require.NoError(t, err)

	if passwordsChecked(t, creds) {
		t.Log("the server checks passwords: a wrong one was refused")
	}
}

func TestAdminURLWithPoolParameters(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(adminURL())
	require.NoError(t, err)
	q := u.Query()
	q.Set("pool_max_conns", "2")
	u.RawQuery = q.Encode()
	b := setupAs(t, u.String())
	db := b.database(t, "gantry_pgenv_t_")
	require.NoError(t, b.srv.Ensure(t.Context(), db))
	creds := b.grant(t, db, time.Now().Add(time.Hour))
	require.NotContains(t, creds.URL, "pool_max_conns")
	connect(t, creds.URL)
}

func TestGrantCredentials(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db := b.environment(t)
	until := time.Now().Add(90 * time.Minute).Truncate(time.Microsecond)
	creds := b.grant(t, db, until)
	require.True(t, until.Equal(creds.ExpiresAt))
	require.NotEmpty(t, creds.Password)

	var validUntil time.Time
	var canLogin, super, createDB, createRole bool
	require.NoError(t, b.admin.QueryRow(t.Context(),
		`SELECT rolvaliduntil, rolcanlogin, rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = $1`, creds.Role).
		Scan(&validUntil, &canLogin, &super, &createDB, &createRole))
	require.True(t, until.Equal(validUntil), "VALID UNTIL %s, want %s", validUntil, until)
	require.True(t, canLogin)
	require.False(t, super || createDB || createRole)

	got, err := pgx.ParseConfig(creds.URL)
	require.NoError(t, err)
	want := connConfig(t, b.url)
	require.Equal(t, want.Host, got.Host)
	require.Equal(t, want.Port, got.Port)
	require.Equal(t, db, got.Database)
	require.Equal(t, creds.Role, got.User)
	require.Equal(t, creds.Password, got.Password)
	u, err := url.Parse(creds.URL)
	require.NoError(t, err)
	wantURL, err := url.Parse(b.url)
	require.NoError(t, err)
	require.Equal(t, wantURL.Query().Get("sslmode"), u.Query().Get("sslmode"))
}

func TestGrantOnlyReachesItsDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db, other := b.environment(t), b.environment(t)
	creds := b.grant(t, db, time.Now().Add(time.Hour))
	cfg, err := pgx.ParseConfig(creds.URL)
	require.NoError(t, err)
	cfg.Database = other
	_, err = pgx.ConnectConfig(t.Context(), cfg)
	require.ErrorContains(t, err, "permission denied")
}

func TestRevokeEndsAccess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db := b.environment(t)
	creds := b.grant(t, db, time.Now().Add(time.Hour))
	session := connect(t, creds.URL)
	_, err := session.Exec(t.Context(), `CREATE TABLE kept (id int)`) // the role owns something
	require.NoError(t, err)

	require.NoError(t, b.srv.Revoke(t.Context(), creds.Role))

	_, err = session.Exec(t.Context(), `SELECT 1`)
	require.Error(t, err, "the open session must have been terminated")
	_, err = pgx.Connect(t.Context(), creds.URL)
	require.Error(t, err, "the role must not log in any more")
	require.False(t, roleExists(t, b, creds.Role))

	var owner string
	require.NoError(t, b.connectTo(t, db).QueryRow(t.Context(), `SELECT tableowner FROM pg_tables WHERE tablename = 'kept'`).Scan(&owner))
	require.NotEqual(t, creds.Role, owner, "what the role made now belongs to the admin until Clean")
}

func TestRevokeIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db := b.environment(t)
	creds := b.grant(t, db, time.Now().Add(time.Hour))
	require.NoError(t, b.srv.Revoke(t.Context(), creds.Role))
	require.NoError(t, b.srv.Revoke(t.Context(), creds.Role))
	require.NoError(t, b.srv.Revoke(t.Context(), pgenv.RolePrefix+`never"existed'; DROP ROLE postgres; --`))
}

func TestRevokeRefusesOtherRoles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := connConfig(t, b.url)
	require.ErrorContains(t, b.srv.Revoke(t.Context(), cfg.User), "not a role Grant created")
	require.True(t, roleExists(t, b, cfg.User))
}

func TestCleanEmptiesTheDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db := b.environment(t)
	creds := b.grant(t, db, time.Now().Add(time.Hour))
	_, err := connect(t, creds.URL).Exec(t.Context(), `CREATE TABLE leftover (id int); CREATE SCHEMA junk; CREATE TABLE junk.more (id int)`)
	require.NoError(t, err)
	require.NoError(t, b.srv.Revoke(t.Context(), creds.Role))
	lingering := b.connectTo(t, db) // Clean ends sessions too

	require.NoError(t, b.srv.Clean(t.Context(), db, ""))

	_, err = lingering.Exec(t.Context(), `SELECT 1`)
	require.Error(t, err, "Clean must end the sessions on the database")
	require.Empty(t, tables(t, b.connectTo(t, db)))
	require.NoError(t, b.srv.Clean(t.Context(), db, ""), "again")
	require.Empty(t, tables(t, b.connectTo(t, db)))

	// After Clean the database is ready for the next grant.
	next := b.grant(t, db, time.Now().Add(time.Hour))
	_, err = connect(t, next.URL).Exec(t.Context(), `CREATE TABLE leftover (id int)`)
	require.NoError(t, err)
}

func TestCleanCreatesAMissingDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db := b.database(t, "gantry_pgenv_t_")
	require.NoError(t, b.srv.Clean(t.Context(), db, ""))
	require.Empty(t, tables(t, b.connectTo(t, db)))
}

func TestCleanFromTemplate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tpl := b.database(t, "gantry_pgenv_tpl_")
	require.NoError(t, b.srv.Ensure(t.Context(), tpl))
	seed := b.connectTo(t, tpl)
	_, err := seed.Exec(t.Context(), `CREATE TABLE fixtures (id serial PRIMARY KEY, name text); INSERT INTO fixtures (name) VALUES ('alpha'), ('beta')`)
	require.NoError(t, err)
	require.NoError(t, seed.Close(t.Context())) // a template must be idle to be copied

	db := b.environment(t)
	require.NoError(t, b.srv.Clean(t.Context(), db, tpl))
	require.Equal(t, []string{"public.fixtures"}, tables(t, b.connectTo(t, db)))

	// The grantee may use and change what the template brought.
	creds := b.grant(t, db, time.Now().Add(time.Hour))
	conn := connect(t, creds.URL)
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM fixtures`).Scan(&n))
	require.Equal(t, 2, n)
	_, err = conn.Exec(t.Context(), `INSERT INTO fixtures (name) VALUES ('gamma'); DELETE FROM fixtures WHERE name = 'alpha'`)
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), `DROP TABLE fixtures`)
	require.NoError(t, err)
	require.NoError(t, b.srv.Revoke(t.Context(), creds.Role))

	require.NoError(t, b.srv.Clean(t.Context(), db, tpl))
	require.NoError(t, b.connectTo(t, db).QueryRow(t.Context(), `SELECT count(*) FROM fixtures`).Scan(&n))
	require.Equal(t, 2, n, "cleaning restores the template's rows")
}

func TestEnsure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db := b.environment(t) // created
	_, err := b.connectTo(t, db).Exec(t.Context(), `CREATE TABLE kept (id int)`)
	require.NoError(t, err)
	require.NoError(t, b.srv.Ensure(t.Context(), db))
	require.Equal(t, []string{"public.kept"}, tables(t, b.connectTo(t, db)), "an existing database is left alone")

	var publicConnect bool
	require.NoError(t, b.admin.QueryRow(t.Context(), `SELECT has_database_privilege('public', $1, 'CONNECT')`, db).Scan(&publicConnect))
	require.False(t, publicConnect)
}

func TestValidUntilInThePastRefusesLogin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db := b.environment(t)
	creds := b.grant(t, db, time.Now().Add(-time.Hour))
	var expired bool
	require.NoError(t, b.admin.QueryRow(t.Context(), `SELECT rolvaliduntil < now() FROM pg_roles WHERE rolname = $1`, creds.Role).Scan(&expired))
	require.True(t, expired)
	if !passwordsChecked(t, creds) {
		t.Skip("the server trusts these connections (pg_hba.conf), so PostgreSQL does not check VALID UNTIL; Revoke ends access there")
	}
	_, err := pgx.Connect(t.Context(), creds.URL)
	require.ErrorContains(t, err, "password authentication failed")
}

func TestPasswordIsChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db := b.environment(t)
	creds := b.grant(t, db, time.Now().Add(time.Hour))
	if !passwordsChecked(t, creds) {
		t.Skip("the server trusts these connections (pg_hba.conf): no password is checked")
	}
	connect(t, creds.URL) // the right one works
}

func TestOddIdentifiersAreQuoted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db := b.database(t, `t "é"; DROP DATABASE postgres; -- ?#/`)
	tpl := b.database(t, `tpl 'x' $$ \`)
	require.NoError(t, b.srv.Ensure(t.Context(), tpl))
	require.NoError(t, b.srv.Ensure(t.Context(), db))

	creds := b.grant(t, db, time.Now().Add(time.Hour))
	conn := connect(t, creds.URL)
	var current string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT current_database()`).Scan(&current))
	require.Equal(t, db, current)
	_, err := conn.Exec(t.Context(), `CREATE TABLE "we""ird" (id int)`)
	require.NoError(t, err)
	require.NoError(t, b.srv.Revoke(t.Context(), creds.Role))
	require.NoError(t, b.srv.Clean(t.Context(), db, tpl))
	require.Empty(t, tables(t, b.connectTo(t, db)))
}

func TestRefusesDatabasesThatAreNotEnvironments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := connConfig(t, b.url)
	ctx := t.Context()
	for _, name := range []string{cfg.Database, "postgres", "template0", "template1", "", strings.Repeat("x", 64), "a\x00b"} {
		_, err := b.srv.Grant(ctx, name, time.Now().Add(time.Hour))
		require.Error(t, err, "Grant %q", name)
		require.Error(t, b.srv.Clean(ctx, name, ""), "Clean %q", name)
		require.Error(t, b.srv.Ensure(ctx, name), "Ensure %q", name)
	}
	require.ErrorContains(t, b.srv.Clean(ctx, "gantry_pgenv_t_self", "gantry_pgenv_t_self"), "its own template")
	_, err := b.srv.Grant(ctx, "gantry_pgenv_t_x", time.Time{})
	require.ErrorContains(t, err, "expiry")
}

func TestRoles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db := b.environment(t)
	creds := b.grant(t, db, time.Now().Add(time.Hour))
	roles, err := b.srv.Roles(t.Context())
	require.NoError(t, err)
	require.Contains(t, roles, creds.Role)
	require.NoError(t, b.srv.Revoke(t.Context(), creds.Role))
	roles, err = b.srv.Roles(t.Context())
	require.NoError(t, err)
	require.NotContains(t, roles, creds.Role)
}

func TestNewRejectsBadAdmins(t *testing.T) {
	t.Parallel()
	_, err := pgenv.New(t.Context(), "mysql://root@localhost/x")
	require.ErrorContains(t, err, "postgres://")

	b := setup(t)
	role, password := "gantry_pgenv_weak_"+suffix(), rand.Text()
	createRole(t, b, role, password, "LOGIN")
	_, err = pgenv.New(t.Context(), withUser(t, b.url, role, password))
	require.ErrorContains(t, err, "CREATEROLE and CREATEDB")
}

// TestNonSuperuserAdmin runs the whole life cycle with an admin that has
// CREATEROLE and CREATEDB only, as managed PostgreSQL offers.
func TestNonSuperuserAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var super bool
	require.NoError(t, b.admin.QueryRow(t.Context(), `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super))
	if !super {
		t.Skip("making a second admin role needs a superuser")
	}
	role, password := "gantry_pgenv_admin_"+suffix(), rand.Text()
	createRole(t, b, role, password, "LOGIN CREATEROLE CREATEDB")
	a := setupAs(t, withUser(t, b.url, role, password))

	db := a.database(t, "gantry_pgenv_t_")
	tpl := a.database(t, "gantry_pgenv_tpl_")
	require.NoError(t, a.srv.Ensure(t.Context(), db))
	require.NoError(t, a.srv.Ensure(t.Context(), tpl))
	seed := a.connectTo(t, tpl)
	_, err := seed.Exec(t.Context(), `CREATE TABLE fixtures (id int)`)
	require.NoError(t, err)
	require.NoError(t, seed.Close(t.Context()))
	require.NoError(t, a.srv.Clean(t.Context(), db, tpl))

	creds := a.grant(t, db, time.Now().Add(time.Hour))
	session := connect(t, creds.URL)
	_, err = session.Exec(t.Context(), `CREATE TABLE mine (id int); INSERT INTO fixtures VALUES (1)`)
	require.NoError(t, err)

	require.NoError(t, a.srv.Revoke(t.Context(), creds.Role))
	_, err = session.Exec(t.Context(), `SELECT 1`)
	require.Error(t, err, "a non-superuser admin can end the role's sessions")
	require.False(t, roleExists(t, b, creds.Role))
	require.NoError(t, a.srv.Clean(t.Context(), db, tpl))
	require.Equal(t, []string{"public.fixtures"}, tables(t, a.connectTo(t, db)))
}

func TestSCRAMVerifierMatchesPostgreSQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	role, password := pgenv.RolePrefix+"scram_"+suffix(), "correct horse battery staple"
	createRole(t, b, role, password, "NOLOGIN")
	var stored string
	if err := b.admin.QueryRow(t.Context(), `SELECT rolpassword FROM pg_authid WHERE rolname = $1`, role).Scan(&stored); err != nil {
		t.Skipf("reading pg_authid needs a superuser: %v", err)
	}
	// SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>
	parts := strings.Split(stored, "$")
	require.Len(t, parts, 3, stored)
	iterSalt := strings.SplitN(parts[1], ":", 2)
	iterations, err := strconv.Atoi(iterSalt[0])
	require.NoError(t, err)
	salt, err := base64.StdEncoding.DecodeString(iterSalt[1])
	require.NoError(t, err)

	ours, err := pgenv.ScramVerifierWith(password, salt, iterations)
	require.NoError(t, err)
	require.Equal(t, stored, ours)
}

// createRole creates a role with a password PostgreSQL hashes itself, and
// drops it when the test ends.
func createRole(t *testing.T, b *bundle, role, password, options string) {
	t.Helper()
	ctx := t.Context()
	_, err := b.admin.Exec(ctx, `SET password_encryption = 'scram-sha-256'`)
	require.NoError(t, err)
	var lit string
	require.NoError(t, b.admin.QueryRow(ctx, `SELECT quote_literal($1::text)`, password).Scan(&lit))
	_, err = b.admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" "+options+" PASSWORD "+lit)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminURL())
		if err != nil {
			t.Logf("dropping role %s: %v", role, err)
			return
		}
		defer conn.Close(ctx)
		r := pgx.Identifier{role}.Sanitize()
		for _, stmt := range []string{"DROP OWNED BY " + r, "DROP ROLE IF EXISTS " + r} {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				t.Logf("%s: %v", stmt, err)
			}
		}
	})
}

func withUser(t *testing.T, adminURL, user, password string) string {
	t.Helper()
	u, err := url.Parse(adminURL)
	require.NoError(t, err)
	u.User = url.UserPassword(user, password)
	if u.Host == "" {
		u.Host = net.JoinHostPort("127.0.0.1", "5432")
	}
	return u.String()
}

func TestExtendMovesValidUntil(t *testing.T) {
	t.Parallel()
	b := setup(t)
	creds := b.grant(t, b.environment(t), time.Now().Add(time.Hour))
	later := time.Now().Add(5 * time.Hour).Truncate(time.Second)
	require.NoError(t, b.srv.Extend(t.Context(), creds.Role, later))
	var until time.Time
	require.NoError(t, b.admin.QueryRow(t.Context(), "SELECT rolvaliduntil FROM pg_roles WHERE rolname = $1", creds.Role).Scan(&until))
	require.True(t, until.Equal(later), "%v != %v", until, later)
	require.Error(t, b.srv.Extend(t.Context(), "postgres", later), "only Gantry's roles")
}
