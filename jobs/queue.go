package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/models"
)

// Queue is the one way Gantry starts background work: rows change and the
// follow-up job is inserted in the same transaction, so a rolled-back change
// never runs a job and a committed one always has its job.
type Queue struct {
	db       *bun.DB
	inserter *river.Client[pgx.Tx]
}

// NewQueue builds an insert-only River client. Its jobs go in through
// River's pgx driver, on the pgx transaction beneath each Bun transaction
// (models.PgxTx): one connection, one transaction, and pgx's own encoding of
// River's arguments rather than database/sql's. db must come from
// models.Open.
func NewQueue(db *bun.DB) (*Queue, error) {
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{})
	if err != nil {
		return nil, fmt.Errorf("creating River insert client: %w", err)
	}
	return &Queue{db: db, inserter: client}, nil
}

// Tx is a Bun transaction that can also enqueue jobs. It is a bun.IDB, so
// models functions take it as they take the database.
type Tx struct {
	bun.Tx
	queue *Queue
	pgx   pgx.Tx // the same transaction, as River's pgx driver sees it
}

// Pgx is the same transaction as pgx sees it (models.Tx).
func (tx Tx) Pgx() pgx.Tx { return tx.pgx }

// Enqueue inserts a job that becomes visible to workers when the transaction commits.
func (tx Tx) Enqueue(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) error {
	if _, err := tx.queue.inserter.InsertTx(ctx, tx.pgx, args, opts); err != nil {
		return fmt.Errorf("enqueueing %s: %w", args.Kind(), err)
	}
	return nil
}

// EnqueueMany inserts jobs in one statement; they become visible to workers
// when the transaction commits.
func (tx Tx) EnqueueMany(ctx context.Context, params []river.InsertManyParams) error {
	if len(params) == 0 {
		return nil
	}
	if _, err := tx.queue.inserter.InsertManyTx(ctx, tx.pgx, params); err != nil {
		return fmt.Errorf("enqueueing %d %s jobs: %w", len(params), params[0].Args.Kind(), err)
	}
	return nil
}

// EnqueueJob is Enqueue returning the job's id, for work that may have to
// be cancelled later (CancelJob).
func (tx Tx) EnqueueJob(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (int64, error) {
	res, err := tx.queue.inserter.InsertTx(ctx, tx.pgx, args, opts)
	if err != nil {
		return 0, fmt.Errorf("enqueueing %s: %w", args.Kind(), err)
	}
	return res.Job.ID, nil
}

// CancelJob cancels a job when the transaction commits: a queued one never
// runs; a running one has its context cancelled wherever it runs (River
// tells its worker through the database). A job already finished is left
// as it is.
func (tx Tx) CancelJob(ctx context.Context, jobID int64) error {
	_, err := tx.queue.inserter.JobCancelTx(ctx, tx.pgx, jobID)
	if err != nil && !errors.Is(err, river.ErrNotFound) {
		return fmt.Errorf("cancelling job %d: %w", jobID, err)
	}
	return nil
}

// InTx runs fn in one transaction; it commits only when fn returns nil.
func (q *Queue) InTx(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error {
	conn, err := q.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("taking a database connection: %w", err)
	}
	defer conn.Close()
	// The transaction itself is not bound to ctx: database/sql rolls a
	// transaction back from a goroutine of its own when its context ends,
	// while River's pgx calls may be using the same connection, which races.
	// Statements still take ctx, so a cancelled caller's next statement
	// fails and the transaction is rolled back here, in this goroutine.
	return conn.RunInTx(context.WithoutCancel(ctx), nil, func(_ context.Context, btx bun.Tx) error {
		ptx, err := models.PgxTxOf(conn)
		if err != nil {
			return err
		}
		return fn(ctx, Tx{Tx: btx, queue: q, pgx: ptx})
	})
}

// DB is the database the queue's transactions run on.
func (q *Queue) DB() *bun.DB { return q.db }
