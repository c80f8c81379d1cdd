package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/models"
	approvalsview "github.com/gantryhq/gantry/views/pages/approvals"
)

// What waits for people's votes: /approvals for the signed-in user, and the
// page of an emailed voting link, which needs no sign-in because its signed
// token is the credential (bound to one voter and one execution, expiring).

// approvalsPage is /approvals: the executions whose plan waits for the
// signed-in user's vote.
func (s *Server) approvalsPage(c echo.Context) error {
	ctx := c.Request().Context()
	db := s.DB.Bun
	user := principalOf(c).User
	email := strings.ToLower(user.Email)
	xs, err := models.ExecutionsAwaitingVoter(ctx, db, email)
	if err != nil {
		return err
	}
	v := approvalsview.IndexView{Voter: user.Email, CanVote: user.Role.Includes(models.RoleApprover)}
	if len(xs) == 0 {
		repos, err := models.ListRepositories(ctx, db)
		if err != nil {
			return err
		}
		v.NoAccounts = len(repos) == 0
		for _, r := range repos {
			for _, a := range r.Accounts {
				if (approval.Policy{Voters: a.Voters}).IsVoter(email) {
					v.VoterOf = append(v.VoterOf, fmt.Sprintf("You vote for account %s of %s (%s).", a.Name, r.Name, thresholds(a.MinApprovals, a.MinRejections, len(a.Voters))))
				}
			}
		}
		return s.render(c, http.StatusOK, approvalsview.Index(v))
	}

	var ids, runIDs, approvalIDs []int64
	for i := range xs {
		ids = append(ids, xs[i].ID)
		runIDs = append(runIDs, xs[i].RunID)
		if xs[i].ApprovalID != nil {
			approvalIDs = append(approvalIDs, *xs[i].ApprovalID)
		}
	}
	outputs, err := models.PlanOutputs(ctx, db, ids)
	if err != nil {
		return err
	}
	runs, err := models.RunsByIDs(ctx, db, runIDs)
	if err != nil {
		return err
	}
	approvals, err := models.ApprovalsByIDs(ctx, db, approvalIDs)
	if err != nil {
		return err
	}
	votes, err := models.VotesOfApprovals(ctx, db, approvalIDs)
	if err != nil {
		return err
	}
	runOf := map[int64]*models.Run{}
	for i := range runs {
		runOf[runs[i].ID] = &runs[i]
	}
	approvalOf := map[int64]*models.Approval{}
	for i := range approvals {
		approvalOf[approvals[i].ID] = &approvals[i]
	}
	votesOf := map[int64][]models.Vote{}
	for _, vote := range votes {
		votesOf[vote.ApprovalID] = append(votesOf[vote.ApprovalID], vote)
	}
	for i := range xs {
		x := &xs[i]
		run, a := runOf[x.RunID], approvalOf[*x.ApprovalID]
		if run == nil || a == nil {
			continue
		}
		res := infra.Tally(a, votesOf[a.ID])
		row := approvalsview.Row{
			ExecutionID: x.ExecutionID, URL: executionURL(x.ExecutionID) + "#vote", Repository: run.Repository,
			PR: "#" + strconv.Itoa(run.PRNumber), PRURL: pullURL(run.Repository, run.PRNumber), PRTitle: run.PRTitle,
			Unit: x.CfgPath, Account: x.AccountName, Summary: orNone(infra.PlanSummary(outputs[x.ID]), "The plan has changes; open it to read them."),
			Since: clock(a.CreatedAt), SinceISO: iso(a.CreatedAt),
			Tally: fmt.Sprintf("%d of %d approvals", res.Approvals, a.MinApprovals),
		}
		for _, vote := range res.Votes {
			if vote.Voter == email {
				row.YourVote = fmt.Sprintf("You voted %s; you can change it until it is decided.", vote.Decision)
			}
		}
		v.Rows = append(v.Rows, row)
	}
	return s.render(c, http.StatusOK, approvalsview.Index(v))
}

// linkPage is an emailed voting link: the run, the unit, what was applied
// before it, the plan, the votes so far and the voter's Approve/Reject.
func (s *Server) linkPage(c echo.Context) error {
	noStore(c)
	token := c.Param("token")
	claims, err := s.Infra.VerifyLink(token)
	if err != nil {
		return s.linkError(c, claims, err)
	}
	v, err := s.linkView(c.Request().Context(), token, claims)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, approvalsview.Link(v))
}

