package githubtest

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gantryhq/gantry/internal/github"
)

// payload is a real pull_request delivery (closed and merged) whose fields
// PullRequest.Payload replaces, so everything else stays as GitHub sends it.
//
//go:embed testdata/pull_request_closed_merged.json
var payload []byte

// PullRequest is what a delivery says about a pull request.
type PullRequest struct {
	Action   string // opened, synchronize, reopened, closed
	Number   int
	Title    string
	Repo     string // owner/name
	CloneURL string // the repository's clone URL (a local path in tests)
	Base     string // branch merged into
	BaseSHA  string
	Head     string // branch merged
	HeadSHA  string
	// HeadRepo is the repository the head branch is in when it is not
	// Repo: a fork's owner/name.
	HeadRepo string
	// Merged with MergeCommitSHA for a closed event that merged.
	Merged         bool
	MergeCommitSHA string
	Author         string
}

// Payload is the delivery's body, as GitHub would send it.
func (p PullRequest) Payload() []byte {
	var d map[string]any
	if err := json.Unmarshal(payload, &d); err != nil {
		panic(err)
	}
	pr := d["pull_request"].(map[string]any)
	repo := d["repository"].(map[string]any)
	d["action"], d["number"] = p.Action, p.Number
	pr["number"], pr["title"] = p.Number, p.Title
	pr["html_url"] = fmt.Sprintf("https://github.com/%s/pull/%d", p.Repo, p.Number)
	pr["state"] = "open"
	if p.Action == "closed" {
		pr["state"] = "closed"
	}
	pr["updated_at"] = time.Now().UTC().Format(time.RFC3339)
	pr["merged"] = p.Merged
	if p.Merged {
		pr["merge_commit_sha"] = p.MergeCommitSHA
	} else {
		pr["merge_commit_sha"], pr["merged_by"], pr["merged_at"] = nil, nil, nil
	}
	if p.Author != "" {
		pr["user"].(map[string]any)["login"] = p.Author
	}
	for branch, v := range map[string][2]string{"base": {p.Base, p.BaseSHA}, "head": {p.Head, p.HeadSHA}} {
		b := pr[branch].(map[string]any)
		b["ref"], b["sha"] = v[0], v[1]
		b["repo"].(map[string]any)["full_name"] = p.Repo
		b["repo"].(map[string]any)["clone_url"] = p.CloneURL
	}
	if p.HeadRepo != "" {
		pr["head"].(map[string]any)["repo"].(map[string]any)["full_name"] = p.HeadRepo
	}
	repo["full_name"], repo["clone_url"] = p.Repo, p.CloneURL
	repo["html_url"] = "https://github.com/" + p.Repo
	out, err := json.Marshal(d)
	if err != nil {
		panic(err)
	}
	return out
}

// Deliver posts body to url as GitHub delivers a webhook: the event and
// delivery id headers and the X-Hub-Signature-256 of the raw body.
func Deliver(ctx context.Context, client *http.Client, url, secret, event, deliveryID string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/044aadd")
	req.Header.Set(github.HeaderEvent, event)
	req.Header.Set(github.HeaderDelivery, deliveryID)
	req.Header.Set(github.HeaderSignature, github.Sign([]byte(secret), body))
	return client.Do(req)
}
