package web

import (
	"io"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/models"
)

// infraHandlers are the infrastructure area's handlers: the server's
// shared parts and the area's service.
type infraHandlers struct {
	*Server
	Infra *infra.Service
}

// InfraArea is the infrastructure area (seed 000) on the web: repositories,
// pull requests and their plans, runs with their execution graph,
// executions with live output and votes; GitHub's webhook and the JSON API
// for runs, executions and votes (a bot votes with a token of scope vote).
// The machine endpoints are in this file, the pages in infra_pages.go.
func InfraArea(svc *infra.Service) Area {
	return Area{
		Name: "infra", Title: "Infrastructure", Path: "/infra",
		Blurb: "Terragrunt plans per pull request; dependency-ordered applies after merge, with votes.",
		Routes: func(r *Router) {
			s := &infraHandlers{Server: r.s, Infra: svc}
			viewer, operator, approver := models.RoleViewer, models.RoleOperator, models.RoleApprover
			// The output tails are JSON for the pages' own script.
			r.Page(http.MethodGet, "/infra", s.infraPage, viewer)
			r.Page(http.MethodGet, "/infra/runs", s.runsPage, viewer)
			r.Page(http.MethodGet, "/infra/runs/:id", s.runPage, viewer)
			r.Page(http.MethodPost, "/infra/runs/:id/abort", s.abortRunForm, operator)
			r.Page(http.MethodGet, "/infra/executions/:execution_id", s.executionPage, viewer)
			r.Page(http.MethodGet, "/infra/executions/:execution_id/output", s.executionOutputTail, viewer)
			r.Page(http.MethodPost, "/infra/executions/:execution_id/vote", s.voteForm, approver)
			r.Page(http.MethodGet, "/infra/plans/:id", s.planPage, viewer)
			r.Page(http.MethodGet, "/infra/plans/:id/output", s.planOutputTail, viewer)
			r.Page(http.MethodGet, "/infra/:repo/pulls/:number", s.pullRequestPage, viewer)

			r.API(http.MethodGet, "/infra/repositories", s.apiRepositories, viewer, auth.ScopeRead)
			r.API(http.MethodGet, "/infra/runs", s.apiListRuns, viewer, auth.ScopeRead)
			r.API(http.MethodGet, "/infra/runs/:id", s.apiGetRun, viewer, auth.ScopeRead)
			r.API(http.MethodPost, "/infra/runs/:id/abort", s.apiAbortRun, operator, auth.ScopeWrite)
			r.API(http.MethodGet, "/infra/executions/:execution_id", s.apiGetExecution, viewer, auth.ScopeRead)
			r.API(http.MethodPost, "/infra/executions/:execution_id/votes", s.apiVote, approver, auth.ScopeVote)

			r.VotePage(infra.ExecutionKind, s.executionLinkView)

			// GitHub's deliveries: authenticated by their signature, not a session.
			r.Webhook(webhookPath, s.githubWebhook, github.MaxPayloadSize)
		},
	}
}

const (
	webhookPath = "/webhooks/github"
	runsPerPage = 50
)

// githubWebhook answers a GitHub delivery: 401 for a bad signature, 200 for
// a ping or a delivery already received, 204 for events that are not
// Gantry's, 202 once the delivery is recorded with its job. The work is
// never done in the request.
func (s *infraHandlers) githubWebhook(c echo.Context) error {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, github.MaxPayloadSize+1))
	if err != nil {
		return apperr.New(apperr.Invalid, "Reading the delivery: %v.", err)
	}
	if len(body) > github.MaxPayloadSize {
		return apperr.New(apperr.Invalid, "The delivery is larger than GitHub's %d MB limit.", github.MaxPayloadSize>>20)
	}
	h := c.Request().Header
	res, err := s.Infra.ReceiveWebhook(c.Request().Context(), infra.Delivery{
		Event: h.Get(github.HeaderEvent), ID: h.Get(github.HeaderDelivery), Signature: h.Get(github.HeaderSignature), Body: body,
	})
	if err != nil {
		return err
	}
	switch res.Outcome {
	case infra.WebhookIgnored:
		c.Response().Header().Set("X-Gantry-Ignored", res.Message)
		return c.NoContent(http.StatusNoContent)
	case infra.WebhookAccepted:
		return c.JSON(http.StatusAccepted, map[string]string{"message": res.Message})
	}
	// A ping, or a redelivery of what was received before: GitHub need not
	// send it again.
	return c.JSON(http.StatusOK, map[string]string{"message": res.Message})
}

