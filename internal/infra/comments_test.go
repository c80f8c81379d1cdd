package infra_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/github/githubtest"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// waitComment waits until the pull request has exactly one comment and it
// satisfies ok, and returns it.
func waitComment(t *testing.T, s *servertest.Server, number int, ok func(body string) bool) githubtest.Comment {
	t.Helper()
	var c githubtest.Comment
	servertest.WaitFor(t, func() (bool, string) {
		cs := s.GitHub.Comments(infratest.GitHubRepo, number)
		if len(cs) != 1 {
			return false, fmt.Sprintf("%d comments on #%d, want 1: %+v", len(cs), number, cs)
		}
		c = cs[0]
		return ok(c.Body), "the comment is:\n" + c.Body
	})
	return c
}

// TestPlanComment_oneCommentUpdatedInPlace: a pull request gets one comment
// summing up its plans per unit (to add / change / destroy, a link to the
// plan's page); a push edits that comment rather than adding one, and a
// comment someone deleted is written anew.
func TestPlanComment_oneCommentUpdatedInPlace(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	r := b.repo
	p := r.OpenPR(21, map[string]string{
		infratest.VPC + "/main.tf": r.Resource(infratest.VPC, "vpc", `"vpc-v2"`),
		// A comment only: planned, no changes.
		infratest.DNS + "/main.tf": "# the zone\n" + r.Resource(infratest.DNS, "zone", `"dns-v1"`),
	})
	b.Deliver(t, "pull_request", r.Event(p, "opened", ""))
	b.WaitStatus(t, p.Head, github.PlanContext(infratest.VPC), "success")

	row := func(unit, rest string) *regexp.Regexp {
		return regexp.MustCompile(`\| \[` + "`" + regexp.QuoteMeta(unit) + "`" + `\]\(http://gantry\.test/infra/plans/\d+\) \| ` + rest + ` \|`)
	}
	first := waitComment(t, b.Server, p.Number, func(body string) bool {
		return strings.Contains(body, "`"+p.Head[:7]+"`") &&
			row(infratest.VPC, `changes \| 0 \| 1 \| 0`).MatchString(body) &&
			row(infratest.DNS, `no changes \| 0 \| 0 \| 0`).MatchString(body)
	})
	require.True(t, strings.HasPrefix(first.Body, "<!-- gantry:plan-summary -->"))
	require.Contains(t, first.Body, "http://gantry.test/infra/live/pulls/21")
	plans, err := models.PlansOfPullRequest(b.ctx, b.DB.Bun, "live", p.Number, p.Head)
	require.NoError(t, err)
	require.Len(t, plans, 2)
	require.Contains(t, first.Body, fmt.Sprintf("/infra/plans/%d)", plans[0].ID))

	// A push: the same comment, edited, now about the new head whose vpc
	// plan fails.
	r.PushPR(&p, map[string]string{infratest.VPC + "/main.tf": r.Resource(infratest.VPC, "vpc", `"vpc-v2"`) + "\nresource \"nope\" {\n"})
	b.Deliver(t, "pull_request", r.Event(p, "synchronize", ""))
	b.WaitStatus(t, p.Head, github.PlanContext(infratest.VPC), "failure")
	second := waitComment(t, b.Server, p.Number, func(body string) bool {
		return strings.Contains(body, "`"+p.Head[:7]+"`") && row(infratest.VPC, `\*\*failed\*\*: init failed \(exit code 1\) \|  \|  \| `).MatchString(body)
	})
	require.Equal(t, first.ID, second.ID, "edited in place, not a second comment")
	require.GreaterOrEqual(t, second.Edits, 1)
	var patched bool
	for _, req := range b.GitHub.Requests() {
		if req.Method == http.MethodPatch && req.Path == fmt.Sprintf("/repos/%s/issues/comments/%d", infratest.GitHubRepo, first.ID) {
			patched = true
		}
	}
	require.True(t, patched, "the comment is updated with PATCH /repos/{o}/{r}/issues/comments/{id}")

	// Someone deletes it: the next push writes a new one.
	b.GitHub.DeleteComment(second.ID)
	r.PushPR(&p, map[string]string{infratest.VPC + "/main.tf": r.Resource(infratest.VPC, "vpc", `"vpc-v3"`)})
	b.Deliver(t, "pull_request", r.Event(p, "synchronize", ""))
	third := waitComment(t, b.Server, p.Number, func(body string) bool {
		return strings.Contains(body, "`"+p.Head[:7]+"`") && row(infratest.VPC, `changes \| 0 \| 1 \| 0`).MatchString(body)
	})
	require.NotEqual(t, second.ID, third.ID)
	// The job records the new id once GitHub answered.
	servertest.WaitFor(t, func() (bool, string) {
		stored, err := models.PlanCommentOf(b.ctx, b.DB.Bun, "live", p.Number)
		require.NoError(t, err)
		return stored != nil && stored.CommentID == third.ID, fmt.Sprintf("stored %+v, want comment %d", stored, third.ID)
	})
}

