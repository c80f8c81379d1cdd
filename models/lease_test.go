package models_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// leaseSetup registers pool "p" with environments of the given capabilities
// (slot-0, slot-1, …) and returns the database and a queue for transactions.
func leaseSetup(t *testing.T, caps ...map[string]string) (*models.DB, *jobs.Queue) {
	t.Helper()
	ctx := context.Background()
	db := testdb.New(t)
	queue, err := jobs.NewQueue(db.Bun)
	require.NoError(t, err)
	require.NoError(t, models.UpsertPool(ctx, db.Bun, &models.Pool{Name: "p", Kind: "slot", SessionSeconds: 3600, MaxSessionSeconds: 7200,
		CleanupTimeoutSeconds: 60, Clients: []string{"ci"}, CleanupCommand: []string{}, NotifyEmails: []string{}}))
	for i, c := range caps {
		name := "slot-" + string(rune('0'+i))
		require.NoError(t, models.UpsertEnvironment(ctx, db.Bun, &models.Environment{Key: "slot:" + name, Pool: "p", Kind: "slot", SlotName: name, Capabilities: c}))
	}
	return db, queue
}

// lease locks and records one allocation of env in its own transaction.
func lease(t *testing.T, queue *jobs.Queue, caps map[string]string) *models.Allocation {
	t.Helper()
	var a *models.Allocation
	require.NoError(t, queue.InTx(context.Background(), func(ctx context.Context, tx jobs.Tx) error {
		_, envs, err := models.LockLeasable(ctx, tx, "p", []map[string]string{caps}, 1)
		require.NoError(t, err)
		require.Len(t, envs, 1)
		a = &models.Allocation{ID: uuid.New(), RequestID: uuid.New(), EnvironmentID: envs[0].ID, Pool: "p", Requester: "r", Client: "ci",
			Capabilities: envs[0].Capabilities, ExpiresAt: time.Now().Add(time.Hour), Environment: &envs[0]}
		return models.RecordAllocations(ctx, tx, []*models.Allocation{a},
			[]*models.LogEntry{{TargetID: "environment:" + envs[0].Key, Event: "leased", Actor: "test", Detail: map[string]any{"n": 1}}})
	}))
	return a
}

func TestLockLeasable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, queue := leaseSetup(t, map[string]string{"size": "small"}, map[string]string{"size": "large"}, map[string]string{"size": "large", "gpu": "yes"})

	t.Run("it reads the pool and locks matching environments, never-used first", func(t *testing.T) {
		require.NoError(t, queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			pool, envs, err := models.LockLeasable(ctx, tx, "p", []map[string]string{{"size": "large"}}, 5)
			require.NoError(t, err)
			require.Equal(t, "p", pool.Name)
			require.Equal(t, []string{"ci"}, pool.Clients)
			require.Equal(t, []string{}, pool.CleanupCommand)
			require.Len(t, envs, 2)
			require.Equal(t, "slot-1", envs[0].SlotName)
			require.Equal(t, map[string]string{"size": "large", "gpu": "yes"}, envs[1].Capabilities)
			return nil
		}))
	})
	t.Run("an empty requirement matches anything", func(t *testing.T) {
		require.NoError(t, queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			_, envs, err := models.LockLeasable(ctx, tx, "p", []map[string]string{{"gpu": "yes"}, {}}, 5)
			require.NoError(t, err)
			require.Len(t, envs, 3)
			return nil
		}))
	})
	t.Run("concurrent transactions lock different environments", func(t *testing.T) {
		locked := make(chan int64)
		release := make(chan struct{})
		go func() {
			_ = queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
				_, envs, err := models.LockLeasable(ctx, tx, "p", []map[string]string{{"size": "large"}}, 1)
				if err != nil || len(envs) != 1 {
					locked <- 0
					return errors.New("nothing locked")
				}
				locked <- envs[0].ID
				<-release
				return errors.New("roll back")
			})
		}()
		first := <-locked
		require.NotZero(t, first)
		require.NoError(t, queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			_, envs, err := models.LockLeasable(ctx, tx, "p", []map[string]string{{"size": "large"}}, 5)
			require.NoError(t, err)
			require.Len(t, envs, 1, "the row locked elsewhere is skipped, not waited for")
			require.NotEqual(t, first, envs[0].ID)
			return nil
		}))
		close(release)
	})
	t.Run("nothing leasable or no such pool: no pool", func(t *testing.T) {
		require.NoError(t, queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			pool, envs, err := models.LockLeasable(ctx, tx, "p", []map[string]string{{"size": "huge"}}, 1)
			require.NoError(t, err)
			require.Nil(t, pool)
			require.Empty(t, envs)
			pool, _, err = models.LockLeasable(ctx, tx, "nope", nil, 1)
			require.NoError(t, err)
			require.Nil(t, pool)
			return nil
		}))
	})
	_ = db
}

