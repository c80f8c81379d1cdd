package web_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/models"
)

// TestAnonymousFormsNeedTheirCSRFTokenEvenAskingForJSON: a cross-site
// fetch may set Accept: application/json on a form post. Signing in (login
// CSRF: the victim ends up in the attacker's account) and voting through a
// link must still need the form's token; only API routes, which take no
// ambient credentials, skip it.
func TestAnonymousFormsNeedTheirCSRFTokenEvenAskingForJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, "ada@example.com", models.RoleAdmin)

	// Without Sec-Fetch-Site, as older browsers send it (the header alone
	// already makes a cross-site post fail).
	post := func(path string, form url.Values) (*http.Response, string) {
		req, err := http.NewRequest(http.MethodPost, b.srv.URL+path, strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res, string(body)
	}

	res, body := post("/login", url.Values{"email": {"ada@example.com"}, "password": {password}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, body)
	require.Contains(t, body, "came from another site")
	for _, c := range res.Cookies() {
		require.NotEqual(t, "gantry_session", c.Name, "no session for a forged sign-in")
	}

	res, body = post(pageurl.VotingLinkPrefix+"some-token", url.Values{"decision": {"approve"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode, body)
	require.Contains(t, body, "came from another site")

	// The API still answers anonymous programs with 401, not a CSRF refusal.
	res, body = post("/api/v1/log", url.Values{})
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, body)
}
