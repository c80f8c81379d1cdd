package web_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/models"
	envview "github.com/gantryhq/gantry/views/pages/environments"
)

// legendCount reads a capacity legend entry of a page showing one pool.
func legendCount(t *testing.T, body, state string) int {
	t.Helper()
	m := regexp.MustCompile(`data-testid="capacity-` + state + `" data-count="(\d+)"`).FindStringSubmatch(body)
	require.NotNil(t, m, "no legend entry for %s", state)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

var historyRowRe = regexp.MustCompile(`data-testid="history-row" data-allocation="([0-9a-f-]{36})"`)

// historyRows lists the allocation ids of a history table, in page order.
func historyRows(body string) []string {
	var ids []string
	for _, m := range historyRowRe.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

var olderRe = regexp.MustCompile(`href="([^"]+)" data-testid="page-older"`)

func (b *bundle) environment(t *testing.T, key string) *models.Environment {
	t.Helper()
	envs, err := models.ListEnvironments(context.Background(), b.db.Bun, models.EnvironmentFilter{WithDeregistered: true})
	require.NoError(t, err)
	for i := range envs {
		if envs[i].Key == key {
			return &envs[i]
		}
	}
	t.Fatalf("no environment %s", key)
	return nil
}

func (b *bundle) logEvents(t *testing.T, target string) map[string]string {
	t.Helper()
	entries, err := models.ListLog(context.Background(), b.db.Bun, models.LogFilter{Target: target, Limit: 100})
	require.NoError(t, err)
	out := map[string]string{} // event → actor of its newest entry
	for i := len(entries) - 1; i >= 0; i-- {
		out[entries[i].Event] = entries[i].Actor
	}
	return out
}

func TestEnvironmentPagesEmptyInstallation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, "vera@example.com", models.RoleViewer)
	br := b.browser(t)
	br.login(t, "vera@example.com")

	status, body, _ := br.get(t, "/environments")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `data-testid="empty-environments"`)
	require.Contains(t, body, "gantry config apply")
	require.Contains(t, body, "docs/areas/environments.md")
	require.Contains(t, body, html.EscapeString("postgres: {admin_url_env: POOL_PG_URL}"), "a gantry.yaml example to start from")
	require.NotContains(t, body, `data-testid="dirty-queue"`)

	t.Run("the example gantry.yaml is valid", func(t *testing.T) {
		f, err := gantryfile.Parse("gantry.yaml", []byte(envview.ExampleConfig), func(string) (string, bool) { return "x", true })
		require.NoError(t, err)
		require.Len(t, f.Pools, 2)
		require.Len(t, f.Environments, 3)
	})
	t.Run("the history explains what will appear", func(t *testing.T) {
		status, body, _ := br.get(t, "/environments/allocations")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, body, `data-testid="history-empty"`)
		require.Contains(t, body, "POST /api/v1/allocations")
	})
	t.Run("an unknown environment is 404", func(t *testing.T) {
		status, _, _ := br.get(t, "/environments/999999")
		require.Equal(t, http.StatusNotFound, status)
	})
	t.Run("anonymous visitors are sent to sign in", func(t *testing.T) {
		status, _, _ := b.browser(t).get(t, "/environments")
		require.Equal(t, http.StatusSeeOther, status)
	})
}

