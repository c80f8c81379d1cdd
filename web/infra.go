package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"

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
	Infra           *infra.Service
	webhookFailures *failureLimit
}

// InfraArea is the infrastructure area (seed 000) on the web: repositories,
// pull requests and their plans, runs with their execution graph,
// executions with live output and votes; GitHub's webhook and the JSON API
// for runs, executions and votes (a bot votes with a token of scope vote).
// The machine endpoints are in this file, the JSON they speak in
// infra_api.go, the pages in infra_pages.go.
func InfraArea(svc *infra.Service) Area {
	return Area{
		Name: "infra", Title: "Infrastructure", Path: "/infra",
		Blurb: "Terragrunt plans per pull request; dependency-ordered applies after merge, with votes.",
		Summary: func(ctx context.Context) (string, error) {
			a, err := models.InfraActivityNow(ctx, svc.Queue.DB())
			if err != nil || a.Repositories == 0 {
				return "", err
			}
			return fmt.Sprintf("%s · %s in progress · %s waiting for votes", plural(a.Repositories, "repository", "repositories"),
				plural(a.RunsActive, "run", "runs"), plural(a.Voting, "execution", "executions")), nil
		},
		Routes: func(r *Router) {
			s := &infraHandlers{Server: r.s, Infra: svc, webhookFailures: newFailureLimit(webhookFailuresPerMinute)}
			viewer, operator, approver := models.RoleViewer, models.RoleOperator, models.RoleApprover
			// The output tails are JSON for the pages' own script.
			r.Page(http.MethodGet, "/infra", s.infraPage, viewer)
			r.Page(http.MethodGet, "/infra/runs", s.runsPage, viewer)
			r.Page(http.MethodGet, "/infra/runs/:id", s.runPage, viewer)
			r.Page(http.MethodPost, "/infra/runs/:id/abort", s.abortRunForm, operator)
			r.Page(http.MethodGet, "/infra/executions/:execution_id", s.executionPage, viewer)
			r.Page(http.MethodGet, "/infra/executions/:execution_id/output", s.executionOutputTail, viewer)
			r.Page(http.MethodPost, "/infra/executions/:execution_id/vote", s.voteForm, approver)
			for _, choice := range infraInterruptedChoices {
				r.Page(http.MethodPost, "/infra/executions/:execution_id/"+choice.Path, s.executionChoiceForm(choice.Choice, choice.Done, s.Infra.ResolveInterrupted), operator)
			}
			for _, choice := range infraRollbackChoices {
				r.Page(http.MethodPost, "/infra/executions/:execution_id/"+choice.Path, s.executionChoiceForm(choice.Choice, choice.Done, s.Infra.ResolveRollback), operator)
			}
			r.Page(http.MethodGet, "/infra/plans/:id", s.planPage, viewer)
			r.Page(http.MethodGet, "/infra/plans/:id/output", s.planOutputTail, viewer)
			r.Page(http.MethodGet, "/infra/:repo/pulls/:number", s.pullRequestPage, viewer)
			r.Page(http.MethodGet, "/infra/drift/:id", s.driftCheckPage, viewer)
			r.Page(http.MethodPost, "/infra/drift/:id/reconcile", s.reconcileDriftForm, operator)

			r.API(http.MethodGet, "/infra/repositories", s.apiRepositories, viewer, auth.ScopeRead)
			r.API(http.MethodGet, "/infra/runs", s.apiListRuns, viewer, auth.ScopeRead)
			r.API(http.MethodGet, "/infra/runs/:id", s.apiGetRun, viewer, auth.ScopeRead)
			r.API(http.MethodPost, "/infra/runs/:id/abort", s.apiAbortRun, operator, auth.ScopeWrite)
			r.API(http.MethodGet, "/infra/executions/:execution_id", s.apiGetExecution, viewer, auth.ScopeRead)
			r.API(http.MethodGet, "/infra/drift", s.apiListDrift, viewer, auth.ScopeRead)
			r.API(http.MethodPost, "/infra/drift/:id/reconcile", s.apiReconcileDrift, operator, auth.ScopeWrite)
			r.API(http.MethodPost, "/infra/executions/:execution_id/votes", s.apiVote, approver, auth.ScopeVote)
			for _, choice := range infraInterruptedChoices {
				r.API(http.MethodPost, "/infra/executions/:execution_id/"+choice.Path, s.apiResolveInterrupted(choice.Choice), operator, auth.ScopeWrite)
			}
			for _, choice := range infraRollbackChoices {
				r.API(http.MethodPost, "/infra/executions/:execution_id/"+choice.Path, s.apiResolveRollback(choice.Choice), operator, auth.ScopeWrite)
			}

			r.VotePage(infra.ExecutionKind, s.executionLinkView)
			r.VoterHelp(s.infraVoterHelp)

			// GitHub's deliveries: authenticated by their signature, not a session.
			r.Webhook(webhookPath, s.githubWebhook, github.MaxPayloadSize)
		},
	}
}

