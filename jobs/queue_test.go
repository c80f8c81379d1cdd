package jobs_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// markArgs is a job that only exists in this test: running it appends a log
// entry, so the test can see which jobs ran.
type markArgs struct {
	Mark string `json:"mark"`
}

func (markArgs) Kind() string { return "test_mark" }

type markWorker struct {
	river.WorkerDefaults[markArgs]
	db *models.DB
}

func (w *markWorker) Work(ctx context.Context, job *river.Job[markArgs]) error {
	return models.AppendLog(ctx, w.db.Bun, &models.LogEntry{TargetID: "marks", Event: "ran", Actor: "test", Revision: job.Args.Mark})
}

func TestQueueJobCommitsWithTheRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	queue, err := jobs.NewQueue(db.Bun)
	require.NoError(t, err)

	workers := river.NewWorkers()
	river.AddWorker(workers, &markWorker{db: db})
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		Workers: workers, Logger: slog.New(slog.DiscardHandler), FetchPollInterval: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() { _ = client.Stop(context.Background()) })
	completed, cancel := client.Subscribe(river.EventKindJobCompleted)
	t.Cleanup(cancel)

	boom := errors.New("something after the enqueue failed")
	err = queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		require.NoError(t, models.AppendLog(ctx, tx, &models.LogEntry{TargetID: "rows", Event: "changed", Actor: "test", Revision: "rolled-back"}))
		require.NoError(t, tx.Enqueue(ctx, markArgs{Mark: "rolled-back"}, nil))
		return boom
	})
	require.ErrorIs(t, err, boom)

	err = queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		require.NoError(t, models.AppendLog(ctx, tx, &models.LogEntry{TargetID: "rows", Event: "changed", Actor: "test", Revision: "committed"}))
		return tx.Enqueue(ctx, markArgs{Mark: "committed"}, nil)
	})
	require.NoError(t, err)

	select {
	case ev := <-completed:
		require.Equal(t, "test_mark", ev.Job.Kind)
	case <-time.After(15 * time.Second):
		t.Fatal("the committed job did not run")
	}
	// Give a wrongly inserted job every chance to run too before looking.
	time.Sleep(300 * time.Millisecond)

	ran, err := models.ListLog(ctx, db.Bun, models.LogFilter{Target: "marks"})
	require.NoError(t, err)
	require.Len(t, ran, 1)
	require.Equal(t, "committed", ran[0].Revision)
	rows, err := models.ListLog(ctx, db.Bun, models.LogFilter{Target: "rows"})
	require.NoError(t, err)
	require.Len(t, rows, 1, "the rolled-back row is gone too")
	var jobCount int
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE kind = 'test_mark'").Scan(&jobCount))
	require.Equal(t, 1, jobCount, "the rolled-back job was never inserted")
}

func TestPruneSessionsWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	_, err := db.Pool.Exec(ctx, `INSERT INTO users (email, name, role, password_hash) VALUES ('a@example.com', 'A', 'viewer', 'x')`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `INSERT INTO sessions (token_hash, user_id, expires_at) VALUES
		('\x01', 1, now() - interval '1 minute'), ('\x02', 1, now() + interval '1 hour')`)
	require.NoError(t, err)
	// Sign-in attempts are kept as long as they count for throttling.
	_, err = db.Pool.Exec(ctx, `INSERT INTO login_attempts (account, address, outcome, expires_at) VALUES
		('old@example.com', '192.0.2.1', 'failed', now() - interval '1 second'),
		('new@example.com', '192.0.2.1', 'pending', now() + interval '15 minutes')`)
	require.NoError(t, err)

	worker := rivertest.NewWorker(t, riverpgxv5.New(db.Pool), &river.Config{}, river.Worker[jobs.PruneSessionsArgs](
		&jobs.PruneSessionsWorker{DB: db, Logger: slog.New(slog.DiscardHandler)}))
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	res, err := worker.Work(ctx, t, tx, jobs.PruneSessionsArgs{}, nil)
	require.NoError(t, err)
	require.Equal(t, "completed", string(res.Job.State))

	var left []byte
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT token_hash FROM sessions").Scan(&left))
	require.Equal(t, []byte{2}, left, "only the unexpired session is kept")
	var kept []string
	rows, err := db.Pool.Query(ctx, "SELECT account FROM login_attempts")
	require.NoError(t, err)
	for rows.Next() {
		var a string
		require.NoError(t, rows.Scan(&a))
		kept = append(kept, a)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"new@example.com"}, kept, "only the attempt still in its window is kept")

	// Running it again is harmless: the worker is idempotent.
	_, err = worker.Work(ctx, t, tx, jobs.PruneSessionsArgs{}, nil)
	require.NoError(t, err)
}

func TestPeriodicJobsAreUniqueWithinTheirPeriod(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	queue, err := jobs.NewQueue(db.Bun)
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		require.NoError(t, queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			return tx.Enqueue(ctx, jobs.PruneSessionsArgs{}, nil)
		}))
	}
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE kind = 'prune_sessions'").Scan(&n))
	require.Equal(t, 1, n, "overlapping sweeps collapse into one job")
	var queueName string
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT queue FROM river_job WHERE kind = 'prune_sessions'").Scan(&queueName))
	require.Equal(t, jobs.QueueMaintenance, queueName)
}

func TestEnqueueManyIsPartOfTheTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	queue, err := jobs.NewQueue(db.Bun)
	require.NoError(t, err)
	many := []river.InsertManyParams{{Args: markArgs{Mark: "a"}}, {Args: markArgs{Mark: "b"}, InsertOpts: &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)}}}
	count := func() int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE kind = 'test_mark'").Scan(&n))
		return n
	}

	boom := errors.New("something after the enqueue failed")
	err = queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		require.NoError(t, tx.EnqueueMany(ctx, many))
		// River's insert and Bun's queries share one transaction: the jobs
		// are visible inside it.
		var n int
		require.NoError(t, tx.NewRaw("SELECT count(*) FROM river_job WHERE kind = 'test_mark'").Scan(ctx, &n))
		require.Equal(t, 2, n)
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Zero(t, count(), "rolled back with the transaction")

	require.NoError(t, queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error { return tx.EnqueueMany(ctx, many) }))
	require.Equal(t, 2, count())
	var scheduled int
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE kind = 'test_mark' AND state = 'scheduled'").Scan(&scheduled))
	require.Equal(t, 1, scheduled, "each job keeps its own insert options")
}