func TestEnvironmentPagesWithPools(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorkers(t)
	dbs := b.applyPools(t,
		poolSpec{Name: "pg", Size: 3, Caps: func(i int) string { return fmt.Sprintf("{size: %s}", []string{"small", "small", "large"}[i]) }},
		poolSpec{Name: "other", Size: 1})
	token := b.ciToken(t)
	b.user(t, "vera@example.com", models.RoleViewer)
	br := b.browser(t)
	br.login(t, "vera@example.com")

	res, body := b.call(t, "POST", "/allocations", token, `{"pool":"pg","requester":"suite-1","requirements":[{"capabilities":{"size":"large"}}]}`)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	held := decodeAllocation(t, body).Allocations[0]
	require.Equal(t, dbs["pg"][2], held.Database)
	env := b.environment(t, held.Environment)

	t.Run("the home page's environments card counts the pools and what is in use", func(t *testing.T) {
		status, page, _ := br.get(t, "/")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, page, "2 pools · 1 of 4 environments in use")
	})

	t.Run("the index shows each pool's capacity, utilisation and environments", func(t *testing.T) {
		status, page, _ := br.get(t, "/environments?pool=pg")
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, 1, legendCount(t, page, "in_use"))
		require.Equal(t, 2, legendCount(t, page, "available"))
		for _, st := range []string{"cleaning", "dirty", "deregistering"} {
			require.Zero(t, legendCount(t, page, st), st)
		}
		require.Contains(t, page, `aria-label="3 environments: 2 available, 1 in use"`)
		require.Contains(t, page, "at most 1 of 3 held in one hour", "the sparkline counts the allocation")
		require.Regexp(t, `<polyline class="spark-line" points="[0-9., ]+"`, page)
		row := regexp.MustCompile(`(?s)data-environment="` + held.Database + `" data-status="in use">.*?</tr>`).FindString(page)
		require.NotEmpty(t, row, "the held environment is listed")
		require.Contains(t, row, "suite-1", "with its requester")
		require.Contains(t, row, "size=large", "and its capabilities")
		require.Contains(t, row, `href="/environments/`+strconv.FormatInt(env.ID, 10)+`"`)
		require.Contains(t, page, `data-testid="dirty-empty"`, "the dirty queue says it is empty")
		require.NotContains(t, page, `data-pool="other"`, "the pool filter shows one pool")

		status, all, _ := br.get(t, "/environments")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, all, `data-pool="pg"`)
		require.Contains(t, all, `data-pool="other"`)
	})
	t.Run("the index filters by status and name", func(t *testing.T) {
		_, page, _ := br.get(t, "/environments?status=in_use")
		require.Equal(t, 1, strings.Count(page, `data-testid="environment-row"`))
		_, page, _ = br.get(t, "/environments?q=SIZE%3Dsmall")
		require.Equal(t, 2, strings.Count(page, `data-testid="environment-row"`))
		status, _, _ := br.get(t, "/environments?status=melted")
		require.Equal(t, http.StatusBadRequest, status)
		status, _, _ = br.get(t, "/environments?pool=nope")
		require.Equal(t, http.StatusBadRequest, status)
	})
	t.Run("the environment page shows its allocation and log", func(t *testing.T) {
		status, page, _ := br.get(t, "/environments/"+strconv.FormatInt(env.ID, 10))
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, page, `data-testid="current-allocation"`)
		require.Contains(t, page, "suite-1")
		require.Contains(t, page, held.ID)
		require.Contains(t, page, "environment-allocated", "its log slice")
		require.Contains(t, page, "environment-registered")
		require.Equal(t, 1, len(historyRows(page)))
		require.NotContains(t, page, `http-equiv="refresh"`, "nothing to follow while it is in use")
	})

	res, body = b.call(t, "DELETE", "/allocations/"+held.ID, token, `{"outcome":"success"}`)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	b.WaitEnvironment(t, held.Environment, models.EnvAvailable)

	t.Run("after release the page shows the cleanup output and the ended allocation", func(t *testing.T) {
		_, page, _ := br.get(t, "/environments/"+strconv.FormatInt(env.ID, 10))
		require.Contains(t, page, `data-testid="cleanup-output"`)
		require.Contains(t, page, "recreating database "+held.Database)
		require.Contains(t, page, `data-testid="no-allocation"`)
		require.Contains(t, page, "environment-cleaned")
		require.Contains(t, page, "success")
	})

	// More history: suite-2 holds two environments at once, and an
	// allocation of suite-1 from four months ago.
	res, body = b.call(t, "POST", "/allocations", token, `{"pool":"pg","requester":"suite-2","requirements":[{},{}]}`)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	_, err := b.db.Pool.Exec(context.Background(), `INSERT INTO allocations (request_id, environment_id, pool, requester, client, started_at, expires_at, ended_at, ended_by, outcome)
		VALUES (gen_random_uuid(), $1, 'pg', 'suite-1', 'ci', now() - interval '120 days', now() - interval '119 days', now() - interval '119 days', 'client', 'failure')`, env.ID)
	require.NoError(t, err)

	t.Run("history answers which requesters held an environment", func(t *testing.T) {
		id := strconv.FormatInt(env.ID, 10)
		_, page, _ := br.get(t, "/environments/allocations?environment="+id)
		require.Len(t, historyRows(page), 2, "suite-1 now and four months ago")
		_, page, _ = br.get(t, "/environments/allocations?environment="+id+"&since=90d")
		require.Len(t, historyRows(page), 1, "the last 3 months")
		require.Contains(t, page, "1 allocation of "+held.Database+", started in the last 3 months")
		_, page, _ = br.get(t, "/environments/allocations?environment="+id+"&since=180d")
		require.Len(t, historyRows(page), 2, "the last 6 months")
		_, page, _ = br.get(t, "/environments/"+id+"?since=90d")
		require.Len(t, historyRows(page), 1, "the environment page filters its history too")
	})
	t.Run("history answers which environments a requester held", func(t *testing.T) {
		_, page, _ := br.get(t, "/environments/allocations?requester=suite-2")
		require.Len(t, historyRows(page), 2)
		require.Contains(t, page, dbs["pg"][0])
		require.Contains(t, page, dbs["pg"][1])
		_, page, _ = br.get(t, "/environments/allocations?requester=suite-1&since=30d")
		require.Len(t, historyRows(page), 1)
		_, page, _ = br.get(t, "/environments/allocations?pool=other")
		require.Empty(t, historyRows(page))
		require.Contains(t, page, `data-testid="history-empty"`)
		_, page, _ = br.get(t, "/environments/allocations")
		require.Len(t, historyRows(page), 4)
	})
	t.Run("bad history filters are 400", func(t *testing.T) {
		for _, q := range []string{"since=fortnight", "environment=x", "before=garbage"} {
			status, _, _ := br.get(t, "/environments/allocations?"+q)
			require.Equal(t, http.StatusBadRequest, status, q)
		}
	})
	t.Run("history pages through allocations that started together", func(t *testing.T) {
		// 60 ended allocations of one request share their start time.
		_, err := b.db.Pool.Exec(context.Background(), `INSERT INTO allocations (request_id, environment_id, pool, requester, client, started_at, expires_at, ended_at, ended_by)
			SELECT '00000000-0000-0000-0000-000000000001', $1, 'other', 'bulk', 'ci', now() - interval '1 day', now(), now() - interval '1 hour', 'client'
			FROM generate_series(1, 60)`, b.environment(t, "postgres:"+dbs["other"][0]).ID)
		require.NoError(t, err)
		seen := map[string]bool{}
		next := "/environments/allocations?requester=bulk"
		pages := 0
		for next != "" {
			_, page, _ := br.get(t, next)
			pages++
			for _, id := range historyRows(page) {
				require.False(t, seen[id], "allocation %s on two pages", id)
				seen[id] = true
			}
			next = ""
			if m := olderRe.FindStringSubmatch(page); m != nil {
				next = html.UnescapeString(m[1])
			}
		}
		require.Len(t, seen, 60)
		require.Equal(t, 2, pages)
	})
}

