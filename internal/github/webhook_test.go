package github_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/github"
)

func TestVerifySignature(t *testing.T) {
	t.Parallel()

	// GitHub's documented test vector ("Validating webhook deliveries").
	secret := []byte("It's a Secret to Everybody")
	body := []byte("Hello, World!")
	const documented = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

	require.NoError(t, github.VerifySignature(secret, body, documented))
	require.Equal(t, documented, github.Sign(secret, body))
	require.NoError(t, github.VerifySignature(secret, body, "sha256="+strings.ToUpper(documented[7:])),
		"hex digits in either case")

	for name, tc := range map[string]struct {
		secret, body []byte
		header       string
	}{
		"missing header":         {secret, body, ""},
		"no sha256= prefix":      {secret, body, documented[7:]},
		"sha1 signature":         {secret, body, "sha1=" + documented[7:47]},
		"not hex":                {secret, body, "sha256=" + strings.Repeat("zz", 32)},
		"too short":              {secret, body, documented[:len(documented)-2]},
		"too long":               {secret, body, documented + "00"},
		"body changed":           {secret, []byte("Hello, World?"), documented},
		"body with a newline":    {secret, append(body, '\n'), documented},
		"other secret":           {[]byte("It's a Secret to Nobody"), body, documented},
		"no secret configured":   {nil, body, github.Sign(nil, body)},
		"spaces around the hash": {secret, body, "sha256= " + documented[7:]},
	} {
		err := github.VerifySignature(tc.secret, tc.body, tc.header)
		require.ErrorIs(t, err, github.ErrSignature, name)
	}
}

// delivery reads a payload from testdata, as GitHub would deliver it.
func delivery(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("githubtest", "testdata", name))
	require.NoError(t, err)
	return b
}

func TestParseEvent_replayedDeliveries(t *testing.T) {
	t.Parallel()
	secret := []byte("webhook-secret-from-GANTRY_GITHUB_WEBHOOK_SECRET")

	const (
		baseSHA    = "9c2f1e4b7a3d5f60812e4c9b0a7d3e1f25b6c8d4"
		firstHead  = "4e1d2c3b5a6f7e8d9c0b1a2f3e4d5c6b7a8f9e0d"
		secondHead = "b7a4c1e9d2f35a6b8c0d1e2f3a4b5c6d7e8f9a01"
		testMerge  = "0f3e2d1c4b5a69788796a5b4c3d2e1f00112233a"
		mergeSHA   = "d41c9b2a7e6f5d4c3b2a19087f6e5d4c3b2a1908"
	)
	repo := github.Repository{
		FullName:      "acme/infra-live",
		CloneURL:      "https://github.com/acme/infra-live.git",
		SSHURL:        "git@github.com:acme/infra-live.git",
		HTMLURL:       "https://github.com/acme/infra-live",
		DefaultBranch: "main",
		Private:       true,
	}
	pr := func(action, head, updated string) github.PullRequest {
		at, err := time.Parse(time.RFC3339, updated)
		require.NoError(t, err)
		return github.PullRequest{
			UpdatedAt:  at,
			Action:     action,
			Number:     42,
			Title:      "Add staging RDS and move the VPC module",
			HTMLURL:    "https://github.com/acme/infra-live/pull/42",
			User:       "ada-lovelace",
			Sender:     "ada-lovelace",
			Base:       github.Branch{Ref: "main", SHA: baseSHA, RepoFullName: "acme/infra-live"},
			Head:       github.Branch{Ref: "feature/staging-rds", SHA: head, RepoFullName: "acme/infra-live"},
			Repository: repo,
		}
	}
	synchronize := pr("synchronize", secondHead, "2025-03-17T09:05:12Z")
	synchronize.Before, synchronize.After = firstHead, secondHead
	synchronize.MergeCommitSHA = testMerge
	merged := pr("closed", secondHead, "2025-03-17T10:30:02Z")
	merged.Sender = "grace-hopper"
	merged.Merged, merged.MergedBy, merged.MergeCommitSHA = true, "grace-hopper", mergeSHA
	unmerged := pr("closed", secondHead, "2025-03-17T11:02:45Z")
	unmerged.MergeCommitSHA = testMerge

	for _, tc := range []struct {
		file, eventType string
		want            github.Event
		activity, merge bool
	}{
		{"pull_request_opened.json", "pull_request", pr("opened", firstHead, "2025-03-17T08:41:30Z"), true, false},
		{"pull_request_synchronize.json", "pull_request", synchronize, true, false},
		{"pull_request_closed_merged.json", "pull_request", merged, false, true},
		{"pull_request_closed_unmerged.json", "pull_request", unmerged, false, false},
		{"ping.json", "ping", github.Ping{
			Zen: "Design for failure.", HookID: 512345678, Events: []string{"pull_request"},
			ContentType: "json", Repository: repo, Sender: "grace-hopper",
		}, false, false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			body := delivery(t, tc.file)
			require.NoError(t, github.VerifySignature(secret, body, github.Sign(secret, body)))

			ev, err := github.ParseEvent(tc.eventType, body)
			require.NoError(t, err)
			require.Equal(t, tc.want, ev)
			require.Equal(t, tc.eventType, ev.EventType())
			if p, ok := ev.(github.PullRequest); ok {
				require.Equal(t, tc.activity, p.IsActivity())
				require.Equal(t, tc.merge, p.IsMerge())
				require.Equal(t, "refs/pull/42/head", p.PullRef())
			}

			// The same delivery, one byte changed, is refused.
			tampered := []byte(strings.Replace(string(body), "acme/infra-live", "acme/infra-livf", 1))
			require.ErrorIs(t, github.VerifySignature(secret, tampered, github.Sign(secret, body)), github.ErrSignature)

			// A hook configured for application/x-www-form-urlencoded.
			form := []byte("payload=" + url.QueryEscape(string(body)))
			ev, err = github.ParseEvent(tc.eventType, form)
			require.NoError(t, err)
			require.Equal(t, tc.want, ev)
		})
	}
}