// linkVote records the vote of a link's voter, then shows the link's page
// again (post/redirect/get) with what was recorded.
func (s *Server) linkVote(c echo.Context) error {
	noStore(c)
	token := c.Param("token")
	decision := c.FormValue("decision")
	claims, res, err := s.Infra.VoteWithLink(c.Request().Context(), token, decision, strings.TrimSpace(c.FormValue("comment")))
	self := linkURL(token)
	var ae *apperr.Error
	switch {
	case err == nil:
		x, xerr := models.ExecutionByExecutionID(c.Request().Context(), s.DB.Bun, infra.LinkExecutionID(claims))
		if xerr != nil {
			return xerr
		}
		return s.redirectWithFlash(c, self, true, voteRecorded("your", decision, res, x))
	case errors.As(err, &ae) && ae.Code == apperr.Forbidden:
		return s.linkError(c, claims, err)
	case errors.As(err, &ae) && (ae.Code == apperr.Conflict || ae.Code == apperr.Invalid):
		return s.redirectWithFlash(c, self, false, ae.Error())
	}
	return err
}

// linkView gathers what a voting link's page shows.
func (s *Server) linkView(ctx context.Context, token string, claims approval.Claims) (approvalsview.LinkView, error) {
	db := s.DB.Bun
	id := infra.LinkExecutionID(claims)
	x, err := models.ExecutionByExecutionID(ctx, db, id)
	if errors.Is(err, models.ErrNotFound) {
		return approvalsview.LinkView{}, apperr.New(apperr.NotFound, "Execution %s, which this link votes on, no longer exists.", id)
	}
	if err != nil {
		return approvalsview.LinkView{}, err
	}
	run, err := models.RunByID(ctx, db, x.RunID)
	if err != nil {
		return approvalsview.LinkView{}, err
	}
	siblings, err := models.ExecutionsOfRun(ctx, db, run.ID)
	if err != nil {
		return approvalsview.LinkView{}, err
	}
	a, votes, err := s.approvalOf(ctx, x)
	if err != nil {
		return approvalsview.LinkView{}, err
	}
	v := approvalsview.LinkView{
		Voter: claims.Voter, ExecutionID: x.ExecutionID, Repository: run.Repository,
		PR: "#" + strconv.Itoa(run.PRNumber), PRTitle: run.PRTitle, MergeCommit: run.MergeCommit,
		Unit: x.CfgPath, Account: x.AccountName, State: execState(x), Summary: infra.PlanSummary(x.PlanOutput),
		Deps: depsOf(x, siblings), Plan: x.PlanOutput, Votes: votesView(x, a, votes),
		Action: linkURL(token), ExecutionURL: executionURL(x.ExecutionID),
	}
	v.Open = v.Votes.Open
	switch {
	case v.Open && !(approval.Policy{Voters: x.Voters}).IsVoter(claims.Voter):
		v.Open = false
		v.Votes.Note = fmt.Sprintf("%s is no longer one of the voters of account %s (%s), so this link cannot vote.", claims.Voter, x.AccountName, strings.Join(x.Voters, ", "))
	case v.Open:
		if mine := yourVote(v.Votes.Rows, claims.Voter); mine != "" {
			v.Votes.Note = mine
		}
	}
	return v, nil
}

// linkError is the 403 page of a link that does not work; for an expired
// one it names the execution it was for and offers to sign in and vote
// from the dashboard.
func (s *Server) linkError(c echo.Context, claims approval.Claims, err error) error {
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Code != apperr.Forbidden {
		return err
	}
	v := approvalsview.LinkErrorView{Message: ae.Message, SignInURL: "/login"}
	if errors.Is(err, approval.ErrExpired) && claims.Subject != "" {
		id := infra.LinkExecutionID(claims)
		v.Expired, v.ExecutionID, v.Voter = true, id, claims.Voter
		v.SignInURL = "/login?" + url.Values{"next": {executionURL(id)}}.Encode()
		ctx := c.Request().Context()
		if x, err := models.ExecutionByExecutionID(ctx, s.DB.Bun, id); err == nil {
			v.Unit, v.Account = x.CfgPath, x.AccountName
			if run, err := models.RunByID(ctx, s.DB.Bun, x.RunID); err == nil {
				v.Repository, v.PR = run.Repository, "#"+strconv.Itoa(run.PRNumber)
			}
		}
	}
	return s.render(c, http.StatusForbidden, approvalsview.LinkError(v))
}

// linkPrefix is where the emailed voting links point.
const linkPrefix = "/approvals/link/"

func linkURL(token string) string { return linkPrefix + url.PathEscape(token) }

// noStore keeps a page whose URL is a credential out of caches.
func noStore(c echo.Context) {
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("X-Robots-Tag", "noindex")
}
