package web_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/awsenv"
	"github.com/gantryhq/gantry/models"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestAllocationAPIAccess records who may call which allocation route, at
// the root and under /api/v1, and what each caller is answered: status,
// error code, message and Retry-After. The table in
// testdata/allocation_api_access.txt is the contract; -update rewrites it.
func TestAllocationAPIAccess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var envs strings.Builder
	for i := range 12 {
		fmt.Fprintf(&envs, "  - {pool: seats, name: seat-%d}\n", i)
	}
	b.sync(t, `clients:
  - name: ci
    users: [ci@example.com]
  - name: build-account
    aws_accounts: ["111122223333"]
pools:
  - name: seats
    kind: slot
environments:
`+envs.String())
	ctx := context.Background()
	ci := b.user(t, "ci@example.com", models.RoleViewer)
	stranger := b.user(t, "stranger@example.com", models.RoleAdmin)
	viewer := b.user(t, "viewer@example.com", models.RoleViewer)
	allowed, err := awsenv.SignCallerIdentity(ctx, b.aws.Config(b.aws.AddUser("111122223333", "ci-runner")), b.aws.URL)
	require.NoError(t, err)
	unlisted, err := awsenv.SignCallerIdentity(ctx, b.aws.Config(b.aws.AddUser("444455556666", "stranger")), b.aws.URL)
	require.NoError(t, err)
	br := b.browser(t)
	br.login(t, viewer.Email)

	type caller struct {
		name     string
		token    string
		identity string
		session  bool
	}
	callers := []caller{
		{name: "anonymous"},
		{name: "unknown token", token: "gnt_unknown"},
		{name: "session of a viewer", session: true},
		{name: "viewer's read token", token: b.token(t, viewer, "read")},
		{name: "stranger's read+write token", token: b.token(t, stranger, "read", "write")},
		{name: "stranger's write token", token: b.token(t, stranger, "write")},
		{name: "client's read token", token: b.token(t, ci, "read")},
		{name: "client's write token", token: b.token(t, ci, "write")},
		{name: "client's read+write token", token: b.token(t, ci, "read", "write")},
		{name: "IAM caller of a listed account", identity: allowed},
		{name: "IAM caller of an unlisted account", identity: unlisted},
		{name: "tampered IAM identity", identity: allowed[:len(allowed)-8] + "AAAAAAAA"},
		{name: "viewer's read token with an unlisted IAM identity", token: b.token(t, viewer, "read"), identity: unlisted},
	}
	const missing = "00000000-0000-4000-8000-000000000000"
	routes := []struct{ method, path, body string }{
		{"POST", "/allocations", `{"pool":"seats","requester":"r"}`},
		{"GET", "/allocations", ""},
		{"GET", "/allocations/" + missing, ""},
		{"DELETE", "/allocations/" + missing, ""},
		{"POST", "/allocations/" + missing + "/extend", `{"duration":"1h"}`},
		{"GET", "/pools", ""},
	}

	var got strings.Builder
	for _, prefix := range []string{"", "/api/v1"} {
		for _, r := range routes {
			for _, c := range callers {
				req, err := http.NewRequest(r.method, b.srv.URL+prefix+r.path, strings.NewReader(r.body))
				require.NoError(t, err)
				if r.body != "" {
					req.Header.Set("Content-Type", "application/json")
				}
				if c.token != "" {
					req.Header.Set("Authorization", "Bearer "+c.token)
				}
				if c.identity != "" {
					req.Header.Set(awsenv.IdentityHeader, c.identity)
				}
				client := http.DefaultClient
				if c.session {
					client = br.Client
					req.Header.Set("Sec-Fetch-Site", "same-origin")
				}
				res, err := client.Do(req)
				require.NoError(t, err)
				got.WriteString(answerLine(t, r.method+" "+prefix+strings.Replace(r.path, missing, "{missing}", 1)+" | "+c.name, res))
			}
		}
	}
	requireGolden(t, "allocation_api_access.txt", got.String())
}

// TestAllocationAPIRateLimits records what the rate limit answers on the
// allocation routes: a client is counted against its own rate from
// gantry.yaml, however it authenticates, and not against a token's API
// budget; people reading the pools and history there are not counted.
func TestAllocationAPIRateLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, "GANTRY_API_RATE=0.1", "GANTRY_API_BURST=1")
	b.sync(t, `clients:
  - name: ci
    users: [ci@example.com]
    rate: 0.2
  - name: build-account
    aws_accounts: ["111122223333"]
pools:
  - name: seats
    kind: slot
environments:
  - {pool: seats, name: only}
`)
	ci := b.user(t, "ci@example.com", models.RoleViewer)
	clientToken := b.token(t, ci, "read", "write")
	readToken := b.token(t, b.user(t, "viewer@example.com", models.RoleViewer), "read")
	identity, err := awsenv.SignCallerIdentity(context.Background(), b.aws.Config(b.aws.AddUser("111122223333", "ci-runner")), b.aws.URL)
	require.NoError(t, err)
	const missing = "/allocations/00000000-0000-4000-8000-000000000000"

	var got strings.Builder
	call := func(label, method, path, token, identity string) {
		req, err := http.NewRequest(method, b.srv.URL+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if identity != "" {
			req.Header.Set(awsenv.IdentityHeader, identity)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		got.WriteString(answerLine(t, method+" "+path+" | "+label, res))
	}
	// Slow rates, so that no token comes back during the test: ci's 0.2
	// per second gives bursts of 1 (twice the rate, at least 1), as does the
	// default, GANTRY_API_RATE, for build-account.
	for range 2 {
		call("client's token", "DELETE", missing, clientToken, "")
	}
	call("client's token, its API budget untouched", "GET", "/api/v1/me", clientToken, "")
	call("client's token, reading as a person", "GET", "/api/v1"+missing, clientToken, "")
	for range 2 {
		call("IAM caller, the default rate", "DELETE", "/api/v1"+missing, "", identity)
	}
	call("IAM caller, reading", "GET", "/pools", "", identity)
	for range 4 {
		call("viewer's read token", "GET", "/api/v1/pools", readToken, "")
		call("viewer's read token", "GET", "/allocations", readToken, "")
	}
	call("viewer's read token, its API budget untouched", "GET", "/api/v1/me", readToken, "")
	call("viewer's read token, over its API budget", "GET", "/api/v1/me", readToken, "")
	requireGolden(t, "allocation_api_rate_limits.txt", got.String())
}

// answerLine is one line of a golden transcript: the request, the status
// and, for errors, the code, message and Retry-After.
func answerLine(t *testing.T, request string, res *http.Response) string {
	t.Helper()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	res.Body.Close()
	var body map[string]any
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(raw, &body), string(raw))
	}
	line := fmt.Sprintf("%s | %d", request, res.StatusCode)
	if code := errorCode(body); code != "" {
		line += fmt.Sprintf(" %s %q", code, body["error"].(map[string]any)["message"])
	}
	if ra := res.Header.Get("Retry-After"); ra != "" {
		line += " Retry-After: " + ra
	}
	return line + "\n"
}

// requireGolden compares got with testdata/name (rewritten under -update).
func requireGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}
