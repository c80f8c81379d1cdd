package infra

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// Plan comments: one comment per pull request summing up the plans of its
// head, unit by unit (to add / change / destroy, with a link to the plan's
// page), next to the commit statuses. Each plan that finishes queues a job
// that works the body out when it runs, under a lock per pull request: so
// several plans finishing together make one update (the later jobs find
// the body unchanged and send nothing), and the comment is edited in place
// (its id is kept), never posted again per push; a comment someone deleted
// is written anew. GitHub refusing it (no permission, validation) is
// logged and given up: the statuses are their own jobs and go on
// regardless.

// planCommentMarker starts every plan comment, so a reader (or a script)
// can tell it from people's comments.
const planCommentMarker = "<!-- gantry:plan-summary -->"

// planCommentDelay lets the plans of one push that finish within it share
// one update of the comment.
const planCommentDelay = time.Second

// queuePlanComment queues the update of a pull request's plan comment.
func (s *Service) queuePlanComment(ctx context.Context, tx jobs.Tx, repo *models.Repository, number int) error {
	if !repo.PlanComments || repo.StatusTokenEnv == "" {
		return nil
	}
	return tx.Enqueue(ctx, jobs.PostPlanCommentArgs{Repository: repo.Name, Number: number},
		&river.InsertOpts{ScheduledAt: s.now().Add(planCommentDelay)})
}

// PostPlanComment writes the plan comment of a pull request as its plans
// are now: created the first time, edited in place after, not sent when
// unchanged.
func (s *Service) PostPlanComment(ctx context.Context, repoName string, number int) error {
	repo, err := models.RepositoryByName(ctx, s.Queue.DB(), repoName)
	if err != nil || !repo.PlanComments {
		return err
	}
	token := s.Getenv(repo.StatusTokenEnv)
	if token == "" || repo.GitHubFullName == "" {
		s.Logger.WarnContext(ctx, "plan comment not written: no token or GitHub repository yet",
			"repository", repo.Name, "token_env", repo.StatusTokenEnv, "pull_request", number)
		return nil
	}
	owner, name, err := github.OwnerRepo(repo.GitHubFullName)
	if err != nil {
		return err
	}
	client, err := github.NewStatusClient(s.HTTPClient, token, s.GitHubAPI)
	if err != nil {
		return err
	}
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		if err := models.LockPlanComment(ctx, tx, repo.Name, number); err != nil {
			return err
		}
		body, err := planCommentBody(ctx, tx, s.BaseURL, repo, number)
		if err != nil || body == "" {
			return err
		}
		prev, err := models.PlanCommentOf(ctx, tx, repo.Name, number)
		if err != nil || (prev != nil && prev.Body == body) {
			return err
		}
		id, err := writeComment(ctx, client, owner, name, number, prev, body)
		var ae *github.APIError
		if errors.As(err, &ae) && !ae.Temporary() {
			// No permission, or GitHub refuses the body: retrying cannot
			// help, and the statuses say what matters.
			s.Logger.WarnContext(ctx, "plan comment refused by GitHub", "repository", repo.Name, "pull_request", number, "error", err)
			return nil
		}
		if err != nil {
			return err
		}
		return models.SavePlanComment(ctx, tx, &models.PlanComment{Repository: repo.Name, PRNumber: number, CommentID: id, Body: body})
	})
}

// writeComment edits the comment written before, or creates one when
// there was none or it was deleted; it returns the comment's id.
func writeComment(ctx context.Context, client *github.StatusClient, owner, name string, number int, prev *models.PlanComment, body string) (int64, error) {
	if prev != nil {
		err := client.EditComment(ctx, owner, name, prev.CommentID, body)
		if !github.IsNotFound(err) {
			return prev.CommentID, err
		}
	}
	return client.CreateComment(ctx, owner, name, number, body)
}

// planCommentBody is the comment for the pull request's head as it is now;
// "" when there is nothing to say (no unit changed and nothing was said
// before).
func planCommentBody(ctx context.Context, db bun.IDB, baseURL string, repo *models.Repository, number int) (string, error) {
	pr, err := models.PullRequestByNumber(ctx, db, repo.Name, number)
	if err != nil {
		return "", err
	}
	plans, err := models.PlansForComment(ctx, db, repo.Name, number, pr.HeadSHA)
	if err != nil {
		return "", err
	}
	if len(plans) == 0 && pr.PlanError == "" {
		prev, err := models.PlanCommentOf(ctx, db, repo.Name, number)
		if err != nil || prev == nil {
			return "", err
		}
	}
	return PlanCommentBody(baseURL, repo.Name, pr, plans), nil
}

// PlanCommentBody is the Markdown of a pull request's plan comment: a row
// per planned unit of the head with what its plan adds, changes and
// destroys and a link to its page.
func PlanCommentBody(baseURL, repo string, pr *models.PullRequest, plans []models.CommentPlan) string {
	var b strings.Builder
	b.WriteString(planCommentMarker + "\n")
	fmt.Fprintf(&b, "### Gantry plans for %s\n\n", codeSHA(pr.HeadSHA))
	switch {
	case pr.PlanError != "":
		fmt.Fprintf(&b, "Not planned: %s\n", cell(pr.PlanError))
	case len(plans) == 0:
		b.WriteString("This head changes no unit: nothing to plan.\n")
	default:
		b.WriteString("| Unit | Plan | To add | To change | To destroy |\n| --- | --- | ---: | ---: | ---: |\n")
		for _, p := range plans {
			add, change, destroy := "", "", ""
			result := p.Status
			switch {
			case p.Status == models.PlanQueued:
				result = "queued"
			case p.Status == models.PlanRunning:
				result = "planning…"
			case p.Status == models.PlanFailed:
				result = "**failed**: " + cell(p.Error)
			case p.HasChanges != nil && !*p.HasChanges:
				result, add, change, destroy = "no changes", "0", "0", "0"
			default:
				result = "changes"
				if m := planVerdict.FindStringSubmatch(p.Verdict); m != nil {
					add, change, destroy = m[1], m[2], m[3]
				}
			}
			fmt.Fprintf(&b, "| [`%s`](%s%s) | %s | %s | %s | %s |\n", p.Path, baseURL, pageurl.Plan(p.ID), result, add, change, destroy)
		}
	}
	fmt.Fprintf(&b, "\n<sub>Updated in place on every push · [this pull request on Gantry](%s%s)</sub>\n", baseURL, pageurl.Pull(repo, pr.Number))
	return b.String()
}

var planVerdict = regexp.MustCompile(`^Plan: (\d+) to add, (\d+) to change, (\d+) to destroy`)

// cell makes text fit one Markdown table cell: one line, no column breaks.
func cell(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	return strings.ReplaceAll(text, "|", `\|`)
}

// codeSHA is a commit's short id as Markdown code.
func codeSHA(sha string) string {
	if len(sha) > 7 {
		return "`" + sha[:7] + "`"
	}
	return "`" + sha + "`"
}
