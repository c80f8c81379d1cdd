package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/require"
)

// TestTokenLifecycle creates an API token on the tokens page, uses it from
// outside the browser, revokes it on the page, and sees it refused.
func TestTokenLifecycle(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ada := srv.createUser(t, "Ada Lovelace", "ada@example.com", "admin")
	page := newPage(t)
	signIn(t, page, srv.URL, ada)

	open(t, page, srv.URL+"/tokens", 200)
	require.NoError(t, expect.Locator(page.GetByTestId("tokens-empty")).ToBeVisible())
	require.NoError(t, page.Locator("#token-name").Fill("e2e-ci"))
	read := page.Locator(`[data-testid=token-form] input[name=scopes][value=read]`)
	require.NoError(t, expect.Locator(read).ToBeChecked(), "the read scope is checked by default")
	require.NoError(t, page.GetByTestId("token-create").Click())

	require.NoError(t, expect.Locator(page.GetByTestId("new-token")).ToContainText("e2e-ci"))
	secret, err := page.GetByTestId("new-token-secret").TextContent()
	require.NoError(t, err)
	secret = strings.TrimSpace(secret)
	require.NotEmpty(t, secret)
	row := page.Locator(`[data-testid=token-row][data-token-name="e2e-ci"]`)
	require.NoError(t, expect.Locator(row).ToContainText("active"))
	require.NoError(t, expect.Locator(row).ToContainText("read"))
	saveScreenshot(t, page, "tokens-created")

	// The token works from outside the browser, as its owner.
	status, body := callAPI(t, http.MethodGet, srv.URL+"/api/v1/me", secret, nil)
	require.Equal(t, http.StatusOK, status, "GET /api/v1/me: %s", body)
	me := decode[struct {
		User struct {
			Email string `json:"email"`
			Name  string `json:"name"`
			Role  string `json:"role"`
		} `json:"user"`
		Token struct {
			Name   string   `json:"name"`
			Scopes []string `json:"scopes"`
		} `json:"token"`
	}](t, body)
	require.Equal(t, ada.Email, me.User.Email)
	require.Equal(t, ada.Name, me.User.Name)
	require.Equal(t, "admin", me.User.Role)
	require.Equal(t, "e2e-ci", me.Token.Name)
	require.Equal(t, []string{"read"}, me.Token.Scopes)

	status, body = callAPI(t, http.MethodGet, srv.URL+"/api/v1/log", secret, nil)
	require.Equal(t, http.StatusOK, status, "GET /api/v1/log: %s", body)
	log := decode[struct {
		Entries []struct {
			Event  string `json:"event"`
			Actor  string `json:"actor"`
			Detail struct {
				Name string `json:"name"`
			} `json:"detail"`
		} `json:"entries"`
	}](t, body)
	var created, loggedIn bool
	for _, e := range log.Entries {
		created = created || (e.Event == "token-created" && e.Actor == "user:"+ada.Email && e.Detail.Name == "e2e-ci")
		loggedIn = loggedIn || (e.Event == "user-logged-in" && e.Actor == "user:"+ada.Email)
	}
	require.True(t, created, "the log names %s as creator of the token: %s", ada.Email, body)
	require.True(t, loggedIn, "the log names %s signing in: %s", ada.Email, body)

	// Revoking asks for confirmation first.
	dialogs := make(chan string, 1)
	page.OnDialog(func(d playwright.Dialog) {
		select {
		case dialogs <- d.Message():
		default:
		}
		_ = d.Accept()
	})
	require.NoError(t, row.GetByTestId("token-revoke").Click())
	select {
	case msg := <-dialogs:
		require.Contains(t, msg, "Revoke this token?")
	case <-time.After(browserWait):
		t.Fatal("revoking did not ask for confirmation (data-confirm)")
	}
	require.NoError(t, expect.Page(page).ToHaveURL(srv.URL+"/tokens"))
	require.NoError(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Token revoked"))
	require.NoError(t, expect.Locator(row).ToContainText("revoked"))
	require.NoError(t, expect.Locator(row.GetByTestId("token-revoke")).ToHaveCount(0), "a revoked token has no revoke button")
	saveScreenshot(t, page, "tokens-revoked")

	for _, path := range []string{"/api/v1/me", "/api/v1/log"} {
		status, body = callAPI(t, http.MethodGet, srv.URL+path, secret, nil)
		require.Equal(t, http.StatusUnauthorized, status, "GET %s with a revoked token: %s", path, body)
		apiErr := decode[apiErrorBody](t, body)
		require.Equal(t, "unauthorized", apiErr.Error.Code, "body: %s", body)
		require.NotEmpty(t, apiErr.Error.Message, "body: %s", body)
	}
}
