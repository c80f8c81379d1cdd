// Package models holds Gantry's persisted types and the queries over them.
// Every function takes ctx and a bun.IDB first, so the same code runs on the
// database or inside a caller's transaction.
package models

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
)

// ErrNotFound is returned when a query finds no row; handlers map it to 404.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when a unique constraint refuses a row.
var ErrConflict = errors.New("already exists")

// DB is the process's one connection pool, seen both by pgx users (River) and
// by Bun.
type DB struct {
	Pool *pgxpool.Pool
	Bun  *bun.DB
}

// Open connects a pool of at most maxConns connections and checks it works.
func Open(ctx context.Context, url string, maxConns int32) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parsing DATABASE_URL: %w", err)
	}
	cfg.MaxConns = maxConns
	cfg.MaxConnIdleTime = 5 * time.Minute
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("creating database pool: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to PostgreSQL at %s: %w", redactURL(url), err)
	}
	sqldb := sql.OpenDB(directConnector{stdlib.GetPoolConnector(pool)})
	sqldb.SetMaxIdleConns(0) // as stdlib.OpenDBFromPool: the pgx pool keeps the idle connections
	return &DB{Pool: pool, Bun: bun.NewDB(sqldb, pgdialect.New())}, nil
}

// directConnector hands out connections whose argument-less queries skip
// pgx's statement cache. Bun writes its arguments into the SQL text, so each
// of its queries is new to that cache, which would prepare it first (an
// extra round trip to the server) only to evict it later. Sent in one round
// trip instead, an allocation takes about half the time. Queries with
// arguments (River's) keep the cache.
type directConnector struct{ driver.Connector }

func (c directConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &directConn{Conn: conn.(*stdlib.Conn)}, nil
}

type directConn struct {
	*stdlib.Conn
	tx pgx.Tx // the transaction database/sql has open on this connection
}

func (c *directConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if len(args) == 0 {
		args = []driver.NamedValue{{Ordinal: 1, Value: pgx.QueryExecModeExec}}
	}
	return c.Conn.QueryContext(ctx, query, args)
}

// BeginTx begins transactions of the default isolation itself, as
// stdlib.Conn would, so that it can hand the pgx.Tx to code that works in the
// same transaction through pgx (River's pgx driver; see PgxTxOf).
func (c *directConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if sql.IsolationLevel(opts.Isolation) != sql.LevelDefault || opts.ReadOnly {
		return c.Conn.BeginTx(ctx, opts)
	}
	if c.Conn.Conn().IsClosed() {
		return nil, driver.ErrBadConn
	}
	tx, err := c.Conn.Conn().Begin(ctx)
	if err != nil {
		return nil, err
	}
	c.tx = tx
	return directTx{ctx: ctx, conn: c}, nil
}

type directTx struct {
	ctx  context.Context
	conn *directConn
}

func (t directTx) Commit() error {
	tx := t.conn.tx
	t.conn.tx = nil
	return tx.Commit(t.ctx)
}

func (t directTx) Rollback() error {
	tx := t.conn.tx
	t.conn.tx = nil
	return tx.Rollback(t.ctx)
}

// PgxTxOf is the transaction that database/sql (and so Bun) has open on conn,
// as a pgx.Tx: statements sent through either run in the same transaction.
// conn must come from a database opened by Open, and a transaction begun on
// it with the default options must be open.
func PgxTxOf(conn bun.Conn) (pgx.Tx, error) {
	var tx pgx.Tx
	err := conn.Raw(func(dc any) error {
		c, ok := dc.(*directConn)
		if !ok {
			return fmt.Errorf("models: the connection is a %T, not one of a database opened by models.Open", dc)
		}
		tx = c.tx
		return nil
	})
	if err == nil && tx == nil {
		err = errors.New("models: no transaction is open on the connection")
	}
	return tx, err
}

// Close releases the pool.
func (db *DB) Close() {
	_ = db.Bun.Close()
	db.Pool.Close()
}

// notFound turns sql.ErrNoRows into ErrNotFound, in this one place.
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// uniqueViolation turns PostgreSQL's unique_violation into ErrConflict.
func uniqueViolation(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("%w: %s", ErrConflict, pgErr.Detail)
	}
	return err
}

func redactURL(raw string) string {
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	host := cfg.ConnConfig.Host
	return fmt.Sprintf("%s:%d/%s", host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
}

// affectedOne turns "no row matched" into ErrNotFound for updates by id.
func affectedOne(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}
