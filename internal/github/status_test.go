package github_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/github"
)

// request is what the fake GitHub received.
type request struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any
}

// fakeGitHub answers POST /repos/{owner}/{repo}/statuses/{sha} the way
// GitHub's REST API documents it ("Create a commit status"): 201 with the
// status, 401 for a bad token, 404 for a repository the token cannot see,
// 422 for an unknown commit or an invalid field.
type fakeGitHub struct {
	token   string
	repos   map[string]bool // "owner/repo"
	commits map[string]bool // sha
	// answer, when set, replaces the answer to the next requests.
	answer func(w http.ResponseWriter) bool

	mu       sync.Mutex
	requests []request
	nextID   int64
}

func newFakeGitHub(t *testing.T, prefix string) (*fakeGitHub, *httptest.Server) {
	f := &fakeGitHub{
		token:   "ghs_test_token",
		repos:   map[string]bool{"acme/infra-live": true},
		commits: map[string]bool{sha: true},
		nextID:  1,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+prefix+"/repos/{owner}/{repo}/statuses/{sha}", f.createStatus)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f.record(r, nil)
		writeJSON(w, http.StatusNotFound, map[string]any{
			"message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404",
		})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, srv
}

const sha = "b7a4c1e9d2f35a6b8c0d1e2f3a4b5c6d7e8f9a01"

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-GitHub-Media-Type", "github.v3; format=json")
	w.Header().Set("X-RateLimit-Limit", "5000")
	w.Header().Set("X-RateLimit-Remaining", "4999")
	w.Header().Set("X-RateLimit-Reset", fmt.Sprint(time.Now().Add(time.Hour).Unix()))
	w.Header().Set("X-RateLimit-Used", "1")
	w.Header().Set("X-RateLimit-Resource", "core")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeGitHub) record(r *http.Request, body map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
}

func (f *fakeGitHub) received() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.requests...)
}

func (f *fakeGitHub) createStatus(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	raw, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(raw, &body); err != nil {
		f.record(r, nil)
		writeJSON(w, http.StatusBadRequest, map[string]any{
			"message": "Problems parsing JSON", "documentation_url": docs, "status": "400",
		})
		return
	}
	f.record(r, body)
	if f.answer != nil && f.answer(w) {
		return
	}
	owner, repo, commit := r.PathValue("owner"), r.PathValue("repo"), r.PathValue("sha")
	switch {
	case r.Header.Get("Authorization") != "Bearer "+f.token:
		writeJSON(w, http.StatusUnauthorized, map[string]any{
			"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401",
		})
		return
	case !f.repos[owner+"/"+repo]:
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": docs, "status": "404"})
		return
	}
	state, _ := body["state"].(string)
	switch state {
	case "pending", "success", "failure", "error":
	default:
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
			"message": "Validation Failed",
			"errors": []any{map[string]any{
				"resource": "Status", "code": "custom", "field": "state",
				"message": "state is not included in the list",
			}},
			"documentation_url": docs, "status": "422",
		})
		return
	}
	if d, _ := body["description"].(string); utf8.RuneCountInString(d) > 140 {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
			"message": "Validation Failed",
			"errors": []any{map[string]any{
				"resource": "Status", "code": "custom", "field": "description",
				"message": "description is too long (maximum is 140 characters)",
			}},
			"documentation_url": docs, "status": "422",
		})
		return
	}
	if !f.commits[commit] {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
			"message": "No commit found for SHA: " + commit, "documentation_url": docs, "status": "422",
		})
		return
	}
	f.mu.Lock()
	id := f.nextID
	f.nextID++
	f.mu.Unlock()
	ctx, ok := body["context"].(string)
	if !ok {
		ctx = "default"
	}
	now := time.Now().UTC().Format(time.RFC3339)
	statusURL := fmt.Sprintf("https://api.github.com/repos/%s/%s/statuses/%s", owner, repo, commit)
	w.Header().Set("Location", statusURL)
	writeJSON(w, http.StatusCreated, map[string]any{
		"url":         statusURL,
		"avatar_url":  "https://avatars.githubusercontent.com/in/123456?v=4",
		"id":          id,
		"node_id":     "SC_kwDOMG8xTs8AAAAB",
		"state":       state,
		"description": body["description"],
		"target_url":  body["target_url"],
		"context":     ctx,
		"created_at":  now,
		"updated_at":  now,
		"creator": map[string]any{
			"login": "gantry[bot]", "id": 987654, "node_id": "BOT_kgDOAA8sJg", "type": "Bot", "site_admin": false,
		},
	})
}

const docs = "https://docs.github.com/rest/commits/statuses#create-a-commit-status"

