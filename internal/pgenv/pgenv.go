// Package pgenv is the adapter for environments of kind postgres: each
// environment is a database on a PostgreSQL server that Gantry administers.
//
//   - Grant hands out a login role made for one allocation: a random name
//     (RolePrefix + 16 random characters), a random password, VALID UNTIL the
//     allocation's end. The role gets CONNECT, CREATE and TEMPORARY on its
//     database, ownership of the schema public, and all privileges on what
//     the database already holds (tables, sequences and routines a template
//     brought), so a test can create, change and drop tables as it would in
//     a database of its own. It does not own the database itself: it cannot
//     drop, rename or reconfigure it.
//   - Revoke takes the role away: NOLOGIN, its sessions terminated, what it
//     owns reassigned to the admin role, its privileges dropped, the role
//     dropped. Revoking a role that is gone is fine.
//   - Clean drops the database (ending its sessions) and creates it again,
//     empty or as a copy of a template database.
//   - Ensure creates the database at registration if it is missing.
//
// Environment databases are created by the admin role with CONNECT and
// TEMPORARY revoked from PUBLIC, so a role granted one environment cannot
// connect to another. The admin role needs CREATEROLE and CREATEDB (or
// superuser) and should own the environment databases, which Ensure and Clean
// arrange. Grant makes the admin a member of each role it creates, which is
// what lets a non-superuser admin terminate that role's sessions and drop
// what it owns. PostgreSQL 14 or later is required (DROP DATABASE ... WITH
// (FORCE), pg_terminate_backend with a timeout).
//
// Passwords never reach the server in clear: Grant sends a SCRAM-SHA-256
// verifier, so statement logs and pg_stat_statements hold nothing a client
// could log in with. VALID UNTIL is enforced by PostgreSQL only for password
// authentication; where pg_hba.conf trusts connections, Revoke (run when the
// allocation ends or times out) is what ends access.
package pgenv

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// RolePrefix starts the name of every role Grant creates. Revoke refuses
// other roles.
const RolePrefix = "gantry_env_"

// terminateWait is how long Revoke waits for each terminated session to exit.
const terminateWait = 5 * time.Second

// SQLSTATEs handled here.
const (
	codeUndefinedObject   = "42704" // role does not exist
	codeInvalidCatalog    = "3D000" // database does not exist
	codeDuplicateDatabase = "42P04"
)

// Server administers environment databases on one PostgreSQL server.
type Server struct {
	pool    *pgxpool.Pool   // to the admin database
	config  *pgx.ConnConfig // admin settings, copied to reach each environment database
	adminDB string
	scheme  string
	host    string     // host:port for credential URLs, or "" with a socket in query
	query   url.Values // what credential URLs keep of the admin URL's parameters
}

// Credentials let one allocation use one environment database.
type Credentials struct {
	Role      string
	Password  string
	URL       string // postgres:// URL to the database with Role and Password
	ExpiresAt time.Time
}

// New connects to the server as the admin role of adminURL (a postgres://
// URL) and checks that the role may create roles and databases.
func New(ctx context.Context, adminURL string) (*Server, error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, errors.New("pgenv: the admin URL must be a postgres:// URL")
	}
	poolConfig, err := pgxpool.ParseConfig(adminURL)
	if err != nil {
		return nil, fmt.Errorf("pgenv: parsing the admin URL: %w", err)
	}
	config := poolConfig.ConnConfig.Copy() // without the pool_* parameters
	pool, err := pgxpool.NewWithConfig(ctx, poolConfig)
	if err != nil {
		return nil, fmt.Errorf("pgenv: connecting: %w", err)
	}
	var super, createRole, createDB bool
	err = pool.QueryRow(ctx, `SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user`).
		Scan(&super, &createRole, &createDB)
	if err == nil && !super && !(createRole && createDB) {
		err = fmt.Errorf("role %q needs CREATEROLE and CREATEDB", config.User)
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgenv: checking the admin role: %w", err)
	}

	s := &Server{pool: pool, config: config, adminDB: config.Database, scheme: u.Scheme, query: url.Values{}}
	if strings.HasPrefix(config.Host, "/") {
		s.query.Set("host", config.Host)
		s.query.Set("port", strconv.Itoa(int(config.Port)))
	} else {
		s.host = net.JoinHostPort(config.Host, strconv.Itoa(int(config.Port)))
	}
	if mode := u.Query().Get("sslmode"); mode != "" {
		s.query.Set("sslmode", mode)
	}
	return s, nil
}

