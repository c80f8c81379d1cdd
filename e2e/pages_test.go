package e2e

import (
	"testing"

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
		path   string
		testID string // an element that shows the page is what it should be
		text   string // and a text it holds, if any
		shot   string
	}{
		{"/", "area-cards", "Infrastructure", "page-overview"},
		{"/log", "log-table", "user-logged-in", "page-log"},
		{"/infra", "empty-infra", "No repositories connected yet", "page-infra"},
		{"/environments", "empty-environments", "No pools registered yet", "page-environments"},
		{"/daemons", "empty-daemons", "No daemon environments yet", "page-daemons"},
		{"/modules", "empty-modules", "No modules deployed yet", "page-modules"},
		{"/pipelines", "empty-pipelines", "No pipelines defined yet", "page-pipelines"},
		{"/approvals", "empty-approvals", "Nothing is waiting for your vote", "page-approvals"},
		{"/tokens", "token-form", "", "page-tokens"},
		{"/admin", "admin-users-link", "Users", "page-admin"},
		{"/admin/users", "users-table", admin.Email, "page-admin-users"},
		{"/admin/jobs", "job-states", "available", "page-admin-jobs"},
		{"/admin/tokens", "tokens-empty", "No tokens yet", "page-admin-tokens"},
	}
	for _, p := range pages {
		open(t, page, srv.URL+p.path, 200)
		el := page.GetByTestId(p.testID)
		require.NoError(t, expect.Locator(el).ToBeVisible(), "%s shows data-testid=%s", p.path, p.testID)
		if p.text != "" {
			require.NoError(t, expect.Locator(el).ToContainText(p.text), "%s: data-testid=%s holds %q", p.path, p.testID, p.text)
		}
		require.NoError(t, expect.Locator(page.GetByTestId("current-user")).ToContainText(admin.Name), "%s names who is signed in", p.path)
		saveScreenshot(t, page, p.shot)
	}

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
		require.EqualValues(t, 0, overflow, "%s at 390px wide scrolls sideways by %vpx", p.path, overflow)
	}
}