// apiRepositories lists the configured repositories with their accounts and
// merge locks.
func (s *infraHandlers) apiRepositories(c echo.Context) error {
	ctx := c.Request().Context()
	repos, err := models.ListRepositories(ctx, s.DB.Bun)
	if err != nil {
		return err
	}
	type repoJSON struct {
		models.Repository
		MergeLock *models.MergeLock `json:"merge_lock"`
	}
	out := make([]repoJSON, len(repos))
	for i, r := range repos {
		lock, err := models.MergeLockOf(ctx, s.DB.Bun, r.Name)
		if err != nil {
			return err
		}
		out[i] = repoJSON{Repository: r, MergeLock: lock}
	}
	return c.JSON(http.StatusOK, map[string]any{"repositories": out})
}

// runFilter reads the filters of a runs listing.
func runFilter(c echo.Context) (models.RunFilter, error) {
	f := models.RunFilter{Repository: c.QueryParam("repository"), Status: c.QueryParam("status"), Limit: runsPerPage}
	bad := apperr.Fields{}
	switch f.Status {
	case "", models.RunQueued, models.RunScanning, models.RunRunning, models.RunSucceeded, models.RunFailed:
	default:
		bad.Add("status", "must be queued, scanning, running, succeeded or failed")
	}
	for name, dst := range map[string]*int64{"before": &f.BeforeID} {
		if v := c.QueryParam(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				bad.Add(name, "must be a run id")
			}
			*dst = n
		}
	}
	if v := c.QueryParam("pr"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			bad.Add("pr", "must be a pull request number")
		}
		f.PRNumber = n
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			bad.Add("limit", "must be 1 to 500")
		}
		f.Limit = n
	}
	return f, bad.Err()
}

// apiListRuns lists runs, newest first, a page at a time.
func (s *infraHandlers) apiListRuns(c echo.Context) error {
	f, err := runFilter(c)
	if err != nil {
		return err
	}
	runs, err := models.ListRuns(c.Request().Context(), s.DB.Bun, f)
	if err != nil {
		return err
	}
	page := map[string]any{"runs": nonNilSlice(runs)}
	if len(runs) == f.Limit {
		page["next"] = "/api/v1/infra/runs?" + withParam(c.QueryParams(), "before", strconv.FormatInt(runs[len(runs)-1].ID, 10))
	}
	return c.JSON(http.StatusOK, page)
}

// apiGetRun is a run with its executions and the merge lock it holds.
func (s *infraHandlers) apiGetRun(c echo.Context) error {
	ctx := c.Request().Context()
	id, err := pathID(c, "run")
	if err != nil {
		return err
	}
	run, err := models.RunByID(ctx, s.DB.Bun, id)
	if err != nil {
		return notFoundAs(err, "No run %d.", id)
	}
	xs, err := models.ExecutionsOfRun(ctx, s.DB.Bun, id)
	if err != nil {
		return err
	}
	lock, err := models.MergeLockOf(ctx, s.DB.Bun, run.Repository)
	if err != nil {
		return err
	}
	holds := lock != nil && lock.RunID == run.ID
	return c.JSON(http.StatusOK, map[string]any{"run": run, "executions": nonNilSlice(xs), "holds_merge_lock": holds})
}