// TestPlanComment_refusedCommentsDoNotStopStatuses: GitHub refusing the
// comment (403, 422, 500) leaves the commit statuses as they are, posted.
func TestPlanComment_refusedCommentsDoNotStopStatuses(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusForbidden, http.StatusUnprocessableEntity, http.StatusInternalServerError} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{})
			b.GitHub.AnswerComment = func(w http.ResponseWriter) bool {
				githubtest.WriteJSON(w, code, map[string]any{"message": http.StatusText(code)})
				return true
			}
			r := b.repo
			p := r.OpenPR(22, map[string]string{infratest.VPC + "/main.tf": r.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
			b.Deliver(t, "pull_request", r.Event(p, "opened", ""))
			b.WaitStatus(t, p.Head, github.PlanContext(infratest.VPC), "success")
			b.WaitStatus(t, p.Head, github.ContextMergeLock, "success")
			servertest.WaitFor(t, func() (bool, string) {
				for _, req := range b.GitHub.Requests() {
					if req.Method == http.MethodPost && strings.HasSuffix(req.Path, "/issues/22/comments") {
						return true, ""
					}
				}
				return false, "no comment was tried"
			})
			require.Empty(t, b.GitHub.Comments(infratest.GitHubRepo, p.Number))
			stored, err := models.PlanCommentOf(b.ctx, b.DB.Bun, "live", p.Number)
			require.NoError(t, err)
			require.Nil(t, stored)
		})
	}
}

// TestPlanComment_off: plan_comments: false writes no comment; the
// statuses are posted as before.
func TestPlanComment_off(t *testing.T) {
	t.Parallel()
	s := servertest.Services(t)
	repo, _ := infratest.Standard(t)
	yaml := repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{ada}, 1, 1)
	s.Sync(t, strings.Replace(yaml, "scan: graph\n", "scan: graph\n    plan_comments: false\n", 1))
	s.StartWorkers(t)
	p := repo.OpenPR(23, map[string]string{infratest.VPC + "/main.tf": repo.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
	s.Deliver(t, "pull_request", repo.Event(p, "opened", ""))
	s.WaitStatus(t, p.Head, github.PlanContext(infratest.VPC), "success")
	// The plan's comment job would have been queued with its status: once
	// no infra job is left, none was.
	servertest.WaitFor(t, func() (bool, string) {
		var n int
		err := s.DB.Bun.NewRaw("SELECT count(*) FROM river_job WHERE queue = 'infra' AND state NOT IN ('completed', 'discarded', 'cancelled')").Scan(t.Context(), &n)
		require.NoError(t, err)
		return n == 0, fmt.Sprintf("%d infra jobs left", n)
	})
	for _, req := range s.GitHub.Requests() {
		require.NotContains(t, req.Path, "/comments", "no comment request")
	}
	var queued int
	require.NoError(t, s.DB.Bun.NewRaw("SELECT count(*) FROM river_job WHERE kind = 'post_plan_comment'").Scan(t.Context(), &queued))
	require.Zero(t, queued)
}