// makeDirtyPool registers pool "fragile" of one database made from a
// template, then drops the template: every cleanup of it fails.
func (b *bundle) makeDirtyPool(t *testing.T) (database string) {
	t.Helper()
	ctx := context.Background()
	suffix := strings.ToLower(rand.Text()[:8])
	template, database := "gtest_tpl_"+suffix, "gtest_"+suffix+"_fragile_0"
	conn, err := pgx.Connect(ctx, testdb.AdminURL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+template)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, testdb.AdminURL())
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		for _, db := range []string{database, template} {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
		}
	})
	b.sync(t, "clients:\n  - name: ci\n    users: [ci@example.com]\npools:\n"+
		"  - name: fragile\n    kind: postgres\n    postgres: {admin_url_env: POOL_PG_URL, template: "+template+"}\n"+
		"environments:\n  - {pool: fragile, database: "+database+"}\n")
	_, err = conn.Exec(ctx, "DROP DATABASE "+template+" WITH (FORCE)")
	require.NoError(t, err)
	return database
}

func TestDirtyEnvironmentActions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorkers(t)
	database := b.makeDirtyPool(t)
	key := "postgres:" + database
	token := b.ciToken(t)

	res, body := b.call(t, "POST", "/allocations", token, `{"pool":"fragile","requester":"suite-9"}`)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	lease := decodeAllocation(t, body).Allocations[0]
	res, body = b.call(t, "DELETE", "/allocations/"+lease.ID, token, `{"outcome":"failure"}`)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	env := b.WaitEnvironment(t, key, models.EnvDirty)
	envURL := "/environments/" + strconv.FormatInt(env.ID, 10)

	b.user(t, "vera@example.com", models.RoleViewer)
	viewer := b.browser(t)
	viewer.login(t, "vera@example.com")
	b.user(t, "otto@example.com", models.RoleOperator)
	operator := b.browser(t)
	operator.login(t, "otto@example.com")

	t.Run("the dirty environment is in the dirty queue with its cleanup output", func(t *testing.T) {
		status, page, _ := viewer.get(t, "/environments")
		require.Equal(t, http.StatusOK, status)
		row := regexp.MustCompile(`(?s)data-testid="dirty-row" data-environment="` + database + `">.*?</tr>`).FindString(page)
		require.NotEmpty(t, row)
		require.Contains(t, row, "cleanup failed:")
		require.Contains(t, row, "failed: ", "the end of the cleanup output")
		require.NotContains(t, row, `data-testid="retry-cleanup"`, "viewers get no buttons")
		require.Equal(t, 1, legendCount(t, page, "dirty"))

		_, page, _ = operator.get(t, "/environments")
		row = regexp.MustCompile(`(?s)data-testid="dirty-row".*?</tr>`).FindString(page)
		require.Contains(t, row, `data-testid="retry-cleanup"`)
		require.Contains(t, row, `data-testid="mark-clean"`)

		_, page, _ = viewer.get(t, envURL)
		require.Contains(t, page, `data-testid="dirty-panel"`)
		require.Contains(t, page, "recreating database "+database)
	})
	t.Run("viewers may not act", func(t *testing.T) {
		_, _, csrf := viewer.get(t, envURL)
		for _, action := range []string{"retry-cleanup", "mark-clean"} {
			res, _ := viewer.post(t, envURL+"/"+action, url.Values{"_csrf": {csrf}})
			require.Equal(t, http.StatusForbidden, res.StatusCode, action)
		}
		require.Equal(t, models.EnvDirty, b.environment(t, key).Status)
	})
	t.Run("an operator retries the cleanup", func(t *testing.T) {
		_, _, csrf := operator.get(t, envURL)
		res, _ := operator.post(t, envURL+"/retry-cleanup", url.Values{"_csrf": {csrf}, "next": {"/environments"}})
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		require.Equal(t, "/environments", res.Header.Get("Location"))
		require.Equal(t, "user:otto@example.com", b.logEvents(t, "environment:"+key)["environment-cleanup-retried"])
		_, page, _ := operator.get(t, "/environments")
		require.Contains(t, page, "Cleaning "+database+" again")
		// The template is still missing: the retry fails too.
		b.WaitEnvironment(t, key, models.EnvDirty)
	})
	t.Run("the page refreshes itself while cleaning", func(t *testing.T) {
		_, err := b.db.Pool.Exec(context.Background(), "UPDATE environments SET status = 'cleaning' WHERE id = $1 AND status = 'dirty'", env.ID)
		require.NoError(t, err)
		_, page, _ := viewer.get(t, envURL)
		require.Contains(t, page, `<meta http-equiv="refresh" content="3">`)
		require.Contains(t, page, `data-testid="cleanup-live"`)
		_, err = b.db.Pool.Exec(context.Background(), "UPDATE environments SET status = 'dirty' WHERE id = $1", env.ID)
		require.NoError(t, err)
	})
	t.Run("an operator marks it clean", func(t *testing.T) {
		_, _, csrf := operator.get(t, envURL)
		res, _ := operator.post(t, envURL+"/mark-clean", url.Values{"_csrf": {csrf}})
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		require.Equal(t, envURL, res.Header.Get("Location"))
		require.Equal(t, models.EnvAvailable, b.environment(t, key).Status)
		require.Equal(t, "user:otto@example.com", b.logEvents(t, "environment:"+key)["environment-marked-clean"])
		_, page, _ := operator.get(t, envURL)
		require.Contains(t, page, "Marked "+database+" clean")
		require.NotContains(t, page, `data-testid="dirty-panel"`)
		_, page, _ = operator.get(t, "/environments")
		require.Contains(t, page, `data-testid="dirty-empty"`)
	})
	t.Run("acting on an environment that is not dirty says so", func(t *testing.T) {
		_, _, csrf := operator.get(t, envURL)
		res, _ := operator.post(t, envURL+"/retry-cleanup", url.Values{"_csrf": {csrf}})
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		_, page, _ := operator.get(t, envURL)
		require.Contains(t, page, "not dirty")
		require.Contains(t, page, `class="flash bad"`)
		res, _ = operator.post(t, "/environments/999999/mark-clean", url.Values{"_csrf": {csrf}})
		require.Equal(t, http.StatusNotFound, res.StatusCode)
	})
}

