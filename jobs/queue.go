package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/uptrace/bun"
)

// Queue is the one way Gantry starts background work: rows change and the
// follow-up job is inserted in the same transaction, so a rolled-back change
// never runs a job and a committed one always has its job.
type Queue struct {
	db       *bun.DB
	inserter *river.Client[*sql.Tx]
}

// NewQueue builds an insert-only River client on Bun's *sql.DB (the same
// pgx pool underneath).
func NewQueue(db *bun.DB) (*Queue, error) {
	client, err := river.NewClient(riverdatabasesql.New(db.DB), &river.Config{})
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
}

// Enqueue inserts a job that becomes visible to workers when the transaction commits.
func (tx Tx) Enqueue(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) error {
	if _, err := tx.queue.inserter.InsertTx(ctx, tx.Tx.Tx, args, opts); err != nil {
		return fmt.Errorf("enqueueing %s: %w", args.Kind(), err)
	}
	return nil
}

// EnqueueJob is Enqueue returning the job's id, for work that may have to
// be cancelled later (CancelJob).
func (tx Tx) EnqueueJob(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (int64, error) {
	res, err := tx.queue.inserter.InsertTx(ctx, tx.Tx.Tx, args, opts)
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
	_, err := tx.queue.inserter.JobCancelTx(ctx, tx.Tx.Tx, jobID)
	if err != nil && !errors.Is(err, river.ErrNotFound) {
		return fmt.Errorf("cancelling job %d: %w", jobID, err)
	}
	return nil
}

// InTx runs fn in one transaction; it commits only when fn returns nil.
func (q *Queue) InTx(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error {
	return q.db.RunInTx(ctx, nil, func(ctx context.Context, btx bun.Tx) error {
		return fn(ctx, Tx{Tx: btx, queue: q})
	})
}

// DB is the database the queue's transactions run on.
func (q *Queue) DB() *bun.DB { return q.db }
