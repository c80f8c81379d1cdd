package e2e

import (
	"crypto/sha1"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLogTableFits fills the log with fifty entries shaped like the real
// ones (long event names, git SHAs, vote comments, lists of units) and
// checks, at the desktop widths people use, that the timeline fits its
// content area without a sideways scroll and that every row stays a line or
// two, with each entry's full detail one click away; on a phone the page
// does not scroll sideways either.
func TestLogTableFits(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "GANTRY_API_BURST=100") // fifty entries at once
	ada := srv.createUser(t, "Ada Lovelace", "ada@example.com", "admin")
	ci := srv.createUser(t, "CI", "ci-robot-with-a-long-name@example.com", "operator")
	token := srv.createToken(t, ci.Email, "e2e-ci", "read,write")

	events := []string{"execution-voted", "pull-request-plan-finished-successfully", "environment-cleanup-timed-out", "run-scanned", "execution-failed"}
	for i := range 50 {
		status, body := callAPI(t, http.MethodPost, srv.URL+"/api/v1/log", token, map[string]any{
			"deployment_id": fmt.Sprintf("infra-live-repository#%d", 1000+i),
			"target_id":     fmt.Sprintf("execution:%d/live/production/eu-west-1/networking/vpc", 4000+i),
			"revision":      fmt.Sprintf("%x", sha1.Sum([]byte{byte(i)})), // a git SHA
			"event":         events[i%len(events)],
			"detail": map[string]any{
				"comment":  strings.Repeat("The plan replaces the NAT gateway; I checked the routes with the network team. ", 4),
				"units":    []string{"live/production/eu-west-1/networking/vpc", "live/production/eu-west-1/networking/nat", "live/production/eu-west-1/dns"},
				"decision": "approve", "via": "link", "approvals": 2, "rejections": 0,
				"plan": map[string]any{"to_add": 3, "to_change": 1, "to_destroy": 1, "resources": []string{"aws_nat_gateway.main", "aws_route.private"}},
			},
		})
		require.Equal(t, http.StatusCreated, status, "POST /api/v1/log: %s", body)
	}

	page := newPage(t)
	signIn(t, page, srv.URL, ada)
	for _, width := range []int{1280, 1920} {
		require.NoError(t, page.SetViewportSize(width, 900))
		open(t, page, fmt.Sprintf("%s/log", srv.URL), 200)
		require.NoError(t, expect.Locator(page.GetByTestId("log-row")).ToHaveCount(50))
		requireTableFits(t, page, "log-table", width)
		requireFiltersInOneRow(t, page, width)
		saveScreenshot(t, page, fmt.Sprintf("log-fits-%d", width))

		// Part of an event name finds every event holding it; the filters,
		// now with Clear, still take one row.
		require.NoError(t, page.GetByTestId("log-filters").GetByLabel("Event").Fill("execution"))
		require.NoError(t, page.GetByTestId("log-filters").GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Filter"}).Click())
		require.NoError(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`event=execution`)))
		require.NoError(t, expect.Locator(page.GetByTestId("log-row")).ToHaveCount(20), "execution-voted and execution-failed, ten each")
		requireFiltersInOneRow(t, page, width)
		saveScreenshot(t, page, fmt.Sprintf("log-filtered-%d", width))

		open(t, page, srv.URL+"/", 200)
		require.NoError(t, expect.Locator(page.GetByTestId("log-row")).ToHaveCount(10))
		requireTableFits(t, page, "recent-activity", width)
		saveScreenshot(t, page, fmt.Sprintf("overview-recent-%d", width))
	}

	// The summary names the detail's keys; the whole JSON opens on demand.
	require.NoError(t, page.SetViewportSize(1280, 900))
	open(t, page, srv.URL+"/log", 200)
	first := page.GetByTestId("log-row").Filter(playwright.LocatorFilterOptions{HasText: "execution-voted"}).First()
	summary := first.GetByTestId("log-detail-summary")
	require.NoError(t, expect.Locator(summary).ToContainText("approvals: 2"))
	full := first.GetByTestId("log-detail-json")
	require.NoError(t, expect.Locator(full).Not().ToBeVisible())
	require.NoError(t, summary.Click())
	require.NoError(t, expect.Locator(full).ToBeVisible())
	require.NoError(t, expect.Locator(full).ToContainText(`"to_destroy": 1`))
	require.NoError(t, expect.Locator(full).ToContainText("I checked the routes with the network team."))
	saveScreenshot(t, page, "log-detail-open")
	fits, err := page.GetByTestId("log-table").Evaluate(`t => t.scrollWidth <= t.parentElement.clientWidth`, nil)
	require.NoError(t, err)
	require.Equal(t, true, fits, "an opened detail wraps inside its column instead of widening the table")

	// A phone shows each entry as a card, and nothing scrolls sideways.
	require.NoError(t, page.SetViewportSize(390, 844))
	open(t, page, srv.URL+"/log", 200)
	require.NoError(t, expect.Locator(page.GetByTestId("log-row").First()).ToBeVisible())
	saveScreenshot(t, page, "log-fits-phone")
	overflow, err := page.Evaluate(`() => document.documentElement.scrollWidth - document.documentElement.clientWidth`)
	require.NoError(t, err)
	require.EqualValues(t, 0, overflow, "/log at 390px scrolls sideways by %vpx", overflow)
	fits, err = page.GetByTestId("log-table").Evaluate(`t => t.scrollWidth <= t.parentElement.clientWidth`, nil)
	require.NoError(t, err)
	require.Equal(t, true, fits, "on a phone the entries are cards as wide as the screen")
	labelled, err := page.GetByTestId("log-row").First().Locator("td").First().Evaluate(`td => getComputedStyle(td, "::before").content`, nil)
	require.NoError(t, err)
	require.Contains(t, labelled, "When", "each card's fields are labelled")
}