func TestParseEvent_ping(t *testing.T) {
	t.Parallel()
	ev, err := github.ParseEvent("ping", delivery(t, "ping.json"))
	require.NoError(t, err)
	p := ev.(github.Ping)
	require.True(t, p.Subscribed("pull_request"))
	require.False(t, p.Subscribed("push"))
	require.True(t, github.Ping{Events: []string{"*"}}.Subscribed("pull_request"))

	// An organisation's hook has no repository.
	ev, err = github.ParseEvent("ping", []byte(`{"zen":"Keep it logically awesome.","hook_id":1,"hook":{"events":["*"]}}`))
	require.NoError(t, err)
	require.Equal(t, github.Ping{Zen: "Keep it logically awesome.", HookID: 1, Events: []string{"*"}}, ev)
}

func TestParseEvent_ignoredTypes(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{"push", "issues", "pull_request_review", "check_run", "installation"} {
		ev, err := github.ParseEvent(typ, []byte("not even JSON"))
		require.NoError(t, err)
		require.Equal(t, github.Ignored{Type: typ}, ev)
		require.Equal(t, typ, ev.EventType())
	}
}

func TestParseEvent_otherActionsParse(t *testing.T) {
	t.Parallel()
	body := strings.Replace(string(delivery(t, "pull_request_opened.json")), `"action": "opened"`, `"action": "labeled"`, 1)
	ev, err := github.ParseEvent("pull_request", []byte(body))
	require.NoError(t, err)
	p := ev.(github.PullRequest)
	require.Equal(t, "labeled", p.Action)
	require.False(t, p.IsActivity())
	require.False(t, p.IsMerge())
}

func TestParseEvent_malformed(t *testing.T) {
	t.Parallel()
	opened := string(delivery(t, "pull_request_opened.json"))
	merged := string(delivery(t, "pull_request_closed_merged.json"))
	for name, tc := range map[string]struct{ eventType, body string }{
		"no event type":        {"", opened},
		"not JSON":             {"pull_request", "<xml/>"},
		"empty body":           {"pull_request", ""},
		"JSON array":           {"pull_request", "[]"},
		"no action":            {"pull_request", strings.Replace(opened, `"action": "opened",`, "", 1)},
		"no pull_request":      {"pull_request", `{"action":"opened","number":1,"repository":{"full_name":"a/b"}}`},
		"no repository":        {"pull_request", strings.Replace(opened, `"repository": {`, `"repo": {`, 1)},
		"short head sha":       {"pull_request", strings.Replace(opened, "4e1d2c3b5a6f7e8d9c0b1a2f3e4d5c6b7a8f9e0d", "4e1d2c3", -1)},
		"option as base sha":   {"pull_request", strings.Replace(opened, "9c2f1e4b7a3d5f60812e4c9b0a7d3e1f25b6c8d4", "--upload-pack=x", -1)},
		"merged without sha":   {"pull_request", strings.Replace(merged, `"merge_commit_sha": "d41c9b2a7e6f5d4c3b2a19087f6e5d4c3b2a1908"`, `"merge_commit_sha": null`, 1)},
		"number of wrong type": {"pull_request", strings.Replace(opened, `"number": 42,`, `"number": "42",`, 1)},
		"ping without hook":    {"ping", `{"zen":"x"}`},
		"form without payload": {"pull_request", "payload=&other=1"},
	} {
		_, err := github.ParseEvent(tc.eventType, []byte(tc.body))
		require.ErrorIs(t, err, github.ErrPayload, name)
	}
}

// TestParseEvent_onlyWebLinks: a pull request's html_url becomes a link on
// Gantry's pages, so only an http(s) address is kept.
func TestParseEvent_onlyWebLinks(t *testing.T) {
	t.Parallel()
	opened := string(delivery(t, "pull_request_opened.json"))
	for u, want := range map[string]string{
		"https://github.com/acme/infra-live/pull/42":  "https://github.com/acme/infra-live/pull/42",
		"http://ghe.internal/acme/infra-live/pull/42": "http://ghe.internal/acme/infra-live/pull/42",
		"javascript:alert(document.cookie)":           "",
		"data:text/html,<script>alert(1)</script>":    "",
		"//evil.example/x":                            "",
		"JAVASCRIPT:alert(1)":                         "",
	} {
		body := strings.Replace(opened, `"html_url": "https://github.com/acme/infra-live/pull/42"`, `"html_url": `+strconv.Quote(u), 1)
		ev, err := github.ParseEvent("pull_request", []byte(body))
		require.NoError(t, err, u)
		require.Equal(t, want, ev.(github.PullRequest).HTMLURL, u)
	}
}
