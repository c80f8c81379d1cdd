// Package githubtest is GitHub as Gantry's tests meet it: a REST API server
// that answers "create a commit status" and "create / update an issue
// comment" as GitHub documents them and records what it was sent, and pull_request deliveries built from a real payload
// and signed with the webhook secret exactly as GitHub signs them.
package githubtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// Token is the token the server accepts unless Options say otherwise.
const Token = "ghs_test_token"

const docs = "https://docs.github.com/rest/commits/statuses#create-a-commit-status"

// Options shape a Server.
type Options struct {
	// Prefix is the API's path prefix ("/api/v3" for GitHub Enterprise).
	Prefix string
	// Token is the one token accepted; empty: Token.
	Token string
	// Repos are the "owner/name" repositories the token can see.
	Repos []string
	// Commits are the commit ids that exist; nil: every well-formed id.
	Commits []string
}

// Request is what the server received.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any
}

// Status is a commit status the server accepted.
type Status struct {
	Repo, SHA                              string
	State, Context, Description, TargetURL string
}

// Server is an in-test GitHub REST API.
type Server struct {
	URL   string // the API's base URL, prefix included
	Token string
	// Answer, when set, may answer a status request itself (returning
	// true), to play GitHub's errors.
	Answer func(w http.ResponseWriter) bool
	// AnswerComment does the same for comment requests (create and edit).
	AnswerComment func(w http.ResponseWriter) bool
	HTTP          *httptest.Server

	repos   map[string]bool
	commits map[string]bool

	mu       sync.Mutex
	requests []Request
	statuses []Status
	nextID   int64
	comments []*Comment
}

// New starts a server that lives until the test ends.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{Token: o.Token, repos: map[string]bool{}, nextID: 1}
	if s.Token == "" {
		s.Token = Token
	}
	for _, r := range o.Repos {
		s.repos[r] = true
	}
	if o.Commits != nil {
		s.commits = map[string]bool{}
		for _, c := range o.Commits {
			s.commits[c] = true
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+o.Prefix+"/repos/{owner}/{repo}/statuses/{sha}", s.createStatus)
	mux.HandleFunc("POST "+o.Prefix+"/repos/{owner}/{repo}/issues/{number}/comments", s.createComment)
	mux.HandleFunc("PATCH "+o.Prefix+"/repos/{owner}/{repo}/issues/comments/{id}", s.editComment)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.record(r, nil)
		WriteJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404"})
	})
	s.HTTP = httptest.NewServer(mux)
	t.Cleanup(s.HTTP.Close)
	s.URL = s.HTTP.URL + o.Prefix
	return s
}

// Requests returns every request received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Statuses returns the statuses accepted for sha, in order.
func (s *Server) Statuses(sha string) []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Status
	for _, st := range s.statuses {
		if st.SHA == sha {
			out = append(out, st)
		}
	}
	return out
}

// Latest is the newest status of sha under context, as GitHub shows it on
// the pull request.
func (s *Server) Latest(sha, context string) (Status, bool) {
	all := s.Statuses(sha)
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Context == context {
			return all[i], true
		}
	}
	return Status{}, false
}

// WriteJSON answers as GitHub's API does, rate-limit headers included.
func WriteJSON(w http.ResponseWriter, code int, v any) {
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

func (s *Server) record(r *http.Request, body map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
}

var commitID = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

func validationFailed(w http.ResponseWriter, field, message string) {
	WriteJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"message": "Validation Failed",
		"errors": []any{map[string]any{
			"resource": "Status", "code": "custom", "field": field, "message": message,
		}},
		"documentation_url": docs, "status": "422",
	})
}

// createStatus answers POST /repos/{owner}/{repo}/statuses/{sha} as
// GitHub's "Create a commit status" documents it: 201 with the status, 401
// for a bad token, 404 for a repository the token cannot see, 422 for an
// unknown commit or an invalid field.
func (s *Server) createStatus(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	raw, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(raw, &body); err != nil {
		s.record(r, nil)
		WriteJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON", "documentation_url": docs, "status": "400"})
		return
	}
	s.record(r, body)
	if s.Answer != nil && s.Answer(w) {
		return
	}
	owner, repo, commit := r.PathValue("owner"), r.PathValue("repo"), r.PathValue("sha")
	switch {
	case r.Header.Get("Authorization") != "Bearer "+s.Token:
		WriteJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"})
		return
	case !s.repos[owner+"/"+repo]:
		WriteJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": docs, "status": "404"})
		return
	}
	state, _ := body["state"].(string)
	switch state {
	case "pending", "success", "failure", "error":
	default:
		validationFailed(w, "state", "state is not included in the list")
		return
	}
	description, _ := body["description"].(string)
	if utf8.RuneCountInString(description) > 140 {
		validationFailed(w, "description", "description is too long (maximum is 140 characters)")
		return
	}
	if !commitID.MatchString(commit) || (s.commits != nil && !s.commits[commit]) {
		WriteJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "No commit found for SHA: " + commit, "documentation_url": docs, "status": "422"})
		return
	}
	context, ok := body["context"].(string)
	if !ok {
		context = "default"
	}
	targetURL, _ := body["target_url"].(string)
	s.mu.Lock()
	id := s.nextID
	s.nextID++
	s.statuses = append(s.statuses, Status{Repo: owner + "/" + repo, SHA: commit, State: state, Context: context, Description: description, TargetURL: targetURL})
	s.mu.Unlock()
	now := time.Now().UTC().Format(time.RFC3339)
	statusURL := fmt.Sprintf("https://api.github.com/repos/%s/%s/statuses/%s", owner, repo, commit)
	w.Header().Set("Location", statusURL)
	WriteJSON(w, http.StatusCreated, map[string]any{
		"url": statusURL, "avatar_url": "https://avatars.githubusercontent.com/in/123456?v=4",
		"id": id, "node_id": "SC_kwDOMG8xTs8AAAAB", "state": state,
		"description": body["description"], "target_url": body["target_url"], "context": context,
		"created_at": now, "updated_at": now,
		"creator": map[string]any{"login": "gantry[bot]", "id": 987654, "node_id": "BOT_kgDOAA8sJg", "type": "Bot", "site_admin": false},
	})
}