const (
	// webhookPath is GitHub's way in (Router.Webhook: signed, no CSRF).
	webhookPath = "/webhooks/github"
	// webhookFailuresPerMinute is how many deliveries from one address may
	// fail their signature in a minute (per process): GitHub's own never do
	// once the secret is right, and each costs reading up to 25 MB.
	webhookFailuresPerMinute = 10
	// infraAPIRunsPage is how many runs the API lists unless asked.
	infraAPIRunsPage = 50
)

// githubWebhook answers a GitHub delivery: 401 for a bad signature, 200 for
// a ping or a delivery already received, 204 for events that are not
// Gantry's, 202 once the delivery is recorded with its job. The work is
// never done in the request.
//
// A delivery costs its reader up to 25 MB, so what can be refused without
// the body is: an address whose deliveries keep failing their signature
// (429 for the rest of its minute), and a delivery without a signature
// (401, body unread).
func (s *infraHandlers) githubWebhook(c echo.Context) error {
	ip := c.RealIP()
	if !s.webhookFailures.allowed(ip) {
		c.Response().Header().Set("Retry-After", "60")
		return apperr.New(apperr.RateLimited, "Too many deliveries from %s failed their signature; wait a minute.", ip)
	}
	h := c.Request().Header
	var body []byte
	if h.Get(github.HeaderSignature) != "" {
		var err error
		body, err = io.ReadAll(io.LimitReader(c.Request().Body, github.MaxPayloadSize+1))
		if err != nil {
			return apperr.New(apperr.Invalid, "Reading the delivery: %v.", err)
		}
		if len(body) > github.MaxPayloadSize {
			return apperr.New(apperr.Invalid, "The delivery is larger than GitHub's %d MB limit.", github.MaxPayloadSize>>20)
		}
	}
	res, err := s.Infra.ReceiveWebhook(c.Request().Context(), infra.Delivery{
		Event: h.Get(github.HeaderEvent), ID: h.Get(github.HeaderDelivery), Signature: h.Get(github.HeaderSignature), Body: body,
	})
	if apperr.CodeOf(err) == apperr.Unauthorized {
		s.webhookFailures.failed(ip)
	}
	if err != nil {
		return err
	}
	switch res.Outcome {
	case infra.WebhookIgnored:
		c.Response().Header().Set("X-Gantry-Ignored", res.Message)
		return c.NoContent(http.StatusNoContent)
	case infra.WebhookAccepted:
		return c.JSON(http.StatusAccepted, infraWebhookAnswerJSON{Message: res.Message})
	}
	// A ping, or a redelivery of what was received before: GitHub need not
	// send it again.
	return c.JSON(http.StatusOK, infraWebhookAnswerJSON{Message: res.Message})
}

// apiRepositories lists the configured repositories with their accounts and
// merge locks.
func (s *infraHandlers) apiRepositories(c echo.Context) error {
	repos, err := models.RepositoriesWithLocks(c.Request().Context(), s.DB.Bun)
	if err != nil {
		return err
	}
	out := make([]infraRepositoryJSON, len(repos))
	for i := range repos {
		out[i] = infraRepositoryOf(&repos[i])
	}
	return c.JSON(http.StatusOK, map[string]any{"repositories": out})
}

