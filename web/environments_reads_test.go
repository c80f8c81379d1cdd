package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// queryCounter counts the queries Bun sends.
type queryCounter struct{ n atomic.Int64 }

func (q *queryCounter) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	return ctx
}
func (q *queryCounter) AfterQuery(context.Context, *bun.QueryEvent) { q.n.Add(1) }

// setupCounted is setup with every Bun query counted; the hook goes in
// before the web server starts, so nothing runs beside it.
func setupCounted(t *testing.T) (*bundle, *queryCounter) {
	t.Helper()
	s := servertest.NewWith(t, servertest.Options{NoWeb: true})
	counter := &queryCounter{}
	s.DB.Bun.AddQueryHook(counter)
	riverClient, err := s.App.RiverClient(jobs.ClientOptions{})
	require.NoError(t, err)
	w := s.App.WebServer(riverClient)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	require.NoError(t, w.Start(ctx))
	srv := httptest.NewServer(w.Handler())
	t.Cleanup(srv.Close)
	return &bundle{Server: s, srv: srv, server: w, db: s.DB}, counter
}

// addSlots registers n more slots in pool "slots" (made if missing): every
// third one dirty with a failed cleanup in its log, every third held, each
// with an ended allocation in the history.
func addSlots(t *testing.T, db *models.DB, from, n int) {
	t.Helper()
	ctx := context.Background()
	for _, st := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO pools (name, kind, session_seconds, max_session_seconds, cleanup_timeout_seconds)
			VALUES ('slots', 'slot', 3600, 7200, 60) ON CONFLICT DO NOTHING`, nil},
		{`INSERT INTO environments (key, name, pool, kind, status, capabilities, cleanup_output)
			SELECT 'slot:s-' || i, 's-' || i, 'slots', 'slot', CASE i % 3 WHEN 0 THEN 'dirty' WHEN 1 THEN 'in_use' ELSE 'available' END,
				jsonb_build_object('n', i::text), 'line 1' || chr(10) || 'failed: ' || i
			FROM generate_series(?, ? - 1) AS i`, []any{from, from + n}},
		{`INSERT INTO deployment_log (deployment_id, target_id, revision, event, actor, detail)
			SELECT '', 'environment:' || key, '', 'environment-cleanup-failed', 'gantry:cleanup', '{"error": "exit status 1"}'
			FROM environments WHERE status = 'dirty' AND id > (SELECT coalesce(max(id), 0) - ? FROM environments)`, []any{n}},
		{`INSERT INTO allocations (request_id, environment_id, pool, requester, client, started_at, expires_at, ended_at, ended_by)
			SELECT gen_random_uuid(), id, pool, 'suite-' || name, 'ci', now() - interval '3 hours', now(), now() - interval '2 hours', 'client'
			FROM environments WHERE id > (SELECT coalesce(max(id), 0) - ? FROM environments)`, []any{n}},
		{`INSERT INTO allocations (request_id, environment_id, pool, requester, client, expires_at)
			SELECT gen_random_uuid(), id, pool, 'holder-' || name, 'ci', now() + interval '1 hour'
			FROM environments WHERE status = 'in_use' AND id > (SELECT coalesce(max(id), 0) - ? FROM environments)`, []any{n}},
	} {
		_, err := db.Bun.ExecContext(ctx, st.sql, st.args...)
		require.NoError(t, err)
	}
}

// TestEnvironmentPagesQueryCountDoesNotGrowWithRows: the pages read what
// they show in a fixed number of queries, however many environments,
// allocations and dirty ones there are.
func TestEnvironmentPagesQueryCountDoesNotGrowWithRows(t *testing.T) {
	t.Parallel()
	b, counter := setupCounted(t)
	b.user(t, "vera@example.com", models.RoleViewer)
	br := b.browser(t)
	br.login(t, "vera@example.com")
	addSlots(t, b.db, 0, 6)

	pages := []string{"/environments", "/environments?pool=slots&page=2", "/environments?status=dirty&q=s-",
		"/environments/allocations", "/environments/allocations?requester=suite-s-1"}
	queries := func(path string) (int64, string) {
		before := counter.n.Load()
		status, body, _ := br.get(t, path)
		require.Equal(t, http.StatusOK, status, path)
		return counter.n.Load() - before, body
	}
	few := map[string]int64{}
	for _, p := range pages {
		queries(p) // caches warm up (the session, the signed-in user)
		few[p], _ = queries(p)
	}
	addSlots(t, b.db, 6, 300)
	for _, p := range pages {
		n, body := queries(p)
		require.Equal(t, few[p], n, "%s: %d queries with 6 environments, %d with 306", p, few[p], n)
		t.Logf("%s: %d queries", p, n)
		require.Contains(t, body, "s-1", "%s shows the rows", p)
	}
	_, body := queries("/environments")
	require.Equal(t, 102, strings.Count(body, `data-testid="dirty-row"`), "the dirty queue lists every dirty environment")
	require.Equal(t, 50, strings.Count(body, `data-testid="environment-row"`), "a page of the pool")
	require.Contains(t, body, "All 306 environments of slots")
	require.Contains(t, body, "cleanup failed: exit status 1")
}
