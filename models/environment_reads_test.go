package models_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/models"
)

// readsSetup registers pool "big" of n slots env-000… (every third has
// size=large, the others size=small) and pool "other" of 3 slots o-0…, all
// available.
func readsSetup(t *testing.T, n int) *models.DB {
	t.Helper()
	ctx := context.Background()
	db := testdb.New(t)
	for _, p := range []string{"big", "other"} {
		require.NoError(t, models.UpsertPool(ctx, db.Bun, &models.Pool{Name: p, Kind: "slot", SessionSeconds: 3600, MaxSessionSeconds: 7200,
			CleanupTimeoutSeconds: 60, Clients: []string{}, CleanupCommand: []string{}, NotifyEmails: []string{}}))
	}
	_, err := db.Bun.ExecContext(ctx, `INSERT INTO environments (key, name, pool, kind, capabilities)
		SELECT 'slot:' || n, n, 'big', 'slot', jsonb_build_object('size', CASE WHEN i % 3 = 0 THEN 'large' ELSE 'small' END)
		FROM generate_series(0, ? - 1) AS i, LATERAL (SELECT 'env-' || lpad(i::text, 3, '0') AS n) AS x`, n)
	require.NoError(t, err)
	_, err = db.Bun.ExecContext(ctx, `INSERT INTO environments (key, name, pool, kind)
		SELECT 'slot:o-' || i, 'o-' || i, 'other', 'slot' FROM generate_series(0, 2) AS i`)
	require.NoError(t, err)
	return db
}

func exec(t *testing.T, db *models.DB, query string, args ...any) {
	t.Helper()
	_, err := db.Bun.ExecContext(context.Background(), query, args...)
	require.NoError(t, err)
}

func names(rows []models.EnvironmentListing) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, r.Name())
	}
	return out
}

func TestListEnvironmentPageFiltersAndPagesInSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := readsSetup(t, 300)

	t.Run("page 3 of a pool's large environments is exactly those ten", func(t *testing.T) {
		rows, err := models.ListEnvironmentPage(ctx, db.Bun, models.EnvironmentListFilter{Pool: "big", Query: "SIZE=Large", Offset: 20, Limit: 10})
		require.NoError(t, err)
		var want []string
		for i := 60; i < 90; i += 3 { // the 21st to 30th multiples of 3
			want = append(want, fmt.Sprintf("env-%03d", i))
		}
		require.Equal(t, want, names(rows))
		for _, r := range rows {
			require.Equal(t, 100, r.Matching, "every large environment of the pool matched")
			require.Empty(t, r.CleanupOutput, "the table needs no cleanup output")
		}
	})
	t.Run("without a pool each pool gets its own first page", func(t *testing.T) {
		rows, err := models.ListEnvironmentPage(ctx, db.Bun, models.EnvironmentListFilter{Limit: 2})
		require.NoError(t, err)
		require.Equal(t, []string{"env-000", "env-001", "o-0", "o-1"}, names(rows))
		require.Equal(t, 300, rows[0].Matching)
		require.Equal(t, 3, rows[2].Matching)
	})
	t.Run("a page past the end is empty", func(t *testing.T) {
		rows, err := models.ListEnvironmentPage(ctx, db.Bun, models.EnvironmentListFilter{Pool: "other", Offset: 50, Limit: 50})
		require.NoError(t, err)
		require.Empty(t, rows)
	})

	// env-001 is held; env-002 is held and removed from gantry.yaml; env-004
	// is deregistered; env-005 is dirty and removed.
	exec(t, db, `INSERT INTO allocations (request_id, environment_id, pool, requester, client, expires_at)
		SELECT gen_random_uuid(), id, pool, 'suite-' || name, 'ci', now() + interval '1 hour' FROM environments WHERE name IN ('env-001', 'env-002')`)
	exec(t, db, `UPDATE environments SET status = 'in_use' WHERE name IN ('env-001', 'env-002')`)
	exec(t, db, `UPDATE environments SET deregister_requested_at = now() WHERE name IN ('env-002', 'env-005')`)
	exec(t, db, `UPDATE environments SET status = 'deregistered', deregistered_at = now() WHERE name = 'env-004'`)
	exec(t, db, `UPDATE environments SET status = 'dirty' WHERE name = 'env-005'`)

	for _, tc := range []struct {
		state string
		want  []string
	}{
		{models.EnvInUse, []string{"env-001"}},
		{models.EnvDeregistering, []string{"env-002"}},
		{models.EnvDirty, []string{"env-005"}},
		{models.EnvDeregistered, []string{"env-004"}},
	} {
		t.Run("state "+tc.state, func(t *testing.T) {
			rows, err := models.ListEnvironmentPage(ctx, db.Bun, models.EnvironmentListFilter{Pool: "big", State: tc.state, Limit: 10})
			require.NoError(t, err)
			require.Equal(t, tc.want, names(rows))
		})
	}
	t.Run("rows carry their current allocation", func(t *testing.T) {
		rows, err := models.ListEnvironmentPage(ctx, db.Bun, models.EnvironmentListFilter{Pool: "big", Query: "env-00", Limit: 3})
		require.NoError(t, err)
		require.Equal(t, []string{"env-000", "env-001", "env-002"}, names(rows), "the deregistered env-004 is left out")
		require.Equal(t, 9, rows[0].Matching)
		require.Empty(t, rows[0].HeldBy)
		require.Nil(t, rows[0].HeldUntil)
		require.Equal(t, "suite-env-001", rows[1].HeldBy)
		require.WithinDuration(t, time.Now().Add(time.Hour), *rows[1].HeldUntil, time.Minute)
	})
	t.Run("the capacity counts states as the pages do", func(t *testing.T) {
		counts, err := models.CountEnvironmentStates(ctx, db.Bun)
		require.NoError(t, err)
		require.Equal(t, []models.PoolStateCount{
			{Pool: "big", State: "available", Count: 296},
			{Pool: "big", State: "deregistering", Count: 1},
			{Pool: "big", State: "dirty", Count: 1},
			{Pool: "big", State: "in_use", Count: 1},
			{Pool: "other", State: "available", Count: 3},
		}, counts)
	})
}

