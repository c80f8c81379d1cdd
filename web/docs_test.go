package web_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEveryEndpointIsDocumented keeps the API reference in step with the
// routes: every JSON endpoint appears in docs/api.md as "`METHOD /path`"
// (parameters as {name}), the environment pools' allocation routes as the
// seed writes them, without /api/v1.
func TestEveryEndpointIsDocumented(t *testing.T) {
	t.Parallel()
	b := setup(t)
	read := func(path string) string {
		doc, err := os.ReadFile(path)
		require.NoError(t, err)
		return string(doc)
	}
	api := read("../docs/api.md")
	param := regexp.MustCompile(`:([a-z_]+)`)
	checked := 0
	for _, r := range b.server.Routes() {
		path := r.Path
		if !strings.HasPrefix(path, "/api/v1/") && path != "/webhooks/github" || path == "/api/v1/*" {
			continue
		}
		want := path
		if rest, ok := strings.CutPrefix(path, "/api/v1"); ok && (strings.HasPrefix(rest, "/allocations") || rest == "/pools") {
			want = rest // seed 001's routes, served under /api/v1 too
		}
		want = r.Method + " " + param.ReplaceAllString(want, "{$1}")
		require.Contains(t, api, "`"+want, "the endpoint %s is not documented", want)
		checked++
	}
	require.Greater(t, checked, 20)
}