// TestARemovedPoolsHeldEnvironmentsAreStillListed: removing a pool from
// gantry.yaml while one of its environments is leased leaves that
// environment deregistering until the lease ends; the index still lists it,
// under its pool, which says it was removed.
func TestARemovedPoolsHeldEnvironmentsAreStillListed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dbs := b.applyPools(t, poolSpec{Name: "gone", Size: 2})
	token := b.ciToken(t)
	res, body := b.call(t, "POST", "/allocations", token, `{"pool":"gone","requester":"suite-9","requirements":[{}]}`)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	held := decodeAllocation(t, body).Allocations[0]

	b.Sync(t, "clients:\n  - name: ci\n    users: [ci@example.com]\n")
	b.WaitEnvironment(t, held.Environment, models.EnvInUse)

	b.user(t, "vera@example.com", models.RoleViewer)
	br := b.browser(t)
	br.login(t, "vera@example.com")
	status, page, _ := br.get(t, "/environments")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, `data-testid="pool-removed"`)
	require.Contains(t, page, "Removed from gantry.yaml")
	require.Contains(t, page, held.Database, "the held environment is listed")
	free := dbs["gone"][0]
	if free == held.Database {
		free = dbs["gone"][1]
	}
	require.NotContains(t, page, free, "the free one left at once")
	_, page, _ = br.get(t, "/environments?status=deregistering")
	require.Contains(t, page, held.Database)
}