func TestListDirtyEnvironmentsSaysWhy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := readsSetup(t, 3)
	exec(t, db, `UPDATE environments SET status = 'dirty' WHERE name IN ('env-000', 'env-001', 'env-002')`)
	appendAll(t, db,
		models.LogEntry{TargetID: models.EnvironmentTarget("slot:env-000"), Event: "failed", Actor: "test", Detail: map[string]any{"error": "old"}},
		models.LogEntry{TargetID: models.EnvironmentTarget("slot:env-000"), Event: "failed", Actor: "test", Detail: map[string]any{"error": "exit 1"}},
		models.LogEntry{TargetID: models.EnvironmentTarget("slot:env-000"), Event: "something-else", Actor: "test"},
		models.LogEntry{TargetID: models.EnvironmentTarget("slot:env-001"), Event: "timed-out", Actor: "test"},
	)
	dirty, err := models.ListDirtyEnvironments(ctx, db.Bun, []string{"failed", "timed-out"})
	require.NoError(t, err)
	require.Len(t, dirty, 3)
	require.Equal(t, [2]string{"failed", "exit 1"}, [2]string{dirty[0].ReasonEvent, dirty[0].ReasonError}, "the newest reason")
	require.Equal(t, [2]string{"timed-out", ""}, [2]string{dirty[1].ReasonEvent, dirty[1].ReasonError})
	require.Equal(t, [2]string{"", ""}, [2]string{dirty[2].ReasonEvent, dirty[2].ReasonError}, "no reason logged")
}

func TestHistoryChoices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := readsSetup(t, 2)
	exec(t, db, `UPDATE environments SET status = 'deregistered' WHERE name = 'o-2'`)
	exec(t, db, `UPDATE pools SET removed_at = now() WHERE name = 'other'`)
	require.NoError(t, models.UpsertPool(ctx, db.Bun, &models.Pool{Name: "Zeta", Kind: "slot", SessionSeconds: 3600, MaxSessionSeconds: 7200,
		CleanupTimeoutSeconds: 60, Clients: []string{}, CleanupCommand: []string{}, NotifyEmails: []string{}}))

	pools, err := models.ListHistoryPools(ctx, db.Bun)
	require.NoError(t, err)
	require.Equal(t, []string{"Zeta", "big", "other"}, pools, "registered or not, in byte order")

	choices, err := models.ListEnvironmentChoices(ctx, db.Bun)
	require.NoError(t, err)
	require.Len(t, choices, 5)
	require.Equal(t, "env-000", choices[0].Name)
	require.Equal(t, "o-2", choices[4].Name)
	require.True(t, choices[4].Deregistered)
	require.False(t, choices[3].Deregistered)
}

func TestPoolUtilization(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := readsSetup(t, 2)
	exec(t, db, `INSERT INTO allocations (request_id, environment_id, pool, requester, client, started_at, expires_at, ended_at)
		SELECT gen_random_uuid(), id, pool, 'r', 'ci', now() - interval '90 minutes', now(), now() - interval '80 minutes' FROM environments WHERE pool = 'big'`)
	since := time.Now().Truncate(time.Hour).Add(-3 * time.Hour)
	all, err := models.PoolUtilization(ctx, db.Bun, "", since, time.Hour)
	require.NoError(t, err)
	require.Len(t, all, 2, "every registered pool")
	require.Len(t, all["big"], 4)
	peak := 0
	for _, p := range all["big"] {
		peak = max(peak, p.InUse)
	}
	require.Equal(t, 2, peak)
	for _, p := range all["other"] {
		require.Zero(t, p.InUse)
	}
	one, err := models.PoolUtilization(ctx, db.Bun, "other", since, time.Hour)
	require.NoError(t, err)
	require.Len(t, one, 1)
}
