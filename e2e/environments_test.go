package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/testdb"
)

// lease is one allocated environment as the API returns it.
type lease struct {
	ID          string `json:"id"`
	Environment string `json:"environment"`
	Database    string `json:"database"`
}

// TestEnvironmentPools runs a real gantry serve with a postgres pool of
// three databases from gantry.yaml and a pool whose cleanup always fails. A
// CI client leases through the API; the pages show the capacity, the
// environment, the history and the dirty queue, and an operator marks the
// dirty environment clean in the browser.
func TestEnvironmentPools(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	suffix := strings.ToLower(rand.Text()[:8])
	template := "e2e_tpl_" + suffix
	dbs := []string{"e2e_" + suffix + "_0", "e2e_" + suffix + "_1", "e2e_" + suffix + "_2"}
	fragile := "e2e_" + suffix + "_fragile"

	admin, err := pgx.Connect(ctx, testdb.AdminURL())
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(context.Background()) })
	_, err = admin.Exec(ctx, "CREATE DATABASE "+template)
	require.NoError(t, err)
	// Registered before the server starts, so it runs after the server stopped.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, db := range append(dbs, fragile, template) {
			if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
				t.Errorf("dropping %s: %v", db, err)
			}
		}
	})

	config := filepath.Join(t.TempDir(), "gantry.yaml")
	yaml := fmt.Sprintf(`clients:
  - name: ci
    users: [ci@example.com]
pools:
  - name: integration
    kind: postgres
    postgres: {admin_url_env: POOL_PG_URL}
  - name: fragile
    kind: postgres
    postgres: {admin_url_env: POOL_PG_URL, template: %s}
environments:
  - {pool: integration, database: %s, capabilities: {size: small}}
  - {pool: integration, database: %s, capabilities: {size: small}}
  - {pool: integration, database: %s, capabilities: {size: large, extensions: postgis}}
  - {pool: fragile, database: %s}
`, template, dbs[0], dbs[1], dbs[2], fragile)
	require.NoError(t, os.WriteFile(config, []byte(yaml), 0o600))

	srv := startServer(t, "GANTRY_CONFIG="+config, "POOL_PG_URL="+testdb.AdminURL())
	ada := srv.createUser(t, "Ada Lovelace", "ada@example.com", "admin")
	srv.createUser(t, "CI", "ci@example.com", "viewer")
	token := srv.createToken(t, "ci@example.com", "e2e-ci", "read,write")

	// The fragile pool's template goes away: its cleanups fail from now on.
	_, err = admin.Exec(ctx, "DROP DATABASE "+template+" WITH (FORCE)")
	require.NoError(t, err)

	allocate := func(pool, requester string, caps map[string]string) lease {
		t.Helper()
		body := map[string]any{"pool": pool, "requester": requester}
		if caps != nil {
			body["requirements"] = []map[string]any{{"capabilities": caps}}
		}
		status, out := callAPI(t, http.MethodPost, srv.URL+"/api/v1/allocations", token, body)
		require.Equal(t, http.StatusOK, status, "POST /api/v1/allocations: %s", out)
		res := decode[struct {
			Allocations []lease `json:"allocations"`
		}](t, out)
		require.Len(t, res.Allocations, 1)
		return res.Allocations[0]
	}
	release := func(l lease, outcome string) {
		t.Helper()
		status, out := callAPI(t, http.MethodDelete, srv.URL+"/api/v1/allocations/"+l.ID, token, map[string]string{"outcome": outcome})
		require.Equal(t, http.StatusOK, status, "DELETE /api/v1/allocations/%s: %s", l.ID, out)
	}

	// One lease is given back (and cleaned), one is held, and the fragile
	// pool's only environment turns dirty.
	done := allocate("integration", "nightly-suite-41", map[string]string{"size": "small"})
	release(done, "success")
	held := allocate("integration", "nightly-suite-42", map[string]string{"size": "large"})
	release(allocate("fragile", "flaky-suite-7", nil), "failure")

	page := newPage(t)
	signIn(t, page, srv.URL, ada)

	// The index: capacity pictures, the dirty queue, the tables.
	integration := page.Locator(`[data-testid=pool][data-pool=integration]`)
	deadline := time.Now().Add(conditionWait)
	for {
		open(t, page, srv.URL+"/environments", 200)
		dirtyRows, err := page.Locator(`[data-testid=dirty-row]`).Count()
		require.NoError(t, err)
		available, err := integration.GetByTestId("capacity-available").GetAttribute("data-count")
		require.NoError(t, err)
		if dirtyRows == 1 && available == "2" {
			break
		}
		require.True(t, time.Now().Before(deadline), "the given-back environment is never cleaned or the fragile one never turns dirty (%d dirty, %s available)", dirtyRows, available)
		time.Sleep(300 * time.Millisecond)
	}
	require.NoError(t, expect.Locator(page.Locator("h1")).ToHaveText("Environments"))
	inUse := integration.GetByTestId("capacity-in_use")
	require.NoError(t, expect.Locator(inUse).ToHaveAttribute("data-count", "1"), "one environment is in use")
	require.NoError(t, expect.Locator(inUse).ToContainText("in use 1"))
	require.NoError(t, expect.Locator(integration.Locator("svg.capbar")).ToHaveAttribute("aria-label", "3 environments: 2 available, 1 in use"))
	require.NoError(t, expect.Locator(integration.GetByTestId("utilization")).ToContainText(regexp.MustCompile(`at most [12] of 3 held in one hour`)))
	heldRow := integration.Locator(`[data-testid=environment-row][data-environment="` + held.Database + `"]`)
	require.NoError(t, expect.Locator(heldRow).ToContainText("nightly-suite-42"))
	require.NoError(t, expect.Locator(heldRow).ToContainText("size=large"))
	dirty := page.Locator(`[data-testid=dirty-row][data-environment="` + fragile + `"]`)
	require.NoError(t, expect.Locator(dirty).ToContainText("cleanup failed"))
	require.NoError(t, expect.Locator(dirty.GetByTestId("retry-cleanup")).ToBeVisible(), "an admin may act on it")
	saveScreenshot(t, page, "environments-index")

	// The held environment's page.
	require.NoError(t, heldRow.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: held.Database}).Click())
	require.NoError(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/environments/\d+$`)))
	require.NoError(t, expect.Locator(page.Locator("h1")).ToContainText(held.Database))
	require.NoError(t, expect.Locator(page.GetByTestId("environment-status")).ToHaveText("in use"))
	require.NoError(t, expect.Locator(page.GetByTestId("current-allocation")).ToContainText("nightly-suite-42"))
	require.NoError(t, expect.Locator(page.GetByTestId("current-allocation")).ToContainText(held.ID))
	require.NoError(t, expect.Locator(page.GetByTestId("environment-log")).ToContainText("environment-allocated"))
	saveScreenshot(t, page, "environment-held")
	heldURL := page.URL()

	// The cleaned environment's page shows its cleanup output and history.
	open(t, page, srv.URL+"/environments?q="+done.Database, 200)
	require.NoError(t, page.Locator(`[data-testid=environment-row] a`).First().Click())
	require.NoError(t, expect.Locator(page.GetByTestId("cleanup-output")).ToContainText("recreating database "+done.Database))
	require.NoError(t, expect.Locator(page.GetByTestId("history-row")).ToContainText("nightly-suite-41"))
	require.NoError(t, expect.Locator(page.GetByTestId("environment-log")).ToContainText("environment-cleaned"))
	saveScreenshot(t, page, "environment-cleaned")

	// History: which environments did a requester hold?
	require.NoError(t, page.GetByTestId("history-row").GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "nightly-suite-41"}).Click())
	require.NoError(t, expect.Locator(page.Locator("h1")).ToHaveText("Allocation history"))
	require.NoError(t, expect.Locator(page.GetByTestId("history-row")).ToHaveCount(1))
	require.NoError(t, expect.Locator(page.GetByTestId("history-row")).ToContainText(done.Database))
	// …and which requesters held an environment in the last 3 months?
	open(t, page, srv.URL+"/environments/allocations", 200)
	require.NoError(t, expect.Locator(page.GetByTestId("history-row")).ToHaveCount(3))
	_, err = page.Locator(`select[name=environment]`).SelectOption(playwright.SelectOptionValues{Labels: &[]string{held.Database + " (integration)"}})
	require.NoError(t, err)
	_, err = page.Locator(`select[name=since]`).SelectOption(playwright.SelectOptionValues{Values: &[]string{"90d"}})
	require.NoError(t, err)
	require.NoError(t, page.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Filter"}).Click())
	require.NoError(t, expect.Locator(page.GetByTestId("history-row")).ToHaveCount(1))
	require.NoError(t, expect.Locator(page.GetByTestId("history-row")).ToContainText("nightly-suite-42"))
	require.NoError(t, expect.Locator(page.GetByTestId("history-summary")).ToContainText("in the last 3 months"))
	saveScreenshot(t, page, "environments-history")

	// At phone width the pages fit the screen.
	require.NoError(t, page.SetViewportSize(390, 844))
	for _, p := range []struct{ url, shot string }{
		{srv.URL + "/environments", "phone-environments"},
		{heldURL, "phone-environment"},
		{srv.URL + "/environments/allocations", "phone-environments-history"},
	} {
		open(t, page, p.url, 200)
		saveScreenshot(t, page, p.shot)
		overflow, err := page.Evaluate(`() => document.documentElement.scrollWidth - document.documentElement.clientWidth`)
		require.NoError(t, err)
		assert.EqualValues(t, 0, overflow, "%s at 390px wide scrolls sideways by %vpx", p.url, overflow)
	}
	require.NoError(t, page.SetViewportSize(desktopWidth, desktopHeight))

	// The dirty environment's page says what happened and what to do.
	open(t, page, srv.URL+"/environments", 200)
	require.NoError(t, dirty.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: fragile}).Click())
	require.NoError(t, expect.Locator(page.GetByTestId("environment-status")).ToHaveText("dirty"))
	require.NoError(t, expect.Locator(page.GetByTestId("dirty-panel").GetByTestId("mark-clean")).ToBeVisible())
	require.NoError(t, expect.Locator(page.GetByTestId("cleanup-output")).ToContainText("does not exist"))
	require.NoError(t, expect.Locator(page.GetByTestId("history-row")).ToContainText("failure"))
	saveScreenshot(t, page, "environment-dirty")

	// An operator marks it clean from the dirty queue, after confirming.
	open(t, page, srv.URL+"/environments", 200)
	page.OnDialog(func(d playwright.Dialog) { _ = d.Accept() })
	require.NoError(t, dirty.GetByTestId("mark-clean").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Marked "+fragile+" clean"))
	require.NoError(t, expect.Locator(page.GetByTestId("dirty-empty")).ToBeVisible())
	fragilePool := page.Locator(`[data-testid=pool][data-pool=fragile]`)
	require.NoError(t, expect.Locator(fragilePool.GetByTestId("capacity-available")).ToHaveAttribute("data-count", "1"))
	open(t, page, srv.URL+"/log?target=environment:postgres:"+fragile, 200)
	require.NoError(t, expect.Locator(page.GetByTestId("log-table")).ToContainText("environment-marked-clean"))
	require.NoError(t, expect.Locator(page.GetByTestId("log-table")).ToContainText("user:"+ada.Email))
}
