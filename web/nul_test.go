package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/models"
)

// TestNULIsABadRequestNamingTheField: PostgreSQL's text holds no NUL, so
// one reaching a query was a 500. It is refused at the edge, naming where.
func TestNULIsABadRequestNamingTheField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	u := b.user(t, "ops@example.com", models.RoleAdmin)
	token := b.token(t, u, "read", "write", "admin")

	for _, tc := range []struct {
		name, method, path, body, field string
	}{
		{"a query filter", "GET", "/api/v1/log?target=a%00b", "", "target"},
		{"a path id", "GET", "/api/v1/infra/executions/%00", "", "execution_id"},
		{"a token name", "POST", "/api/v1/tokens", `{"name":"ci\u0000","scopes":["read"]}`, "name"},
		{"a list item", "POST", "/api/v1/tokens", `{"name":"ci","scopes":["read","\u0000"]}`, "scopes[1]"},
		{"a user's name", "POST", "/api/v1/users", `{"email":"x@example.com","name":"\u0000","role":"viewer","password":"a-long-password-1"}`, "name"},
		{"a log entry", "POST", "/api/v1/log", `{"target_id":"t\u0000","event":"x"}`, "target_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := b.call(t, tc.method, tc.path, token, tc.body)
			require.Equal(t, http.StatusBadRequest, res.StatusCode, body)
			require.Contains(t, errorFields(body), tc.field, body)
			require.Contains(t, errorFields(body)[tc.field], "NUL")
		})
	}

	t.Run("a sign-in form", func(t *testing.T) {
		br := b.browser(t)
		_, _, csrf := br.get(t, "/login")
		res, page := br.post(t, "/login", url.Values{"_csrf": {csrf}, "email": {"ops@example.com\x00"}, "password": {"x"}})
		require.Equal(t, http.StatusBadRequest, res.StatusCode)
		require.True(t, strings.Contains(page, "email") && strings.Contains(page, "NUL"), page)
	})
}