// Close closes the admin connections.
func (s *Server) Close() { s.pool.Close() }

// Grant creates a role that can log in to database until the given time and
// use it as its owner would (see the package documentation). It runs in one
// transaction: it grants everything or nothing.
func (s *Server) Grant(ctx context.Context, database string, until time.Time) (Credentials, error) {
	if err := s.checkDatabase(database); err != nil {
		return Credentials{}, err
	}
	if until.IsZero() {
		return Credentials{}, errors.New("pgenv: granting: the expiry time is required")
	}
	role := RolePrefix + strings.ToLower(rand.Text()[:16])
	password := rand.Text() // 26 characters, 128 bits
	verifier, err := scramVerifier(password)
	if err != nil {
		return Credentials{}, fmt.Errorf("pgenv: granting: %w", err)
	}

	conn, err := s.connect(ctx, database)
	if err != nil {
		return Credentials{}, fmt.Errorf("pgenv: granting on %q: %w", database, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// CREATE ROLE takes no parameters: the server quotes the literals.
		var passwordLit, untilLit string
		if err := tx.QueryRow(ctx, `SELECT quote_literal($1::text), quote_literal($2::timestamptz::text)`, verifier, until).
			Scan(&passwordLit, &untilLit); err != nil {
			return fmt.Errorf("quoting: %w", err)
		}
		r, db := ident(role), ident(database)
		stmts := []string{
			"CREATE ROLE " + r + " LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD " + passwordLit + " VALID UNTIL " + untilLit,
			"GRANT " + r + " TO CURRENT_USER",
			"REVOKE CONNECT, TEMPORARY ON DATABASE " + db + " FROM PUBLIC",
			"GRANT CONNECT, CREATE, TEMPORARY ON DATABASE " + db + " TO " + r,
		}
		rows, _ := tx.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname !~ '^pg_' AND nspname <> 'information_schema' ORDER BY nspname`)
		schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("listing schemas: %w", err)
		}
		for _, name := range schemas {
			sc := ident(name)
			stmts = append(stmts,
				"GRANT USAGE, CREATE ON SCHEMA "+sc+" TO "+r,
				"GRANT ALL ON ALL TABLES IN SCHEMA "+sc+" TO "+r,
				"GRANT ALL ON ALL SEQUENCES IN SCHEMA "+sc+" TO "+r,
				"GRANT EXECUTE ON ALL ROUTINES IN SCHEMA "+sc+" TO "+r,
			)
			if name == "public" {
				stmts = append(stmts, "ALTER SCHEMA public OWNER TO "+r)
			}
		}
		for _, stmt := range stmts {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("%s: %w", strings.SplitN(stmt, " PASSWORD ", 2)[0], err)
			}
		}
		return nil
	})
	if err != nil {
		return Credentials{}, fmt.Errorf("pgenv: granting on %q: %w", database, err)
	}
	return Credentials{Role: role, Password: password, URL: s.url(database, role, password), ExpiresAt: until}, nil
}

// url is the credential URL for database.
func (s *Server) url(database, role, password string) string {
	u := url.URL{
		Scheme:   s.scheme,
		User:     url.UserPassword(role, password),
		Host:     s.host,
		Path:     "/" + database,
		RawQuery: s.query.Encode(),
	}
	return u.String()
}

// Revoke ends a role Grant created: it can no longer log in, its sessions are
// terminated, what it created is handed to the admin role (Clean removes it)
// and the role is dropped. A role that does not exist is fine, so Revoke can
// be retried.
func (s *Server) Revoke(ctx context.Context, role string) error {
	if !strings.HasPrefix(role, RolePrefix) {
		return fmt.Errorf("pgenv: revoking %q: not a role Grant created", role)
	}
	err := s.revoke(ctx, role)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeUndefinedObject {
		return nil // dropped meanwhile, by an earlier or concurrent Revoke
	}
	if err != nil {
		return fmt.Errorf("pgenv: revoking %q: %w", role, err)
	}
	return nil
}

func (s *Server) revoke(ctx context.Context, role string) error {
	var oid uint32
	err := s.pool.QueryRow(ctx, `SELECT oid FROM pg_roles WHERE rolname = $1`, role).Scan(&oid)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("looking up: %w", err)
	}
	r := ident(role)
	if _, err := s.pool.Exec(ctx, "ALTER ROLE "+r+" NOLOGIN"); err != nil {
		return fmt.Errorf("disabling login: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `SELECT pg_terminate_backend(pid, $2) FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid()`,
		role, terminateWait.Milliseconds()); err != nil {
		return fmt.Errorf("terminating sessions: %w", err)
	}
	var left int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = $1`, role).Scan(&left); err != nil {
		return fmt.Errorf("counting sessions: %w", err)
	}
	if left > 0 {
		return fmt.Errorf("%d sessions still open after termination", left)
	}

	// Objects and privileges in a database can only be reassigned or dropped
	// from a connection to it; pg_shdepend says which databases hold some.
	rows, _ := s.pool.Query(ctx, `
		SELECT DISTINCT d.datname FROM pg_shdepend s JOIN pg_database d ON d.oid = s.dbid
		WHERE s.refclassid = 'pg_authid'::regclass AND s.refobjid = $1 AND d.datallowconn AND d.datname <> current_database()
		ORDER BY 1`, oid)
	databases, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("finding its databases: %w", err)
	}
	disown := []string{"REASSIGN OWNED BY " + r + " TO CURRENT_USER", "DROP OWNED BY " + r}
	for _, database := range databases {
		if err := s.execIn(ctx, database, disown...); err != nil {
			return err
		}
	}
	for _, stmt := range append(disown, "DROP ROLE IF EXISTS "+r) {
		if _, err := s.pool.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// execIn runs stmts in database; a database dropped meanwhile is skipped.
func (s *Server) execIn(ctx context.Context, database string, stmts ...string) error {
	conn, err := s.connect(ctx, database)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeInvalidCatalog {
		return nil
	}
	if err != nil {
		return fmt.Errorf("connecting to %q: %w", database, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, stmt := range stmts {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s in %q: %w", stmt, database, err)
		}
	}
	return nil
}

// Clean drops database, terminating its sessions, and creates it again: a
// copy of template when one is named, else empty (from template0). Running it
// again is harmless, also after it failed half-way. Nobody may be connected
// to the template meanwhile.
func (s *Server) Clean(ctx context.Context, database, template string) error {
	if err := s.checkDatabase(database); err != nil {
		return err
	}
	if err := checkTemplate(database, template); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(database)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("pgenv: cleaning %q: dropping: %w", database, err)
	}
	if err := s.create(ctx, database, template); err != nil {
		return fmt.Errorf("pgenv: cleaning %q: %w", database, err)
	}
	return nil
}

// Ensure creates database, empty, unless it exists.
func (s *Server) Ensure(ctx context.Context, database string) error {
	return s.EnsureFrom(ctx, database, "")
}

// EnsureFrom creates database as a copy of template (empty when template is
// ""), unless it exists; an existing database is left as it is.
func (s *Server) EnsureFrom(ctx context.Context, database, template string) error {
	if err := s.checkDatabase(database); err != nil {
		return err
	}
	if err := checkTemplate(database, template); err != nil {
		return err
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, database).Scan(&exists); err != nil {
		return fmt.Errorf("pgenv: ensuring %q: %w", database, err)
	}
	if exists {
		return nil
	}
	if err := s.create(ctx, database, template); err != nil {
		return fmt.Errorf("pgenv: ensuring %q: %w", database, err)
	}
	return nil
}

// create creates database and keeps PUBLIC out of it. A database that
// appeared meanwhile was created by a concurrent Clean or Ensure: the same
// outcome.
func (s *Server) create(ctx context.Context, database, template string) error {
	if template == "" {
		template = "template0"
	}
	db := ident(database)
	_, err := s.pool.Exec(ctx, "CREATE DATABASE "+db+" TEMPLATE "+ident(template))
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == codeDuplicateDatabase) {
		return fmt.Errorf("creating from %q: %w", template, err)
	}
	if _, err := s.pool.Exec(ctx, "REVOKE CONNECT, TEMPORARY ON DATABASE "+db+" FROM PUBLIC"); err != nil {
		return fmt.Errorf("revoking access from PUBLIC: %w", err)
	}
	return nil
}

// Roles lists the roles Grant created that still exist, so a periodic sweep
// can revoke those no live allocation holds (a Grant whose allocation
// transaction then failed, for instance).
func (s *Server) Roles(ctx context.Context) ([]string, error) {
	rows, _ := s.pool.Query(ctx, `SELECT rolname FROM pg_roles WHERE starts_with(rolname, $1) ORDER BY rolname`, RolePrefix)
	roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgenv: listing roles: %w", err)
	}
	return roles, nil
}

