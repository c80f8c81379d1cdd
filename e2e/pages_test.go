package e2e

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPagesSignedIn signs an admin in through the login page and visits
// every page in web/routes.go, checking each shows what it is for and
// taking a screenshot of it.
func TestPagesSignedIn(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	admin := srv.createUser(t, "Ada Lovelace", "ada@example.com", "admin")
	page := newPage(t)

	open(t, page, srv.URL+"/", 200)
	require.NoError(t, expect.Page(page).ToHaveURL(srv.URL+"/login?next=%2F"), "an anonymous visitor is sent to sign in")
	require.NoError(t, expect.Locator(page.GetByTestId("login-form")).ToBeVisible())
	saveScreenshot(t, page, "page-login")
	signIn(t, page, srv.URL, admin)

	pages := []struct {
		path    string
		heading string // the page's h1
		testID  string // an element that shows the page does its job
		text    string // and data it must hold, if any
		shot    string
	}{
		{"/", "Hello, " + admin.Name, "area-cards", "Infrastructure", "page-overview"},
		{"/log", "Deployment log", "log-table", "user-logged-in", "page-log"},
		{"/infra", "Infrastructure", "empty-infra", "", "page-infra"},
		{"/environments", "Environments", "empty-environments", "", "page-environments"},
		{"/daemons", "Daemons", "empty-daemons", "", "page-daemons"},
		{"/modules", "Modules", "empty-modules", "", "page-modules"},
		{"/pipelines", "Pipelines", "empty-pipelines", "", "page-pipelines"},
		{"/approvals", "Approvals", "empty-approvals", "", "page-approvals"},
		{"/tokens", "API tokens", "token-form", "read", "page-tokens"},
		{"/admin", "Admin", "admin-users-link", "", "page-admin"},
		{"/admin/users", "Users", "users-table", admin.Email, "page-admin-users"},
		{"/admin/jobs", "Jobs", "job-states", "available", "page-admin-jobs"},
		{"/admin/tokens", "API tokens", "tokens-empty", "", "page-admin-tokens"},
	}
	for _, p := range pages {
		open(t, page, srv.URL+p.path, 200)
		require.NoError(t, expect.Locator(page.Locator("h1")).ToHaveText(p.heading), "%s: heading", p.path)
		el := page.GetByTestId(p.testID)
		require.NoError(t, expect.Locator(el).ToBeVisible(), "%s shows data-testid=%s", p.path, p.testID)
		require.NoError(t, expect.Locator(el).ToContainText(regexp.MustCompile(`\w`)), "%s: data-testid=%s is not blank", p.path, p.testID)
		if p.text != "" {
			require.NoError(t, expect.Locator(el).ToContainText(p.text), "%s: data-testid=%s holds %q", p.path, p.testID, p.text)
		}
		require.NoError(t, expect.Locator(page.GetByTestId("current-user")).ToContainText(admin.Name), "%s names who is signed in", p.path)
		saveScreenshot(t, page, p.shot)
	}
	// The admin's list of everyone's tokens offers no personal new-token form.
	open(t, page, srv.URL+"/admin/tokens", 200)
	require.NoError(t, expect.Locator(page.GetByTestId("token-form")).ToHaveCount(0), "/admin/tokens has no new-token form")
	require.NoError(t, expect.Locator(page.GetByTestId("all-tokens-lead")).ToBeVisible())

	// River UI, mounted for admins and linked from /admin. It is not ours,
	// so there is no data-testid: its job-state menu shows it works.
	open(t, page, srv.URL+"/admin", 200)
	require.NoError(t, page.GetByTestId("admin-river-link").Click())
	require.NoError(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`^`+regexp.QuoteMeta(srv.URL)+`/admin/river/`)))
	require.NoError(t, expect.Locator(page.GetByText("Job State")).ToBeVisible(), "River UI renders")
	saveScreenshot(t, page, "page-admin-river")

	// At phone width the pages still fit: nothing scrolls sideways except
	// inside the tables' own scrolling boxes.
	require.NoError(t, page.SetViewportSize(390, 844))
	for _, p := range []struct{ path, testID, shot string }{
		{"/", "area-cards", "phone-overview"},
		{"/log", "log-table", "phone-log"},
	} {
		open(t, page, srv.URL+p.path, 200)
		require.NoError(t, expect.Locator(page.GetByTestId(p.testID)).ToBeVisible())
		saveScreenshot(t, page, p.shot)
		overflow, err := page.Evaluate(`() => document.documentElement.scrollWidth - document.documentElement.clientWidth`)
		require.NoError(t, err)
		// Not fatal, so that every screenshot is still taken.
		assert.EqualValues(t, 0, overflow, "%s at 390px wide is wider than the screen: the whole page scrolls sideways by %vpx", p.path, overflow)
	}
}
