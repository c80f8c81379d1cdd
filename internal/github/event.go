package github

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// The event types Gantry reads (the X-GitHub-Event header).
const (
	EventPing        = "ping"
	EventPullRequest = "pull_request"
)

// The pull_request actions Gantry acts on.
const (
	ActionOpened      = "opened"
	ActionSynchronize = "synchronize" // new commits on the head branch
	ActionReopened    = "reopened"
	ActionClosed      = "closed" // merged or not: see PullRequest.Merged
)

// ErrPayload is wrapped by ParseEvent's errors about a body that is not a
// well-formed event of its type; the web layer answers 400.
var ErrPayload = errors.New("malformed webhook payload")

// Event is what ParseEvent returns: a Ping, a PullRequest, or Ignored.
type Event interface {
	// EventType is the X-GitHub-Event the event came as.
	EventType() string
}

// Repository is the repository an event is about.
type Repository struct {
	FullName      string // "owner/name"
	CloneURL      string // https
	SSHURL        string // git@github.com:owner/name.git
	HTMLURL       string
	DefaultBranch string
	Private       bool
}

// Ping is the event GitHub sends when a webhook is created, or on demand.
type Ping struct {
	Zen    string
	HookID int64
	// Events are the events the hook is subscribed to ("*" is all); a hook
	// for Gantry needs pull_request.
	Events []string
	// ContentType is the hook's payload format, "json" or "form".
	ContentType string
	// Repository is zero for an organisation's hook.
	Repository Repository
	Sender     string
}

// EventType returns "ping".
func (Ping) EventType() string { return EventPing }

// Subscribed reports whether the hook sends event.
func (p Ping) Subscribed(event string) bool {
	for _, e := range p.Events {
		if e == "*" || e == event {
			return true
		}
	}
	return false
}

// Branch is one side of a pull request.
type Branch struct {
	Ref string // branch name, without refs/heads/
	SHA string
	// RepoFullName is the repository the branch is in: for a pull request
	// from a fork, the fork ("" if the fork was deleted). Its commits are in
	// the base repository as refs/pull/<number>/head either way.
	RepoFullName string
}

// PullRequest is a pull_request event.
type PullRequest struct {
	Action  string // opened, synchronize, reopened, closed, edited, labeled, …
	Number  int
	Title   string
	HTMLURL string
	// User is the login of the pull request's author, Sender the login of
	// whoever caused this event (pushed, merged, closed).
	User   string
	Sender string
	Draft  bool
	Base   Branch
	Head   Branch
	// Merged is set on a closed event when the pull request was merged,
	// by MergedBy, into Base.Ref as MergeCommitSHA. For an open pull request
	// MergeCommitSHA is GitHub's test merge, or empty.
	Merged         bool
	MergedBy       string
	MergeCommitSHA string
	// Before and After are the old and new head of a synchronize event.
	Before, After string
	// UpdatedAt is when GitHub last changed the pull request (seconds):
	// deliveries handled out of order are told apart by it.
	UpdatedAt  time.Time
	Repository Repository
}

// EventType returns "pull_request".
func (PullRequest) EventType() string { return EventPullRequest }

// IsActivity reports whether the event asks for plans: the pull request was
// opened, reopened, or got new commits.
func (p PullRequest) IsActivity() bool {
	switch p.Action {
	case ActionOpened, ActionSynchronize, ActionReopened:
		return true
	}
	return false
}

// IsMerge reports whether the pull request was merged (into Base.Ref).
func (p PullRequest) IsMerge() bool {
	return p.Action == ActionClosed && p.Merged
}

// PullRef is the ref under which the base repository keeps the pull
// request's head, from forks too: refs/pull/<number>/head.
func (p PullRequest) PullRef() string {
	return fmt.Sprintf("refs/pull/%d/head", p.Number)
}

// Ignored is an event of a type Gantry does not act on.
type Ignored struct {
	Type string
}

// EventType returns the event's type.
func (i Ignored) EventType() string { return i.Type }

// ParseEvent parses the body of a webhook delivery whose X-GitHub-Event is
// eventType. ping and pull_request are parsed and checked for the fields
// Gantry needs; any other type is Ignored without looking at the body. A
// body sent with content type application/x-www-form-urlencoded
// (payload=…) is read too. Verify the signature first.
func ParseEvent(eventType string, body []byte) (Event, error) {
	switch eventType {
	case "":
		return nil, fmt.Errorf("%w: no event type (%s header)", ErrPayload, HeaderEvent)
	case EventPing, EventPullRequest:
	default:
		return Ignored{Type: eventType}, nil
	}
	body, err := jsonPayload(body)
	if err != nil {
		return nil, err
	}
	if eventType == EventPing {
		return parsePing(body)
	}
	return parsePullRequest(body)
}

// jsonPayload returns the JSON of a body that is JSON or a form with a
// payload field.
func jsonPayload(body []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(body)
	if !bytes.HasPrefix(trimmed, []byte("payload=")) {
		return trimmed, nil
	}
	form, err := url.ParseQuery(string(trimmed))
	if err != nil {
		return nil, fmt.Errorf("%w: form body: %w", ErrPayload, err)
	}
	return []byte(form.Get("payload")), nil
}

