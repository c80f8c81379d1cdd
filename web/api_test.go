package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/models"
)

func TestAPIAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ops := b.user(t, "ops@example.com", models.RoleOperator)
	token := b.token(t, ops, "read", "write")

	t.Run("no token is 401 in the one error shape", func(t *testing.T) {
		res, body := b.call(t, "GET", "/api/v1/log", "", "")
		require.Equal(t, http.StatusUnauthorized, res.StatusCode)
		require.Equal(t, "unauthorized", errorCode(body))
		require.NotEmpty(t, body["error"].(map[string]any)["message"])
	})
	t.Run("an unknown token is 401", func(t *testing.T) {
		res, body := b.call(t, "GET", "/api/v1/log", "gnt_not-a-real-token", "")
		require.Equal(t, http.StatusUnauthorized, res.StatusCode)
		require.Equal(t, "unauthorized", errorCode(body))
	})
	t.Run("a malformed Authorization header is 401", func(t *testing.T) {
		req, _ := http.NewRequest("GET", b.srv.URL+"/api/v1/me", nil)
		req.Header.Set("Authorization", "Basic abc")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	})
	t.Run("a valid token works and records its use", func(t *testing.T) {
		res, body := b.call(t, "GET", "/api/v1/me", token, "")
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Equal(t, "ops@example.com", body["user"].(map[string]any)["email"])
		tokens, err := models.ListTokens(context.Background(), b.db.Bun, ops.ID)
		require.NoError(t, err)
		require.NotNil(t, tokens[0].LastUsedAt)
	})
	t.Run("a revoked token is 401", func(t *testing.T) {
		secret := b.token(t, ops, "read")
		tokens, err := models.ListTokens(context.Background(), b.db.Bun, ops.ID)
		require.NoError(t, err)
		require.NoError(t, access.RevokeToken(context.Background(), b.db.Bun, tokens[0].ID, ops.ID, "test"))
		res, body := b.call(t, "GET", "/api/v1/me", secret, "")
		require.Equal(t, http.StatusUnauthorized, res.StatusCode)
		require.Equal(t, "unauthorized", errorCode(body))
	})
	t.Run("a disabled owner's token is 401", func(t *testing.T) {
		gone := b.user(t, "gone@example.com", models.RoleOperator)
		secret := b.token(t, gone, "read")
		require.NoError(t, access.SetDisabled(context.Background(), b.db.Bun, gone.ID, true, "test"))
		res, _ := b.call(t, "GET", "/api/v1/me", secret, "")
		require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	})
}

func TestAPIAuthorization(t *testing.T) {
	t.Parallel()
	b := setup(t)
	viewer := b.user(t, "viewer@example.com", models.RoleViewer)
	ops := b.user(t, "ops@example.com", models.RoleOperator)
	entry := `{"target_id":"p1","event":"build-registered","revision":"abc"}`

	t.Run("a viewer calling an operator route is 403", func(t *testing.T) {
		res, body := b.call(t, "POST", "/api/v1/log", b.token(t, viewer, "read", "write"), entry)
		require.Equal(t, http.StatusForbidden, res.StatusCode)
		require.Equal(t, "forbidden", errorCode(body))
	})
	t.Run("a token without the scope is 403 even for an operator", func(t *testing.T) {
		res, body := b.call(t, "POST", "/api/v1/log", b.token(t, ops, "read"), entry)
		require.Equal(t, http.StatusForbidden, res.StatusCode)
		require.Contains(t, body["error"].(map[string]any)["message"], "write")
	})
	t.Run("an admin route refuses an operator", func(t *testing.T) {
		res, _ := b.call(t, "GET", "/api/v1/users", b.token(t, ops, "read", "write"), "")
		require.Equal(t, http.StatusForbidden, res.StatusCode)
	})
	t.Run("only admins may hold the admin scope", func(t *testing.T) {
		_, _, err := access.CreateToken(context.Background(), b.db.Bun, ops, access.NewToken{Name: "x", Scopes: []string{"admin"}}, "test")
		require.ErrorContains(t, err, "admin")
	})
	t.Run("the operator with write scope appends", func(t *testing.T) {
		res, body := b.call(t, "POST", "/api/v1/log", b.token(t, ops, "write"), entry)
		require.Equal(t, http.StatusCreated, res.StatusCode)
		require.Equal(t, "build-registered", body["event"])
		require.True(t, strings.HasPrefix(body["actor"].(string), "token:"), "the log names the token and its owner: %v", body["actor"])
	})
}

func TestAPIBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token := b.token(t, b.user(t, "ops@example.com", models.RoleOperator), "read", "write")

	cases := []struct {
		name, body string
		field      string // the field the error must name; "" when the message is about the body
	}{
		{"malformed JSON", `{"target_id": "p1",`, ""},
		{"not JSON at all", `target_id=p1`, ""},
		{"unknown field", `{"target_id":"p1","event":"e","bogus":1}`, "bogus"},
		{"wrong type", `{"target_id":"p1","event":7}`, "event"},
		{"missing target", `{"event":"e"}`, "target_id"},
		{"too long", `{"target_id":"` + strings.Repeat("x", 600) + `","event":"e"}`, "target_id"},
		{"empty body", ``, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", b.srv.URL+"/api/v1/log", strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			res, body := b.do(t, req)
			require.Equal(t, http.StatusBadRequest, res.StatusCode, body)
			require.Equal(t, "invalid", errorCode(body))
			if tc.field != "" {
				require.Contains(t, errorFields(body), tc.field)
			}
		})
	}
	t.Run("nothing was written by the bad requests", func(t *testing.T) {
		entries, err := models.ListLog(context.Background(), b.db.Bun, models.LogFilter{Target: "p1"})
		require.NoError(t, err)
		require.Empty(t, entries)
	})
	t.Run("a bad query parameter names it", func(t *testing.T) {
		res, body := b.call(t, "GET", "/api/v1/log?since=yesterday&limit=0", token, "")
		require.Equal(t, http.StatusBadRequest, res.StatusCode)
		require.Contains(t, errorFields(body), "since")
		require.Contains(t, errorFields(body), "limit")
	})
	t.Run("an unknown endpoint is a JSON 404", func(t *testing.T) {
		res, body := b.call(t, "GET", "/api/v1/nothing-here", token, "")
		require.Equal(t, http.StatusNotFound, res.StatusCode)
		require.Equal(t, "not_found", errorCode(body))
	})
}

func TestAPITokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bot := b.user(t, "bot@example.com", models.RoleApprover)
	token := b.token(t, bot, "read", "write")

	res, body := b.call(t, "POST", "/api/v1/tokens", token, `{"name":"second","scopes":["read"],"expires_in":"24h"}`)
	require.Equal(t, http.StatusCreated, res.StatusCode)
	secret := body["secret"].(string)
	require.True(t, strings.HasPrefix(secret, "gnt_"))
	require.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	id := int(body["token"].(map[string]any)["id"].(float64))

	res, _ = b.call(t, "GET", "/api/v1/me", secret, "")
	require.Equal(t, http.StatusOK, res.StatusCode)

	res, body = b.call(t, "GET", "/api/v1/tokens", token, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Len(t, body["tokens"], 2)
	require.NotContains(t, body["tokens"].([]any)[0], "token_hash", "hashes never leave the server")

	res, body = b.call(t, "POST", "/api/v1/tokens", token, `{"name":"","scopes":["everything"]}`)
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, errorFields(body), "name")
	require.Contains(t, errorFields(body), "scopes")

	res, _ = b.call(t, "DELETE", "/api/v1/tokens/"+itoa(id), token, "")
	require.Equal(t, http.StatusNoContent, res.StatusCode)
	res, _ = b.call(t, "GET", "/api/v1/me", secret, "")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	res, _ = b.call(t, "DELETE", "/api/v1/tokens/"+itoa(id), token, "")
	require.Equal(t, http.StatusNoContent, res.StatusCode, "revoking twice is harmless")

	other := b.token(t, b.user(t, "other@example.com", models.RoleApprover), "read", "write")
	res, _ = b.call(t, "DELETE", "/api/v1/tokens/"+itoa(id), other, "")
	require.Equal(t, http.StatusNotFound, res.StatusCode, "someone else's token is not even visible")

	events, err := models.ListLog(context.Background(), b.db.Bun, models.LogFilter{Event: access.EventTokenRevoked})
	require.NoError(t, err)
	require.Len(t, events, 1, "one revocation, logged once")
}

