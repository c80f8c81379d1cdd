package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	gh "github.com/google/go-github/v75/github"
)

// State is the state of a commit status.
type State string

// The states GitHub accepts.
const (
	StatePending State = "pending"
	StateSuccess State = "success"
	StateFailure State = "failure"
	StateError   State = "error"
)

// The contexts of Gantry's commit statuses.
const (
	// ContextMergeLock is the status that blocks merging while a deployment
	// of the repository is in progress.
	ContextMergeLock = "gantry/merge-lock"
	// contextPlanPrefix starts the status of one unit's plan.
	contextPlanPrefix = "gantry/plan: "
)

// PlanContext returns the context of the plan status of the unit at path
// (relative to the repository root): "gantry/plan: <path>".
func PlanContext(path string) string { return contextPlanPrefix + path }

// MaxDescription is the longest description GitHub accepts, in characters.
const MaxDescription = 140

// DefaultHTTPTimeout bounds a request when NewStatusClient is given no
// http.Client.
const DefaultHTTPTimeout = 30 * time.Second

// Status is one commit status.
type Status struct {
	State State
	// Context tells this status apart from the commit's others; the latest
	// status of each context is what GitHub shows.
	Context string
	// Description is cut to MaxDescription characters, ending in "…".
	Description string
	// TargetURL is the page the status links to (an http or https URL), or
	// empty.
	TargetURL string
}

// StatusClient sets commit statuses through GitHub's REST API.
type StatusClient struct {
	client *gh.Client
}

// NewStatusClient returns a client that authenticates with token (a
// personal access token or an installation token). httpClient nil means one
// with DefaultHTTPTimeout. baseURL is the REST API's root: empty means
// https://api.github.com/; GitHub Enterprise Server's is
// https://HOST/api/v3/.
func NewStatusClient(httpClient *http.Client, token, baseURL string) (*StatusClient, error) {
	if token == "" {
		return nil, errors.New("github: a token is required to set commit statuses")
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	c := gh.NewClient(httpClient).WithAuthToken(token)
	c.UserAgent = "gantry"
	if baseURL != "" {
		u, err := url.Parse(baseURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("github: base URL %q is not an http(s) URL", baseURL)
		}
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		c.BaseURL = u
	}
	return &StatusClient{client: c}, nil
}

// SetStatus creates a commit status on sha (a full commit id) in
// owner/repo. An answer from GitHub other than success is an *APIError.
func (c *StatusClient) SetStatus(ctx context.Context, owner, repo, sha string, s Status) error {
	if err := validOwnerRepo(owner, repo); err != nil {
		return err
	}
	if !isSHA(sha) {
		return fmt.Errorf("github: commit status: %q is not a full commit id", sha)
	}
	switch s.State {
	case StatePending, StateSuccess, StateFailure, StateError:
	default:
		return fmt.Errorf("github: commit status: state %q is not pending, success, failure or error", s.State)
	}
	if strings.TrimSpace(s.Context) == "" {
		return errors.New("github: commit status: context is empty")
	}
	if s.TargetURL != "" {
		u, err := url.Parse(s.TargetURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("github: commit status: target URL %q is not an http(s) URL", s.TargetURL)
		}
	}
	status := &gh.RepoStatus{
		State:   gh.Ptr(string(s.State)),
		Context: gh.Ptr(s.Context),
	}
	if s.Description != "" {
		status.Description = gh.Ptr(truncate(s.Description, MaxDescription))
	}
	if s.TargetURL != "" {
		status.TargetURL = gh.Ptr(s.TargetURL)
	}
	if _, _, err := c.client.Repositories.CreateStatus(ctx, owner, repo, sha, status); err != nil {
		return fmt.Errorf("setting commit status %q on %s/%s@%s: %w", s.Context, owner, repo, sha, apiError(err))
	}
	return nil
}

// truncate cuts s to at most n characters, the last one "…" if it cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == n-1 {
			break
		}
		count++
	}
	return s[:i] + "…"
}

// APIError is an error answer from GitHub's API.
type APIError struct {
	StatusCode int
	// Message is GitHub's message ("Validation Failed", "Bad credentials",
	// "No commit found for SHA: …"), with the details of its errors list.
	Message string
	// RetryAfter is how long GitHub asks to wait when rate limited.
	RetryAfter time.Duration
	// RateLimited is set for a primary or secondary rate limit.
	RateLimited bool
	err         error
}

func (e *APIError) Error() string {
	return fmt.Sprintf("github: %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// Unwrap returns go-github's error.
func (e *APIError) Unwrap() error { return e.err }

// Temporary reports whether trying again later may succeed: GitHub failed
// (5xx) or rate limited the request. Other answers (401, 404, 422) need a
// change of token, configuration or input first.
func (e *APIError) Temporary() bool {
	return e.RateLimited || e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500
}

// apiError turns go-github's error answers into an *APIError; other errors
// (network, context) are returned as they are.
func apiError(err error) error {
	var (
		rate  *gh.RateLimitError
		abuse *gh.AbuseRateLimitError
		resp  *gh.ErrorResponse
	)
	switch {
	case errors.As(err, &rate):
		e := &APIError{StatusCode: statusCode(rate.Response), Message: rate.Message, RateLimited: true, err: err}
		if !rate.Rate.Reset.IsZero() {
			e.RetryAfter = max(time.Until(rate.Rate.Reset.Time), 0)
		}
		return e
	case errors.As(err, &abuse):
		e := &APIError{StatusCode: statusCode(abuse.Response), Message: abuse.Message, RateLimited: true, err: err}
		if abuse.RetryAfter != nil {
			e.RetryAfter = *abuse.RetryAfter
		}
		return e
	case errors.As(err, &resp):
		msg := resp.Message
		var details []string
		for _, d := range resp.Errors {
			switch {
			case d.Message != "":
				details = append(details, d.Message)
			case d.Field != "":
				details = append(details, fmt.Sprintf("%s %s is %s", d.Resource, d.Field, d.Code))
			}
		}
		if len(details) > 0 {
			msg += " (" + strings.Join(details, "; ") + ")"
		}
		return &APIError{StatusCode: statusCode(resp.Response), Message: msg, err: err}
	}
	return err
}

func statusCode(r *http.Response) int {
	if r == nil {
		return 0
	}
	return r.StatusCode
}

// namePart is what GitHub allows in an owner or repository name.
var namePart = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func validOwnerRepo(owner, repo string) error {
	for _, p := range []string{owner, repo} {
		if !namePart.MatchString(p) || p == "." || p == ".." {
			return fmt.Errorf("github: %q/%q is not an owner and a repository name", owner, repo)
		}
	}
	return nil
}

// OwnerRepo splits a repository's full name, "owner/name", as webhooks
// carry it.
func OwnerRepo(fullName string) (owner, repo string, err error) {
	owner, repo, ok := strings.Cut(fullName, "/")
	if !ok || validOwnerRepo(owner, repo) != nil {
		return "", "", fmt.Errorf("github: %q is not a repository's full name (owner/name)", fullName)
	}
	return owner, repo, nil
}