func (s *Server) connect(ctx context.Context, database string) (*pgx.Conn, error) {
	config := s.config.Copy()
	config.Database = database
	return pgx.ConnectConfig(ctx, config)
}

// checkDatabase refuses names PostgreSQL would mangle and the databases that
// are not environments: the admin's own and the built-in ones.
func (s *Server) checkDatabase(database string) error {
	if err := checkName(database); err != nil {
		return fmt.Errorf("pgenv: database %q: %w", database, err)
	}
	switch database {
	case s.adminDB, "postgres", "template0", "template1":
		return fmt.Errorf("pgenv: database %q is not an environment database", database)
	}
	return nil
}

func checkTemplate(database, template string) error {
	if template == "" {
		return nil
	}
	if err := checkName(template); err != nil {
		return fmt.Errorf("pgenv: template %q: %w", template, err)
	}
	if template == database {
		return fmt.Errorf("pgenv: database %q cannot be its own template", database)
	}
	return nil
}

// checkName accepts what PostgreSQL stores as given: longer names would be
// truncated to 63 bytes, and NUL cannot be stored at all.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("the name is empty")
	case len(name) > 63:
		return errors.New("the name is longer than 63 bytes")
	case !utf8.ValidString(name) || strings.ContainsRune(name, 0):
		return errors.New("the name must be UTF-8 without NUL")
	}
	return nil
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// Extend moves a granted role's VALID UNTIL, when its allocation is extended.
func (s *Server) Extend(ctx context.Context, role string, until time.Time) error {
	if !strings.HasPrefix(role, RolePrefix) {
		return fmt.Errorf("pgenv: extending %q: not a role Grant created", role)
	}
	var untilLit string
	if err := s.pool.QueryRow(ctx, `SELECT quote_literal($1::timestamptz::text)`, until).Scan(&untilLit); err != nil {
		return fmt.Errorf("pgenv: extending %q: quoting: %w", role, err)
	}
	if _, err := s.pool.Exec(ctx, "ALTER ROLE "+ident(role)+" VALID UNTIL "+untilLit); err != nil {
		return fmt.Errorf("pgenv: extending %q: %w", role, err)
	}
	return nil
}