func TestSetStatus(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	fake, srv := newFakeGitHub(t, "")
	client, err := github.NewStatusClient(srv.Client(), fake.token, srv.URL)
	require.NoError(t, err)

	require.NoError(t, client.SetStatus(ctx, "acme", "infra-live", sha, github.Status{
		State:       github.StatePending,
		Context:     github.PlanContext("live/dev/vpc"),
		Description: "Planning",
		TargetURL:   "https://gantry.acme.example/infra/plans/17",
	}))
	require.NoError(t, client.SetStatus(ctx, "acme", "infra-live", sha, github.Status{
		State:   github.StateSuccess,
		Context: github.ContextMergeLock,
	}))

	got := fake.received()
	require.Len(t, got, 2)
	first := got[0]
	require.Equal(t, http.MethodPost, first.Method)
	require.Equal(t, "/repos/acme/infra-live/statuses/"+sha, first.Path)
	require.Equal(t, "Bearer ghs_test_token", first.Header.Get("Authorization"))
	require.Equal(t, "application/json", first.Header.Get("Content-Type"))
	require.Contains(t, first.Header.Get("Accept"), "application/vnd.github")
	require.Equal(t, "2022-11-28", first.Header.Get("X-GitHub-Api-Version"))
	require.Equal(t, "gantry", first.Header.Get("User-Agent"))
	require.Equal(t, map[string]any{
		"state":       "pending",
		"context":     "gantry/plan: live/dev/vpc",
		"description": "Planning",
		"target_url":  "https://gantry.acme.example/infra/plans/17",
	}, first.Body)
	require.Equal(t, map[string]any{"state": "success", "context": "gantry/merge-lock"}, got[1].Body,
		"no empty description or target_url is sent")
}

func TestSetStatus_truncatesTheDescription(t *testing.T) {
	t.Parallel()
	fake, srv := newFakeGitHub(t, "")
	client, err := github.NewStatusClient(srv.Client(), fake.token, srv.URL)
	require.NoError(t, err)

	long := strings.Repeat("é", 200)
	require.NoError(t, client.SetStatus(t.Context(), "acme", "infra-live", sha, github.Status{
		State: github.StateFailure, Context: "gantry/plan: live/dev/rds", Description: long,
	}))
	d := fake.received()[0].Body["description"].(string)
	require.Equal(t, 140, utf8.RuneCountInString(d))
	require.Equal(t, strings.Repeat("é", 139)+"…", d)

	exact := strings.Repeat("x", 140)
	require.NoError(t, client.SetStatus(t.Context(), "acme", "infra-live", sha, github.Status{
		State: github.StateError, Context: "c", Description: exact,
	}))
	require.Equal(t, exact, fake.received()[1].Body["description"])
}

func TestSetStatus_enterpriseBaseURL(t *testing.T) {
	t.Parallel()
	fake, srv := newFakeGitHub(t, "/api/v3")
	for _, base := range []string{srv.URL + "/api/v3", srv.URL + "/api/v3/"} {
		client, err := github.NewStatusClient(srv.Client(), fake.token, base)
		require.NoError(t, err)
		require.NoError(t, client.SetStatus(t.Context(), "acme", "infra-live", sha, github.Status{
			State: github.StateSuccess, Context: "c",
		}), base)
	}
	for _, r := range fake.received() {
		require.Equal(t, "/api/v3/repos/acme/infra-live/statuses/"+sha, r.Path)
	}
}