type userJSON struct {
	Login string `json:"login"`
}

type repoJSON struct {
	FullName      string `json:"full_name"`
	CloneURL      string `json:"clone_url"`
	SSHURL        string `json:"ssh_url"`
	HTMLURL       string `json:"html_url"`
	DefaultBranch string `json:"default_branch"`
	Private       bool   `json:"private"`
}

func (r *repoJSON) repository() Repository {
	if r == nil {
		return Repository{}
	}
	return Repository(*r)
}

type branchJSON struct {
	Ref  string    `json:"ref"`
	SHA  string    `json:"sha"`
	Repo *repoJSON `json:"repo"`
}

func (b branchJSON) branch() Branch {
	br := Branch{Ref: b.Ref, SHA: b.SHA}
	if b.Repo != nil {
		br.RepoFullName = b.Repo.FullName
	}
	return br
}

func parsePing(body []byte) (Ping, error) {
	var p struct {
		Zen    string `json:"zen"`
		HookID int64  `json:"hook_id"`
		Hook   struct {
			Events []string `json:"events"`
			Config struct {
				ContentType string `json:"content_type"`
			} `json:"config"`
		} `json:"hook"`
		Repository *repoJSON `json:"repository"`
		Sender     userJSON  `json:"sender"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return Ping{}, fmt.Errorf("%w: ping: %w", ErrPayload, err)
	}
	if p.HookID == 0 {
		return Ping{}, fmt.Errorf("%w: ping: no hook_id", ErrPayload)
	}
	return Ping{
		Zen:         p.Zen,
		HookID:      p.HookID,
		Events:      p.Hook.Events,
		ContentType: p.Hook.Config.ContentType,
		Repository:  p.Repository.repository(),
		Sender:      p.Sender.Login,
	}, nil
}

func parsePullRequest(body []byte) (PullRequest, error) {
	var e struct {
		Action      string `json:"action"`
		Number      int    `json:"number"`
		Before      string `json:"before"`
		After       string `json:"after"`
		PullRequest *struct {
			Number         int        `json:"number"`
			HTMLURL        string     `json:"html_url"`
			Title          string     `json:"title"`
			User           userJSON   `json:"user"`
			Draft          bool       `json:"draft"`
			UpdatedAt      *time.Time `json:"updated_at"`
			Merged         bool       `json:"merged"`
			MergedBy       *userJSON  `json:"merged_by"`
			MergeCommitSHA *string    `json:"merge_commit_sha"`
			Head           branchJSON `json:"head"`
			Base           branchJSON `json:"base"`
		} `json:"pull_request"`
		Repository *repoJSON `json:"repository"`
		Sender     userJSON  `json:"sender"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return PullRequest{}, fmt.Errorf("%w: pull_request: %w", ErrPayload, err)
	}
	bad := func(why string) (PullRequest, error) {
		return PullRequest{}, fmt.Errorf("%w: pull_request: %s", ErrPayload, why)
	}
	pr := e.PullRequest
	switch {
	case e.Action == "":
		return bad("no action")
	case pr == nil:
		return bad("no pull_request object")
	case e.Repository == nil || e.Repository.FullName == "":
		return bad("no repository.full_name")
	}
	number := e.Number
	if number == 0 {
		number = pr.Number
	}
	switch {
	case number <= 0:
		return bad("no number")
	case pr.Base.Ref == "":
		return bad("no pull_request.base.ref")
	case !isSHA(pr.Base.SHA):
		return bad(fmt.Sprintf("pull_request.base.sha %q is not a commit id", pr.Base.SHA))
	case !isSHA(pr.Head.SHA):
		return bad(fmt.Sprintf("pull_request.head.sha %q is not a commit id", pr.Head.SHA))
	}
	p := PullRequest{
		Action:     e.Action,
		Number:     number,
		Title:      pr.Title,
		HTMLURL:    webURL(pr.HTMLURL),
		User:       pr.User.Login,
		Sender:     e.Sender.Login,
		Draft:      pr.Draft,
		Base:       pr.Base.branch(),
		Head:       pr.Head.branch(),
		Merged:     pr.Merged,
		Before:     e.Before,
		After:      e.After,
		Repository: e.Repository.repository(),
	}
	if pr.UpdatedAt != nil {
		p.UpdatedAt = pr.UpdatedAt.UTC()
	}
	if pr.MergedBy != nil {
		p.MergedBy = pr.MergedBy.Login
	}
	if pr.MergeCommitSHA != nil {
		p.MergeCommitSHA = *pr.MergeCommitSHA
	}
	if p.IsMerge() && !isSHA(p.MergeCommitSHA) {
		return bad(fmt.Sprintf("merged, but merge_commit_sha %q is not a commit id", p.MergeCommitSHA))
	}
	return p, nil
}

// isSHA reports whether s is a full commit id (SHA-1 or SHA-256, lower-case
// hex as GitHub writes them).
func isSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// webURL is u when it is a web address (http or https with a host), and ""
// otherwise: pages link to it, and a delivery's javascript: or data: URL
// must not become a link.
func webURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
		return ""
	}
	return u
}