// requireTableFits checks the table with data-testid id at the current
// width: no wider than the box it sits in, that box no wider than the
// content area, and every row at most two lines tall.
func requireTableFits(t *testing.T, page playwright.Page, id string, width int) {
	t.Helper()
	m, err := page.GetByTestId(id).Evaluate(`t => {
		const wrap = t.parentElement, content = t.closest(".content");
		const rows = [...t.querySelectorAll("tbody tr")].map(r => r.getBoundingClientRect().height);
		return {table: t.scrollWidth, wrap: wrap.clientWidth, wrapScroll: wrap.scrollWidth, content: content.clientWidth,
			tallest: Math.max(...rows), rows: rows.length, page: document.documentElement.scrollHeight};
	}`, nil)
	require.NoError(t, err)
	got := m.(map[string]any)
	num := func(k string) float64 {
		switch v := got[k].(type) {
		case int:
			return float64(v)
		case float64:
			return v
		}
		t.Fatalf("%s: %v is not a number", k, got[k])
		return 0
	}
	t.Logf("%s at %dpx: table %vpx in a %vpx box (content %vpx), %v rows, tallest %vpx, page %vpx tall",
		id, width, got["table"], got["wrap"], got["content"], got["rows"], got["tallest"], got["page"])
	assert.LessOrEqual(t, num("table"), num("wrap"), "%s at %dpx: the table is wider than its box", id, width)
	assert.LessOrEqual(t, num("wrapScroll"), num("wrap"), "%s at %dpx: the table's box scrolls sideways", id, width)
	assert.LessOrEqual(t, num("wrap"), num("content"), "%s at %dpx: the table's box is wider than the content area", id, width)
	// Two lines of text plus the cell padding.
	assert.LessOrEqual(t, num("tallest"), 60.0, "%s at %dpx: a row is taller than two lines", id, width)
}

// requireFiltersInOneRow checks that the log's filters sit on one row, every
// input and button the same height with its top at the same place, so no
// label sits higher than its neighbours and none wraps alone.
func requireFiltersInOneRow(t *testing.T, page playwright.Page, width int) {
	t.Helper()
	boxes, err := page.GetByTestId("log-filters").Evaluate(`f => [...f.querySelectorAll("input, button, a.button")].map(el => {
		const r = el.getBoundingClientRect();
		return (el.name || el.textContent.trim()) + " " + Math.round(r.top) + " " + Math.round(r.height);
	})`, nil)
	require.NoError(t, err)
	list := boxes.([]any)
	require.NotEmpty(t, list)
	_, first, _ := strings.Cut(list[0].(string), " ")
	for _, b := range list {
		name, at, _ := strings.Cut(b.(string), " ")
		assert.Equal(t, first, at, "at %dpx the filter %q is not on the row of the first one (top and height): %v", width, name, list)
	}
}