// abortRequest says why a run is aborted.
type abortRequest struct {
	Reason string `json:"reason"`
}

// apiAbortRun aborts a run that is not over (operators).
func (s *infraHandlers) apiAbortRun(c echo.Context) error {
	id, err := pathID(c, "run")
	if err != nil {
		return err
	}
	var in abortRequest
	if c.Request().ContentLength != 0 {
		if err := bindJSON(c, &in); err != nil {
			return err
		}
	}
	if err := s.Infra.AbortRun(c.Request().Context(), id, principalOf(c).Actor(), in.Reason); err != nil {
		return err
	}
	run, err := models.RunByID(c.Request().Context(), s.DB.Bun, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"run": run})
}

// executionJSON is an execution as the seed's record has it, with the votes
// split into approval and rejection voters, and its outputs.
type executionJSON struct {
	*models.Execution
	// The seed's record also names the pull request and the commits.
	PRID     int    `json:"pr_id"`
	CommitID string `json:"commit_id"`
	BaseRef  string `json:"base_ref"`
	HeadRef  string `json:"head_ref"`

	ApprovalVoters  []string      `json:"approval_voters"`
	RejectionVoters []string      `json:"rejection_voters"`
	Votes           []models.Vote `json:"votes"`
	ApprovalState   string        `json:"approval_state,omitempty"`
	PlanOutput      string        `json:"plan_output"`
	ApplyOutput     string        `json:"apply_output"`
	RunURL          string        `json:"run_url"`
}

func (s *infraHandlers) apiGetExecution(c echo.Context) error {
	ctx := c.Request().Context()
	x, err := models.ExecutionByExecutionID(ctx, s.DB.Bun, c.Param("execution_id"))
	if err != nil {
		return notFoundAs(err, "No execution %s.", c.Param("execution_id"))
	}
	run, err := models.RunByID(ctx, s.DB.Bun, x.RunID)
	if err != nil {
		return err
	}
	out := executionJSON{Execution: x, PRID: run.PRNumber, CommitID: run.MergeCommit, BaseRef: run.BaseRef, HeadRef: run.HeadRef,
		ApprovalVoters: []string{}, RejectionVoters: []string{}, Votes: []models.Vote{},
		PlanOutput: x.PlanOutput, ApplyOutput: x.ApplyOutput, RunURL: "/api/v1/infra/runs/" + strconv.FormatInt(x.RunID, 10)}
	if x.ApprovalID != nil {
		a, err := models.ApprovalByID(ctx, s.DB.Bun, *x.ApprovalID)
		if err != nil {
			return err
		}
		votes, err := models.VotesOf(ctx, s.DB.Bun, a.ID)
		if err != nil {
			return err
		}
		out.ApprovalState, out.Votes = a.State, nonNilSlice(votes)
		tally := approvals.Tally(a, votes)
		for _, v := range tally.Votes {
			if v.Decision == approval.Approve {
				out.ApprovalVoters = append(out.ApprovalVoters, v.Voter)
			} else {
				out.RejectionVoters = append(out.RejectionVoters, v.Voter)
			}
		}
	}
	return c.JSON(http.StatusOK, out)
}

// voteRequest is a vote sent to the API; the voter is the caller.
type voteRequest struct {
	Decision string `json:"decision"`
	Comment  string `json:"comment"`
}

// apiVote records the caller's vote on an execution's plan.
func (s *infraHandlers) apiVote(c echo.Context) error {
	var in voteRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	p := principalOf(c)
	res, err := s.Infra.Vote(c.Request().Context(), infra.VoteInput{
		ExecutionID: c.Param("execution_id"), Voter: p.User.Email, Decision: in.Decision, Comment: in.Comment, Via: approvals.ViaAPI,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{
		"state": res.State, "approvals": res.Approvals, "rejections": res.Rejections, "waiting": nonNilSlice(res.Waiting),
	})
}
