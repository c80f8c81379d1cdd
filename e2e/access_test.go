package e2e

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWrongPasswordAndRateLimit: a failed sign-in says nothing about which
// half was wrong, and once GANTRY_LOGIN_ATTEMPTS sign-ins have failed for an
// account even the right password is refused for a while, with a message
// saying what is blocked and until when; other accounts from the same
// address are not blocked.
func TestWrongPasswordAndRateLimit(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "GANTRY_LOGIN_ATTEMPTS=3")
	ada := srv.createUser(t, "Ada Lovelace", "ada@example.com", "admin")
	grace := srv.createUser(t, "Grace Hopper", "grace@example.com", "viewer")
	page := newPage(t)
	loginError := page.GetByTestId("login-error")

	failLogin := func(email, password string) string {
		t.Helper()
		require.Equal(t, http.StatusUnauthorized, submitLogin(t, page, srv.URL, email, password), "sign-in as %s with a wrong password", email)
		require.NoError(t, expect.Locator(loginError).ToBeVisible())
		msg, err := loginError.TextContent()
		require.NoError(t, err)
		require.NoError(t, expect.Locator(page.GetByTestId("current-user")).ToHaveCount(0), "not signed in")
		return msg
	}

	// Failures 1 and 2: a wrong password and an unknown email read the same.
	open(t, page, srv.URL+"/login", http.StatusOK)
	wrongPassword := failLogin(ada.Email, "not-the-password-at-all")
	require.Contains(t, wrongPassword, "Email or password is incorrect")
	saveScreenshot(t, page, "login-wrong-password")
	require.Equal(t, wrongPassword, failLogin("nobody@example.com", ada.Password),
		"an unknown email gets the same message as a wrong password")

	// Below the limit the right password still works (in a browser of its own).
	signIn(t, newPage(t), srv.URL, ada)

	// Failures 3 and 4 reach ada's limit (the unknown email was another
	// account): now even her right password is refused.
	failLogin(ada.Email, "still-not-the-password")
	failLogin(ada.Email, "not-it-either-sorry")
	status := submitLogin(t, page, srv.URL, ada.Email, ada.Password)
	require.Equal(t, http.StatusTooManyRequests, status, "sign-in with the right password after 3 failures")
	require.NoError(t, expect.Locator(loginError).ToHaveText(
		regexp.MustCompile(`Too many failed sign-ins for this account: it is blocked until (\d{4}-\d\d-\d\d )?\d\d:\d\d UTC\.`)))
	require.NoError(t, expect.Locator(page.GetByTestId("current-user")).ToHaveCount(0), "not signed in")
	require.NoError(t, expect.Page(page).ToHaveURL(srv.URL+"/login"))
	saveScreenshot(t, page, "login-rate-limited")

	// Grace, from the same address, is not locked out by ada's failures.
	signIn(t, newPage(t), srv.URL, grace)
}

// TestViewerForbidden: a viewer can read but not administer, in the browser
// and through the API.
func TestViewerForbidden(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	vic := srv.createUser(t, "Vic Viewer", "vic@example.com", "viewer")
	page := newPage(t)
	signIn(t, page, srv.URL, vic)

	require.NoError(t, expect.Locator(page.Locator(`nav a[href="/admin"]`)).ToHaveCount(0), "a viewer is not offered the admin pages")
	open(t, page, srv.URL+"/admin/river/", http.StatusForbidden)
	require.NoError(t, expect.Locator(page.GetByTestId("error-page")).ToContainText("admin role"), "River UI is for admins only")
	open(t, page, srv.URL+"/admin/users", http.StatusForbidden)
	errPage := page.GetByTestId("error-page")
	require.NoError(t, expect.Locator(errPage).ToContainText("403"))
	require.NoError(t, expect.Locator(errPage).ToContainText("Not allowed"))
	require.NoError(t, expect.Locator(errPage).ToContainText("admin role"))
	require.NoError(t, expect.Locator(page.GetByTestId("users-table")).ToHaveCount(0))
	saveScreenshot(t, page, "viewer-forbidden")

	// Reading is fine; writing to the log needs the operator role, whatever
	// scopes the token carries.
	token := srv.createToken(t, vic.Email, "e2e-viewer", "read,write")
	status, body := callAPI(t, http.MethodGet, srv.URL+"/api/v1/log", token, nil)
	require.Equal(t, http.StatusOK, status, "GET /api/v1/log as a viewer: %s", body)
	status, body = callAPI(t, http.MethodPost, srv.URL+"/api/v1/log", token, map[string]string{
		"target_id": "e2e-target", "event": "e2e-event", "revision": "r1",
	})
	require.Equal(t, http.StatusForbidden, status, "POST /api/v1/log as a viewer: %s", body)
	apiErr := decode[apiErrorBody](t, body)
	require.Equal(t, "forbidden", apiErr.Error.Code, "body: %s", body)
	require.NotEmpty(t, apiErr.Error.Message, "body: %s", body)

	// Nothing was written.
	status, body = callAPI(t, http.MethodGet, srv.URL+"/api/v1/log?event=e2e-event", token, nil)
	require.Equal(t, http.StatusOK, status, "body: %s", body)
	require.Empty(t, decode[struct {
		Entries []any `json:"entries"`
	}](t, body).Entries, "a refused append writes nothing")
}
