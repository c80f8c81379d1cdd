package githubtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

const commentDocs = "https://docs.github.com/rest/issues/comments"

// Comment is an issue comment as the server holds it.
type Comment struct {
	ID     int64
	Repo   string // owner/name
	Number int    // the issue or pull request
	Body   string
	// Edits counts the updates it received after it was created.
	Edits int
}

// Comments returns the comments on repo's pull request number that were
// not deleted, oldest first.
func (s *Server) Comments(repo string, number int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.comments {
		if c.Repo == repo && c.Number == number {
			out = append(out, *c)
		}
	}
	return out
}

// DeleteComment deletes a comment, as someone would on GitHub.
func (s *Server) DeleteComment(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range s.comments {
		if c.ID == id {
			s.comments = append(s.comments[:i], s.comments[i+1:]...)
			return
		}
	}
}

// commentRequest reads a comment request's body and checks what every
// comment request is refused for: the token, the repository, the body. It
// answers and returns false when it refused.
func (s *Server) commentRequest(w http.ResponseWriter, r *http.Request) (string, bool) {
	var body map[string]any
	raw, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(raw, &body); err != nil {
		s.record(r, nil)
		WriteJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON", "documentation_url": commentDocs, "status": "400"})
		return "", false
	}
	s.record(r, body)
	if s.AnswerComment != nil && s.AnswerComment(w) {
		return "", false
	}
	owner, repo := r.PathValue("owner"), r.PathValue("repo")
	switch {
	case r.Header.Get("Authorization") != "Bearer "+s.Token:
		WriteJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"})
		return "", false
	case !s.repos[owner+"/"+repo]:
		WriteJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": commentDocs, "status": "404"})
		return "", false
	}
	text, _ := body["body"].(string)
	if text == "" || utf8.RuneCountInString(text) > 65536 {
		WriteJSON(w, http.StatusUnprocessableEntity, map[string]any{
			"message": "Validation Failed",
			"errors": []any{map[string]any{"resource": "IssueComment", "code": "custom", "field": "body",
				"message": "body is too long (maximum is 65536 characters)"}},
			"documentation_url": commentDocs, "status": "422",
		})
		return "", false
	}
	return text, true
}

// createComment answers POST /repos/{owner}/{repo}/issues/{number}/comments
// ("Create an issue comment"): 201 with the comment.
func (s *Server) createComment(w http.ResponseWriter, r *http.Request) {
	text, ok := s.commentRequest(w, r)
	if !ok {
		return
	}
	number, err := strconv.Atoi(r.PathValue("number"))
	if err != nil || number <= 0 {
		WriteJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": commentDocs, "status": "404"})
		return
	}
	s.mu.Lock()
	c := &Comment{ID: s.nextID, Repo: r.PathValue("owner") + "/" + r.PathValue("repo"), Number: number, Body: text}
	s.nextID++
	s.comments = append(s.comments, c)
	out := *c
	s.mu.Unlock()
	WriteJSON(w, http.StatusCreated, commentJSON(out))
}

// editComment answers PATCH /repos/{owner}/{repo}/issues/comments/{id}
// ("Update an issue comment"): 200 with the comment, 404 when it was
// deleted.
func (s *Server) editComment(w http.ResponseWriter, r *http.Request) {
	text, ok := s.commentRequest(w, r)
	if !ok {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	repo := r.PathValue("owner") + "/" + r.PathValue("repo")
	s.mu.Lock()
	var found *Comment
	for _, c := range s.comments {
		if c.ID == id && c.Repo == repo {
			found = c
		}
	}
	if found == nil {
		s.mu.Unlock()
		WriteJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": commentDocs, "status": "404"})
		return
	}
	found.Body = text
	found.Edits++
	out := *found
	s.mu.Unlock()
	WriteJSON(w, http.StatusOK, commentJSON(out))
}

func commentJSON(c Comment) map[string]any {
	now := time.Now().UTC().Format(time.RFC3339)
	return map[string]any{
		"id": c.ID, "node_id": "IC_kwDOMG8xTs6AAAAB", "body": c.Body,
		"url":        fmt.Sprintf("https://api.github.com/repos/%s/issues/comments/%d", c.Repo, c.ID),
		"html_url":   fmt.Sprintf("https://github.com/%s/pull/%d#issuecomment-%d", c.Repo, c.Number, c.ID),
		"issue_url":  fmt.Sprintf("https://api.github.com/repos/%s/issues/%d", c.Repo, c.Number),
		"created_at": now, "updated_at": now, "author_association": "NONE",
		"user": map[string]any{"login": "gantry[bot]", "id": 987654, "node_id": "BOT_kgDOAA8sJg", "type": "Bot", "site_admin": false},
	}
}
