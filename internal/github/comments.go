package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	gh "github.com/google/go-github/v75/github"
)

// Issue comments, for the one plan-summary comment Gantry keeps on a pull
// request (a pull request is an issue to this API). The token needs
// "Pull requests: write" (fine-grained) or the repo scope.

// MaxCommentBody is the longest comment body GitHub accepts, in characters.
const MaxCommentBody = 65536

// CreateComment writes a new comment on issue or pull request number and
// returns its id.
func (c *StatusClient) CreateComment(ctx context.Context, owner, repo string, number int, body string) (int64, error) {
	if err := validComment(owner, repo, body); err != nil {
		return 0, err
	}
	if number <= 0 {
		return 0, fmt.Errorf("github: comment: %d is not a pull request number", number)
	}
	created, _, err := c.client.Issues.CreateComment(ctx, owner, repo, number, &gh.IssueComment{Body: gh.Ptr(body)})
	if err != nil {
		return 0, fmt.Errorf("commenting on %s/%s#%d: %w", owner, repo, number, apiError(err))
	}
	return created.GetID(), nil
}

// EditComment replaces the body of comment id. A comment that is gone
// (deleted by someone) is an *APIError with StatusCode 404: see
// IsNotFound.
func (c *StatusClient) EditComment(ctx context.Context, owner, repo string, id int64, body string) error {
	if err := validComment(owner, repo, body); err != nil {
		return err
	}
	if _, _, err := c.client.Issues.EditComment(ctx, owner, repo, id, &gh.IssueComment{Body: gh.Ptr(body)}); err != nil {
		return fmt.Errorf("editing comment %d on %s/%s: %w", id, owner, repo, apiError(err))
	}
	return nil
}

// IsNotFound reports whether err is GitHub's 404 (a deleted comment, or a
// repository the token cannot see).
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound
}

func validComment(owner, repo, body string) error {
	if err := validOwnerRepo(owner, repo); err != nil {
		return err
	}
	if body == "" || len([]rune(body)) > MaxCommentBody {
		return fmt.Errorf("github: comment: the body must have 1 to %d characters (has %d)", MaxCommentBody, len([]rune(body)))
	}
	return nil
}