func TestRecordAllocations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, queue := leaseSetup(t, map[string]string{"size": "small"}, map[string]string{})

	a := lease(t, queue, map[string]string{"size": "small"})
	require.False(t, a.StartedAt.IsZero(), "the start is read back")
	var status, capsType, detailType string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT e.status, jsonb_typeof(a.capabilities), a.capabilities->>'size'
		FROM allocations a JOIN environments e ON e.id = a.environment_id WHERE a.id = $1`, a.ID).Scan(&status, &capsType, new(string)))
	require.Equal(t, models.EnvInUse, status)
	require.Equal(t, "object", capsType)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT jsonb_typeof(detail) FROM deployment_log WHERE event = 'leased'`).Scan(&detailType))
	require.Equal(t, "object", detailType)

	t.Run("an environment no longer available is refused and nothing is written", func(t *testing.T) {
		err := queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			again := &models.Allocation{ID: uuid.New(), RequestID: uuid.New(), EnvironmentID: a.EnvironmentID, Pool: "p", Requester: "r2", Client: "ci", ExpiresAt: time.Now().Add(time.Hour)}
			return models.RecordAllocations(ctx, tx, []*models.Allocation{again}, []*models.LogEntry{{TargetID: "x", Event: "leased-again", Actor: "test"}})
		})
		require.Error(t, err)
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM allocations) + (SELECT count(*) FROM deployment_log WHERE event = 'leased-again')`).Scan(&n))
		require.Equal(t, 1, n)
	})
	t.Run("the database refuses a second active allocation even when the status says available", func(t *testing.T) {
		_, err := db.Pool.Exec(ctx, `UPDATE environments SET status = 'available' WHERE id = $1`, a.EnvironmentID)
		require.NoError(t, err)
		err = queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			again := &models.Allocation{ID: uuid.New(), RequestID: uuid.New(), EnvironmentID: a.EnvironmentID, Pool: "p", Requester: "r2", Client: "ci", ExpiresAt: time.Now().Add(time.Hour)}
			return models.RecordAllocations(ctx, tx, []*models.Allocation{again}, nil)
		})
		require.ErrorIs(t, err, models.ErrConflict)
		require.ErrorContains(t, err, "environment_id")
	})
}

func TestEndAndReturn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, queue := leaseSetup(t, map[string]string{})
	a := lease(t, queue, map[string]string{})

	t.Run("another client's allocation is not found and stays active", func(t *testing.T) {
		err := queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			_, _, err := models.EndActiveAllocation(ctx, tx, a.ID, "someone-else", models.EndedByClient, "")
			return err
		})
		require.ErrorIs(t, err, models.ErrNotFound)
		got, err := models.AllocationByID(ctx, db.Bun, a.ID)
		require.NoError(t, err)
		require.True(t, got.Active())
	})
	t.Run("ending returns the allocation, its environment and pool; returning makes it available", func(t *testing.T) {
		require.NoError(t, queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			ended, pool, err := models.EndActiveAllocation(ctx, tx, a.ID, "ci", models.EndedByClient, "success")
			require.NoError(t, err)
			require.Equal(t, "p", pool.Name)
			require.Equal(t, "slot:slot-0", ended.Environment.Key)
			require.Equal(t, "success", ended.Outcome)
			require.NotNil(t, ended.EndedAt)
			require.Equal(t, models.EndedByClient, *ended.EndedBy)
			status, err := models.ReturnEnvironment(ctx, tx, ended.EnvironmentID,
				[]*models.LogEntry{{TargetID: "environment:slot:slot-0", Event: "returned", Actor: "test"}})
			require.NoError(t, err)
			require.Equal(t, models.EnvAvailable, status)
			return nil
		}))
		env, err := models.EnvironmentByID(ctx, db.Bun, a.EnvironmentID)
		require.NoError(t, err)
		require.Equal(t, models.EnvAvailable, env.Status)
		require.NotNil(t, env.LastReleasedAt)
	})
	t.Run("an ended allocation is not ended twice", func(t *testing.T) {
		err := queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			_, _, err := models.EndActiveAllocation(ctx, tx, a.ID, "", models.EndedByTimeout, "timeout")
			return err
		})
		require.ErrorIs(t, err, models.ErrNotFound)
		got, err := models.AllocationByID(ctx, db.Bun, a.ID)
		require.NoError(t, err)
		require.Equal(t, "success", got.Outcome, "the first end stands")
	})
	t.Run("an environment removed meanwhile is deregistered on return", func(t *testing.T) {
		b := lease(t, queue, map[string]string{})
		_, err := models.DeregisterExcept(ctx, db.Bun, []string{"slot:other"})
		require.NoError(t, err)
		require.NoError(t, queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			ended, _, err := models.EndActiveAllocation(ctx, tx, b.ID, "", models.EndedByOperator, "")
			require.NoError(t, err)
			status, err := models.ReturnEnvironment(ctx, tx, ended.EnvironmentID, nil)
			require.NoError(t, err)
			require.Equal(t, models.EnvDeregistered, status)
			return nil
		}))
	})
	t.Run("returning an environment that is not in use fails", func(t *testing.T) {
		err := queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			_, err := models.ReturnEnvironment(ctx, tx, a.EnvironmentID, []*models.LogEntry{{TargetID: "x", Event: "returned-twice", Actor: "test"}})
			return err
		})
		require.ErrorIs(t, err, models.ErrNotFound)
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM deployment_log WHERE event = 'returned-twice'`).Scan(&n))
		require.Zero(t, n, "rolled back with the transaction")
	})
}
