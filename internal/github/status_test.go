package github_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/github/githubtest"
)

const sha = "b7a4c1e9d2f35a6b8c0d1e2f3a4b5c6d7e8f9a01"

const docs = "https://docs.github.com/rest/commits/statuses#create-a-commit-status"

func newFakeGitHub(t *testing.T, prefix string) *githubtest.Server {
	return githubtest.New(t, githubtest.Options{Prefix: prefix, Repos: []string{"acme/infra-live"}, Commits: []string{sha}})
}

func TestSetStatus(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	fake := newFakeGitHub(t, "")
	client, err := github.NewStatusClient(fake.HTTP.Client(), fake.Token, fake.URL)
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

	got := fake.Requests()
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
	fake := newFakeGitHub(t, "")
	client, err := github.NewStatusClient(fake.HTTP.Client(), fake.Token, fake.URL)
	require.NoError(t, err)

	long := strings.Repeat("é", 200)
	require.NoError(t, client.SetStatus(t.Context(), "acme", "infra-live", sha, github.Status{
		State: github.StateFailure, Context: "gantry/plan: live/dev/rds", Description: long,
	}))
	d := fake.Requests()[0].Body["description"].(string)
	require.Equal(t, 140, utf8.RuneCountInString(d))
	require.Equal(t, strings.Repeat("é", 139)+"…", d)

	exact := strings.Repeat("x", 140)
	require.NoError(t, client.SetStatus(t.Context(), "acme", "infra-live", sha, github.Status{
		State: github.StateError, Context: "c", Description: exact,
	}))
	require.Equal(t, exact, fake.Requests()[1].Body["description"])
}

func TestSetStatus_enterpriseBaseURL(t *testing.T) {
	t.Parallel()
	fake := newFakeGitHub(t, "/api/v3")
	for _, base := range []string{fake.URL, fake.URL + "/"} {
		client, err := github.NewStatusClient(fake.HTTP.Client(), fake.Token, base)
		require.NoError(t, err)
		require.NoError(t, client.SetStatus(t.Context(), "acme", "infra-live", sha, github.Status{
			State: github.StateSuccess, Context: "c",
		}), base)
	}
	for _, r := range fake.Requests() {
		require.Equal(t, "/api/v3/repos/acme/infra-live/statuses/"+sha, r.Path)
	}
}

func TestSetStatus_errorsFromGitHub(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ok := github.Status{State: github.StateSuccess, Context: "gantry/merge-lock"}

	t.Run("422 for an unknown commit names it", func(t *testing.T) {
		t.Parallel()
		fake := newFakeGitHub(t, "")
		client, err := github.NewStatusClient(fake.HTTP.Client(), fake.Token, fake.URL)
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
		fake := newFakeGitHub(t, "")
		fake.Answer = func(w http.ResponseWriter) bool {
			githubtest.WriteJSON(w, http.StatusUnprocessableEntity, map[string]any{
				"message": "Validation Failed",
				"errors": []any{map[string]any{
					"resource": "Status", "code": "custom",
					"message": "This SHA and context has reached the maximum number of statuses.",
				}},
				"documentation_url": docs, "status": "422",
			})
			return true
		}
		client, err := github.NewStatusClient(fake.HTTP.Client(), fake.Token, fake.URL)
		require.NoError(t, err)
		err = client.SetStatus(ctx, "acme", "infra-live", sha, ok)
		require.ErrorContains(t, err, "422 Unprocessable Entity: Validation Failed (This SHA and context has reached the maximum number of statuses.)")
	})

	t.Run("401 for a bad token", func(t *testing.T) {
		t.Parallel()
		fake := newFakeGitHub(t, "")
		client, err := github.NewStatusClient(fake.HTTP.Client(), "ghs_revoked", fake.URL)
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
		fake := newFakeGitHub(t, "")
		client, err := github.NewStatusClient(fake.HTTP.Client(), fake.Token, fake.URL)
		require.NoError(t, err)
		err = client.SetStatus(ctx, "acme", "secret-repo", sha, ok)
		var apiErr *github.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, http.StatusNotFound, apiErr.StatusCode)
	})

	t.Run("secondary rate limit and 5xx are temporary", func(t *testing.T) {
		t.Parallel()
		fake := newFakeGitHub(t, "")
		fake.Answer = func(w http.ResponseWriter) bool {
			w.Header().Set("Retry-After", "60")
			githubtest.WriteJSON(w, http.StatusForbidden, map[string]any{
				"message":           "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
				"documentation_url": "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
				"status":            "403",
			})
			return true
		}
		client, err := github.NewStatusClient(fake.HTTP.Client(), fake.Token, fake.URL)
		require.NoError(t, err)
		err = client.SetStatus(ctx, "acme", "infra-live", sha, ok)
		var apiErr *github.APIError
		require.ErrorAs(t, err, &apiErr)
		require.True(t, apiErr.RateLimited)
		require.True(t, apiErr.Temporary())
		require.Equal(t, time.Minute, apiErr.RetryAfter)

		fake2 := newFakeGitHub(t, "")
		fake2.Answer = func(w http.ResponseWriter) bool {
			githubtest.WriteJSON(w, http.StatusBadGateway, map[string]any{"message": "Server Error"})
			return true
		}
		client2, err := github.NewStatusClient(fake2.HTTP.Client(), fake2.Token, fake2.URL)
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
	fake := newFakeGitHub(t, "")
	client, err := github.NewStatusClient(fake.HTTP.Client(), fake.Token, fake.URL)
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
	require.Empty(t, fake.Requests())
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