// infraRunFilter reads the filters of the API's runs listing.
func infraRunFilter(c echo.Context) (models.RunFilter, error) {
	f := models.RunFilter{Repository: c.QueryParam("repository"), Status: c.QueryParam("status"), Limit: infraAPIRunsPage}
	bad := apperr.Fields{}
	if f.Status != "" && !slices.Contains(infraRunStatuses, f.Status) {
		bad.Add("status", "must be queued, scanning, running, succeeded or failed")
	}
	if v := c.QueryParam("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			bad.Add("before", "must be a run id")
		}
		f.BeforeID = n
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
	f, err := infraRunFilter(c)
	if err != nil {
		return err
	}
	runs, err := models.ListRuns(c.Request().Context(), s.DB.Bun, f)
	if err != nil {
		return err
	}
	page := infraRunsPageJSON{Runs: infraRunsOf(runs)}
	// A full page has a next one, which may be empty: clients stop at
	// either.
	if len(runs) == f.Limit {
		page.Next = "/api/v1/infra/runs?" + withParam(c.QueryParams(), "before", strconv.FormatInt(runs[len(runs)-1].ID, 10))
	}
	return c.JSON(http.StatusOK, page)
}

// apiGetRun is a run with its executions and whether it holds the merge lock.
func (s *infraHandlers) apiGetRun(c echo.Context) error {
	ctx := c.Request().Context()
	run, err := s.runParam(c)
	if err != nil {
		return err
	}
	xs, err := models.ExecutionsOfRun(ctx, s.DB.Bun, run.ID)
	if err != nil {
		return err
	}
	lock, err := models.MergeLockOf(ctx, s.DB.Bun, run.Repository)
	if err != nil {
		return err
	}
	ripples, changes, err := models.RipplesOfRun(ctx, s.DB.Bun, run.ID)
	if err != nil {
		return err
	}
	out := infraRunDetailJSON{Run: infraRunOf(run), Executions: infraExecutionsOf(xs), HoldsMergeLock: lock != nil && lock.RunID == run.ID}
	rs := newInfraRipples(xs, ripples, changes)
	for i := range xs {
		rs.decorate(&out.Executions[i], &xs[i])
	}
	return c.JSON(http.StatusOK, out)
}

// apiAbortRun aborts a run that is not over (operators).
func (s *infraHandlers) apiAbortRun(c echo.Context) error {
	id, err := pathID(c, "run")
	if err != nil {
		return err
	}
	var in infraAbortRequest
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
	return c.JSON(http.StatusOK, infraRunAnswerJSON{Run: infraRunOf(run)})
}

// apiResolveInterrupted is an operator's choice for an interrupted apply
// (operators): the execution as it is now.
func (s *infraHandlers) apiResolveInterrupted(choice string) echo.HandlerFunc {
	return func(c echo.Context) error {
		var in infraAbortRequest
		if c.Request().ContentLength != 0 {
			if err := bindJSON(c, &in); err != nil {
				return err
			}
		}
		id := c.Param("execution_id")
		if err := s.Infra.ResolveInterrupted(c.Request().Context(), id, choice, principalOf(c).Actor(), in.Reason); err != nil {
			return err
		}
		return s.apiGetExecution(c)
	}
}

// apiGetExecution is an execution with its votes and outputs.
func (s *infraHandlers) apiGetExecution(c echo.Context) error {
	ctx := c.Request().Context()
	x, err := s.executionParam(c)
	if err != nil {
		return err
	}
	run, err := models.RunByID(ctx, s.DB.Bun, x.RunID)
	if err != nil {
		return err
	}
	votes, err := s.Infra.ExecutionVotes(ctx, x)
	if err != nil {
		return err
	}
	rs, err := s.ripplesOf(ctx, run.ID)
	if err != nil {
		return err
	}
	out := infraExecutionDetailOf(x, run, votes)
	rs.decorate(&out.infraExecutionJSON, x)
	if err := withNewResources(ctx, s.DB.Bun, x, &out); err != nil { // infra_rollback.go
		return err
	}
	if err := withRollback(ctx, s.DB.Bun, x, &out); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// apiVote records the caller's vote on an execution's plan.
func (s *infraHandlers) apiVote(c echo.Context) error {
	var in infraVoteRequest
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
	return c.JSON(http.StatusOK, infraVoteResultJSON{State: string(res.State), Approvals: res.Approvals, Rejections: res.Rejections, Waiting: nonNilSlice(res.Waiting)})
}