func TestSetStatus_errorsFromGitHub(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ok := github.Status{State: github.StateSuccess, Context: "gantry/merge-lock"}

	t.Run("422 for an unknown commit names it", func(t *testing.T) {
		t.Parallel()
		fake, srv := newFakeGitHub(t, "")
		client, err := github.NewStatusClient(srv.Client(), fake.token, srv.URL)
		require.NoError(t, err)
		unknown := strings.Repeat("0", 40)
		err = client.SetStatus(ctx, "acme", "infra-live", unknown, ok)
		var apiErr *github.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, http.StatusUnprocessableEntity, apiErr.StatusCode)
		require.False(t, apiErr.Temporary())
		require.ErrorContains(t, err, "422")
		require.ErrorContains(t, err, "No commit found for SHA: "+unknown)
		require.ErrorContains(t, err, "gantry/merge-lock")
	})

	t.Run("422 validation errors carry GitHub's details", func(t *testing.T) {
		t.Parallel()
		fake, srv := newFakeGitHub(t, "")
		fake.answer = func(w http.ResponseWriter) bool {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
				"message": "Validation Failed",
				"errors": []any{map[string]any{
					"resource": "Status", "code": "custom",
					"message": "This SHA and context has reached the maximum number of statuses.",
				}},
				"documentation_url": docs, "status": "422",
			})
			return true
		}
		client, err := github.NewStatusClient(srv.Client(), fake.token, srv.URL)
		require.NoError(t, err)
		err = client.SetStatus(ctx, "acme", "infra-live", sha, ok)
		require.ErrorContains(t, err, "422 Unprocessable Entity: Validation Failed (This SHA and context has reached the maximum number of statuses.)")
	})

	t.Run("401 for a bad token", func(t *testing.T) {
		t.Parallel()
		_, srv := newFakeGitHub(t, "")
		client, err := github.NewStatusClient(srv.Client(), "ghs_revoked", srv.URL)
		require.NoError(t, err)
		err = client.SetStatus(ctx, "acme", "infra-live", sha, ok)
		var apiErr *github.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
		require.ErrorContains(t, err, "Bad credentials")
		require.NotContains(t, err.Error(), "ghs_revoked")
	})

	t.Run("404 for a repository the token cannot see", func(t *testing.T) {
		t.Parallel()
		fake, srv := newFakeGitHub(t, "")
		client, err := github.NewStatusClient(srv.Client(), fake.token, srv.URL)
		require.NoError(t, err)
		err = client.SetStatus(ctx, "acme", "secret-repo", sha, ok)
		var apiErr *github.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, http.StatusNotFound, apiErr.StatusCode)
	})

	t.Run("secondary rate limit and 5xx are temporary", func(t *testing.T) {
		t.Parallel()
		fake, srv := newFakeGitHub(t, "")
		fake.answer = func(w http.ResponseWriter) bool {
			w.Header().Set("Retry-After", "60")
			writeJSON(w, http.StatusForbidden, map[string]any{
				"message":           "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
				"documentation_url": "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
				"status":            "403",
			})
			return true
		}
		client, err := github.NewStatusClient(srv.Client(), fake.token, srv.URL)
		require.NoError(t, err)
		err = client.SetStatus(ctx, "acme", "infra-live", sha, ok)
		var apiErr *github.APIError
		require.ErrorAs(t, err, &apiErr)
		require.True(t, apiErr.RateLimited)
		require.True(t, apiErr.Temporary())
		require.Equal(t, time.Minute, apiErr.RetryAfter)

		fake2, srv2 := newFakeGitHub(t, "")
		fake2.answer = func(w http.ResponseWriter) bool {
			writeJSON(w, http.StatusBadGateway, map[string]any{"message": "Server Error"})
			return true
		}
		client2, err := github.NewStatusClient(srv2.Client(), fake2.token, srv2.URL)
		require.NoError(t, err)
		err = client2.SetStatus(ctx, "acme", "infra-live", sha, ok)
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, http.StatusBadGateway, apiErr.StatusCode)
		require.True(t, apiErr.Temporary())
	})

	t.Run("a network failure is not an APIError", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		client, err := github.NewStatusClient(nil, "t", srv.URL)
		require.NoError(t, err)
		err = client.SetStatus(ctx, "acme", "infra-live", sha, ok)
		require.Error(t, err)
		var apiErr *github.APIError
		require.False(t, errors.As(err, &apiErr))
	})
}

func TestSetStatus_refusesBadInputWithoutARequest(t *testing.T) {
	t.Parallel()
	fake, srv := newFakeGitHub(t, "")
	client, err := github.NewStatusClient(srv.Client(), fake.token, srv.URL)
	require.NoError(t, err)
	ok := github.Status{State: github.StatePending, Context: "c"}

	for name, tc := range map[string]struct {
		owner, repo, sha string
		status           github.Status
	}{
		"state":             {"acme", "infra-live", sha, github.Status{State: "running", Context: "c"}},
		"empty state":       {"acme", "infra-live", sha, github.Status{Context: "c"}},
		"empty context":     {"acme", "infra-live", sha, github.Status{State: github.StatePending, Context: " "}},
		"short sha":         {"acme", "infra-live", sha[:7], ok},
		"ref instead":       {"acme", "infra-live", "main", ok},
		"owner with slash":  {"acme/x", "infra-live", sha, ok},
		"repo climbing out": {"acme", "..", sha, ok},
		"empty owner":       {"", "infra-live", sha, ok},
		"target URL":        {"acme", "infra-live", sha, github.Status{State: github.StatePending, Context: "c", TargetURL: "javascript:alert(1)"}},
		"relative URL":      {"acme", "infra-live", sha, github.Status{State: github.StatePending, Context: "c", TargetURL: "/plans/1"}},
	} {
		require.Error(t, client.SetStatus(t.Context(), tc.owner, tc.repo, tc.sha, tc.status), name)
	}
	require.Empty(t, fake.received())
}

func TestNewStatusClient(t *testing.T) {
	t.Parallel()
	_, err := github.NewStatusClient(nil, "", "")
	require.Error(t, err, "no token")
	_, err = github.NewStatusClient(nil, "t", "ftp://example.com/")
	require.Error(t, err)
	_, err = github.NewStatusClient(nil, "t", "not a url")
	require.Error(t, err)
	_, err = github.NewStatusClient(nil, "t", "")
	require.NoError(t, err)
}

func TestOwnerRepo(t *testing.T) {
	t.Parallel()
	owner, repo, err := github.OwnerRepo("acme/infra-live")
	require.NoError(t, err)
	require.Equal(t, "acme", owner)
	require.Equal(t, "infra-live", repo)
	owner, repo, err = github.OwnerRepo("Octo-Org/my.repo_1")
	require.NoError(t, err)
	require.Equal(t, []string{"Octo-Org", "my.repo_1"}, []string{owner, repo})

	for _, bad := range []string{"", "acme", "acme/", "/infra", "acme/infra/extra", "acme/..", "ac me/infra", "acme/infra?x=1"} {
		_, _, err := github.OwnerRepo(bad)
		require.Error(t, err, "%q", bad)
	}
}