// A token can mint only tokens within its own scopes: a leaked write token
// must not become an admin one (issue 11, item 2). A session may create any
// scope its role allows.
func TestTokenCreationIsBoundedByTheCallersScopes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.user(t, "admin@example.com", models.RoleAdmin)
	countTokens := func() int {
		tokens, err := models.ListTokens(context.Background(), b.db.Bun, 0)
		require.NoError(t, err)
		return len(tokens)
	}

	t.Run("a write token cannot create an admin token", func(t *testing.T) {
		writeOnly := b.token(t, admin, "write")
		before := countTokens()
		res, body := b.call(t, "POST", "/api/v1/tokens", writeOnly, `{"name":"escalated","scopes":["admin","read","write","vote"]}`)
		require.Equal(t, http.StatusForbidden, res.StatusCode)
		require.Equal(t, "forbidden", errorCode(body))
		require.Equal(t, "This token cannot create a token with scopes it does not hold itself: it lacks admin, read, vote.",
			body["error"].(map[string]any)["message"])
		require.Equal(t, before, countTokens(), "nothing created")
	})
	t.Run("a token can create one with its scopes or fewer", func(t *testing.T) {
		readWrite := b.token(t, admin, "read", "write")
		for _, scopes := range []string{`["read","write"]`, `["read"]`} {
			res, body := b.call(t, "POST", "/api/v1/tokens", readWrite, `{"name":"narrower","scopes":`+scopes+`}`)
			require.Equal(t, http.StatusCreated, res.StatusCode, "%s: %v", scopes, body)
		}
		res, _ := b.call(t, "POST", "/api/v1/tokens", readWrite, `{"name":"wider","scopes":["read","vote"]}`)
		require.Equal(t, http.StatusForbidden, res.StatusCode)
	})
	t.Run("a session creates any scope its role allows", func(t *testing.T) {
		br := b.browser(t)
		br.login(t, admin.Email)
		_, _, csrf := br.get(t, "/tokens")
		res, body := br.post(t, "/tokens", url.Values{"_csrf": {csrf}, "name": {"from-the-page"}, "scopes": {"admin", "read", "write", "vote"}})
		require.Equal(t, http.StatusCreated, res.StatusCode, body)
	})
}

func TestAPIUsersAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.user(t, "root@example.com", models.RoleAdmin)
	token := b.token(t, admin, "read", "admin")

	res, body := b.call(t, "POST", "/api/v1/users", token, `{"email":"new@example.com","role":"approver","password":"long-enough-password"}`)
	require.Equal(t, http.StatusCreated, res.StatusCode)
	require.NotContains(t, body, "password_hash")
	id := int(body["id"].(float64))

	res, body = b.call(t, "POST", "/api/v1/users", token, `{"email":"new@example.com","role":"approver","password":"long-enough-password"}`)
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, errorFields(body), "email")

	res, body = b.call(t, "POST", "/api/v1/users", token, `{"email":"not-an-email","role":"king","password":"short"}`)
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Len(t, errorFields(body), 3)

	res, body = b.call(t, "PATCH", "/api/v1/users/"+itoa(id), token, `{"role":"operator"}`)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "operator", body["role"])

	res, _ = b.call(t, "PATCH", "/api/v1/users/"+itoa(int(admin.ID)), token, `{"role":"viewer"}`)
	require.Equal(t, http.StatusConflict, res.StatusCode, "an admin cannot demote themselves")

	changes, err := models.ListLog(context.Background(), b.db.Bun, models.LogFilter{Event: access.EventUserRoleChanged})
	require.NoError(t, err)
	require.Len(t, changes, 1)
	require.Equal(t, "approver", changes[0].Detail["from"])
	require.Equal(t, "operator", changes[0].Detail["to"])
}

func TestAPIRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, "GANTRY_API_RATE=1", "GANTRY_API_BURST=3")
	token := b.token(t, b.user(t, "ops@example.com", models.RoleOperator), "read")
	var limited *http.Response
	for i := 0; i < 10 && limited == nil; i++ {
		res, body := b.call(t, "GET", "/api/v1/me", token, "")
		if res.StatusCode == http.StatusTooManyRequests {
			limited = res
			require.Equal(t, "rate_limited", errorCode(body))
		}
	}
	require.NotNil(t, limited, "the burst of 3 is exceeded within 10 quick calls")
	require.NotEmpty(t, limited.Header.Get("Retry-After"))
}

func TestTokensAreForTheAPIOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.user(t, "root@example.com", models.RoleAdmin)
	readOnly := b.token(t, admin, "read")
	for _, path := range []string{"/", "/tokens", "/admin/users", "/admin/river/api/jobs"} {
		req, _ := http.NewRequest("GET", b.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+readOnly)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusForbidden, res.StatusCode, path)
	}
	req, _ := http.NewRequest("POST", b.srv.URL+"/tokens", strings.NewReader("name=escalate&scopes=write"))
	req.Header.Set("Authorization", "Bearer "+readOnly)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode, "a read token cannot mint a write token through the form")

	t.Run("an admin's token without the admin scope revokes only its owner's tokens", func(t *testing.T) {
		other := b.user(t, "other@example.com", models.RoleViewer)
		b.token(t, other, "read")
		tokens, err := models.ListTokens(context.Background(), b.db.Bun, other.ID)
		require.NoError(t, err)
		res, _ := b.call(t, "DELETE", "/api/v1/tokens/"+itoa(int(tokens[0].ID)), b.token(t, admin, "write"), "")
		require.Equal(t, http.StatusNotFound, res.StatusCode)
		res, _ = b.call(t, "DELETE", "/api/v1/tokens/"+itoa(int(tokens[0].ID)), b.token(t, admin, "write", "admin"), "")
		require.Equal(t, http.StatusNoContent, res.StatusCode)
	})
}

func TestClientAddressCannotBeSpoofed(t *testing.T) {
	t.Parallel()
	b := setup(t, "GANTRY_LOGIN_ADDRESS_ATTEMPTS=2")
	b.user(t, "ada@example.com", models.RoleViewer)
	br := b.browser(t)
	_, _, csrf := br.get(t, "/login")
	for i := 0; i < 2; i++ {
		br.post(t, "/login", url.Values{"_csrf": {csrf}, "email": {"nobody" + itoa(i) + "@example.com"}, "password": {"guess-guess-guess"}})
	}
	// A new email and a forged X-Forwarded-For do not reset the per-address count.
	req, _ := http.NewRequest("POST", b.srv.URL+"/login", strings.NewReader(url.Values{"_csrf": {csrf}, "email": {"ada@example.com"}, "password": {password}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	res, err := br.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	require.Contains(t, string(body), "Too many failed sign-ins from your address")
}

func TestCrossSiteFormsAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, "ada@example.com", models.RoleViewer)
	br := b.browser(t)
	br.login(t, "ada@example.com")
	req, _ := http.NewRequest("POST", b.srv.URL+"/tokens", strings.NewReader("name=x&scopes=read"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err := br.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	tokens, err := models.ListTokens(context.Background(), b.db.Bun, 0)
	require.NoError(t, err)
	require.Empty(t, tokens)
}

func TestForwardedForIsBelievedFromTrustedProxies(t *testing.T) {
	t.Parallel()
	b := setup(t, "GANTRY_LOGIN_ADDRESS_ATTEMPTS=2", "GANTRY_TRUSTED_PROXIES=127.0.0.0/8")
	b.user(t, "ada@example.com", models.RoleViewer)
	br := b.browser(t)
	_, _, csrf := br.get(t, "/login")
	for i := 0; i < 2; i++ {
		br.post(t, "/login", url.Values{"_csrf": {csrf}, "email": {"nobody" + itoa(i) + "@example.com"}, "password": {"guess-guess-guess"}})
	}
	req, _ := http.NewRequest("POST", b.srv.URL+"/login", strings.NewReader(url.Values{"_csrf": {csrf}, "email": {"ada@example.com"}, "password": {password}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	res, err := br.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "behind a trusted proxy each client has its own count")
}
