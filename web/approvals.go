package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/views/components"
	approvalsview "github.com/gantryhq/gantry/views/pages/approvals"
)

// What waits for people's votes, of every kind of subject: /approvals for
// the signed-in user, and the page of an emailed voting link, which needs
// no sign-in because its signed token is the credential (bound to one voter
// and one subject, expiring).

// approvalsPerPage is how many waiting approvals /approvals shows at once.
const approvalsPerPage = 50

// VotePageFunc builds what a voting link's page shows of subject id to
// voter: the area's part of the page around the votes; the approval and its
// votes are loaded already. An area registers one per kind of subject
// (Router.VotePage); a kind without one gets a page from its summary
// (genericLinkView).
type VotePageFunc func(ctx context.Context, id, voter string, a *models.Approval, votes []models.Vote) (approvalsview.LinkView, error)

// approvalsPage is /approvals: every subject waiting for the signed-in
// user's vote, the longest waiting first.
func (s *Server) approvalsPage(c echo.Context) error {
	ctx := c.Request().Context()
	user := principalOf(c).User
	page, err := approvalsPageParam(c)
	if err != nil {
		return err
	}
	kind := c.QueryParam("kind")
	w, err := s.Approvals.WaitingFor(ctx, user.Email, approvals.WaitingFilter{Kind: kind, Limit: approvalsPerPage, Offset: (page - 1) * approvalsPerPage})
	if err != nil {
		return err
	}
	v := approvalsview.IndexView{Voter: user.Email, CanVote: user.Role.Includes(models.RoleApprover)}
	if w.Total == 0 {
		if v.Empty, err = s.emptyApprovals(ctx, user.Email); err != nil {
			return err
		}
		return s.render(c, http.StatusOK, approvalsview.Index(v))
	}
	for _, it := range w.Items {
		v.Rows = append(v.Rows, approvalRow(it))
	}
	if w.Total > approvalsPerPage {
		first := (page-1)*approvalsPerPage + 1
		v.Showing = fmt.Sprintf("%d–%d of %d", first, first+len(w.Items)-1, w.Total)
		at := func(p int) string {
			q := url.Values{"page": {strconv.Itoa(p)}}
			if kind != "" {
				q.Set("kind", kind)
			}
			return pageurl.Approvals + "?" + q.Encode()
		}
		if page > 1 {
			v.PrevURL = at(page - 1)
		}
		if page*approvalsPerPage < w.Total {
			v.NextURL = at(page + 1)
		}
	}
	return s.render(c, http.StatusOK, approvalsview.Index(v))
}

// approvalsPageParam is /approvals's ?page=, 1 when absent.
func approvalsPageParam(c echo.Context) (int, error) {
	raw := c.QueryParam("page")
	if raw == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		return 0, apperr.Field("page", "must be a whole number from 1")
	}
	return n, nil
}

func approvalRow(it approvals.Item) approvalsview.Row {
	sum := it.Summary
	row := approvalsview.Row{
		Kind: it.Subject.Kind, ID: it.Subject.ID, Title: sum.Title, URL: orNone(sum.VoteURL, sum.URL), Detail: sum.Detail,
		Context: sum.Context.Text, ContextLink: sum.Context.LinkText, ContextURL: sum.Context.LinkURL, ContextNote: sum.Context.Note,
		Summary: sum.Text, Since: clock(it.Approval.CreatedAt), SinceISO: iso(it.Approval.CreatedAt),
		Tally: fmt.Sprintf("%d of %d approvals", it.Result.Approvals, it.Approval.MinApprovals),
	}
	if it.YourVote != "" {
		row.YourVote = fmt.Sprintf("You voted %s; you can change it until it is decided.", it.YourVote)
	}
	return row
}

// VoterHelpFunc says, on an empty /approvals, what would make an area's
// subjects wait for voter: an area registers one (Router.VoterHelp).
type VoterHelpFunc func(ctx context.Context, voter string) (approvalsview.Empty, error)

// emptyApprovals says, on an empty /approvals, what would make votes appear
// for email, from every area whose subjects take votes.
func (s *Server) emptyApprovals(ctx context.Context, email string) (approvalsview.Empty, error) {
	var out approvalsview.Empty
	for _, help := range s.voterHelp {
		e, err := help(ctx, email)
		if err != nil {
			return out, err
		}
		out.Body = strings.TrimSpace(out.Body + " " + e.Body)
		out.Steps = append(out.Steps, e.Steps...)
	}
	if out.Body == "" {
		out.Body = "Nothing here takes votes yet."
	}
	return out, nil
}

// linkPage is an emailed voting link: what its subject's area shows, the
// votes so far and the voter's Approve/Reject.
func (s *Server) linkPage(c echo.Context) error {
	noStore(c)
	token := c.Param("token")
	claims, subject, err := s.Approvals.OpenLink(c.Request().Context(), token)
	if err != nil {
		return s.linkError(c, claims, subject, err)
	}
	v, err := s.linkView(c.Request().Context(), subject, claims.Voter)
	if err != nil {
		return err
	}
	v.Voter, v.Action = claims.Voter, pageurl.VotingLink(token)
	return s.render(c, http.StatusOK, approvalsview.Link(v))
}

// linkVote records the vote of a link's voter, then shows the link's page
// again (post/redirect/get) with what was recorded.
func (s *Server) linkVote(c echo.Context) error {
	noStore(c)
	ctx := c.Request().Context()
	token := c.Param("token")
	decision := c.FormValue("decision")
	claims, out, err := s.Approvals.VoteWithLink(ctx, token, decision, strings.TrimSpace(c.FormValue("comment")))
	self := pageurl.VotingLink(token)
	var ae *apperr.Error
	switch {
	case err == nil:
		subject, _ := approvals.ParseSubject(claims.Subject)
		sum, _, err := s.Approvals.Describe(ctx, subject)
		if err != nil {
			return err
		}
		return s.redirectWithFlash(c, self, true, voteRecorded("your", decision, out, sum))
	case errors.As(err, &ae) && ae.Code == apperr.Forbidden:
		subject, _ := approvals.ParseSubject(claims.Subject)
		return s.linkError(c, claims, subject, err)
	case errors.As(err, &ae) && (ae.Code == apperr.Conflict || ae.Code == apperr.Invalid):
		return s.redirectWithFlash(c, self, false, ae.Error())
	}
	return err
}

// voteRecorded says what a vote did, for the flash after it.
func voteRecorded(whose, decision string, out approvals.Outcome, sum approvals.Summary) string {
	what := "approval"
	if d, _ := approval.ParseDecision(decision); d == approval.Reject {
		what = "rejection"
	}
	msg := fmt.Sprintf("Recorded %s %s: %d of %d approvals, %d of %d rejections.", whose, what,
		out.Approvals, out.MinApprovals, out.Rejections, out.MinRejections)
	switch out.State {
	case approval.Approved:
		msg += " That was enough: " + sum.Approved
	case approval.Rejected:
		msg += " That was enough: " + sum.Rejected
	}
	return msg
}

// linkView is what a voting link's page shows: the area's page of the
// subject, or one made from its summary.
func (s *Server) linkView(ctx context.Context, subject approvals.Subject, voter string) (approvalsview.LinkView, error) {
	a, votes, err := s.Approvals.Approval(ctx, subject)
	if err != nil {
		return approvalsview.LinkView{}, err
	}
	if view, ok := s.votePages[subject.Kind]; ok {
		return view(ctx, subject.ID, voter, a, votes)
	}
	sum, ok, err := s.Approvals.Describe(ctx, subject)
	if err != nil {
		return approvalsview.LinkView{}, err
	}
	if !ok || a == nil {
		return approvalsview.LinkView{}, apperr.New(apperr.NotFound, "%s, which this link votes on, no longer exists.", subject)
	}
	return genericLinkView(sum, a, votes, voter), nil
}

// genericLinkView is the voting link page of a subject whose area gives
// only its summary.
func genericLinkView(sum approvals.Summary, a *models.Approval, votes []models.Vote, voter string) approvalsview.LinkView {
	res := approvals.Tally(a, votes)
	v := approvalsview.LinkView{
		Label: orNone(sum.Label, "Vote"), Title: sum.Title, Lead: sum.Detail, URL: sum.URL, URLText: "See it in Gantry →",
		Votes: approvalsview.Votes{
			Tally: fmt.Sprintf("%d of %d approvals · %d of %d rejections", res.Approvals, a.MinApprovals, res.Rejections, a.MinRejections),
			Rows:  voteRows(votes),
		},
		Consequence: fmt.Sprintf("Once enough voters approve: %s Once enough reject: %s", sum.Approved, sum.Rejected),
	}
	switch {
	case a.State == models.ApprovalApproved:
		v.Votes.Outcome, v.Votes.OutcomeTone, v.Votes.Note = "approved", "ok", "Approved: votes are closed."
	case a.State == models.ApprovalRejected:
		v.Votes.Outcome, v.Votes.OutcomeTone, v.Votes.Note = "rejected", "bad", "Rejected: votes are closed."
	case a.ClosedAt != nil:
		v.Votes.Note = "Votes are closed: it ended before enough voters agreed."
	case !approvals.PolicyOf(a).IsVoter(voter):
		v.Votes.Note = fmt.Sprintf("%s is no longer one of its voters (%s), so this link cannot vote.", voter, strings.Join(a.Voters, ", "))
	default:
		v.Open = true
		v.Votes.Note = yourVote(v.Votes.Rows, voter)
	}
	return v
}

// voteRows are votes as cast, a voter's replaced votes marked.
func voteRows(votes []models.Vote) []components.VoteRow {
	last := map[string]int{}
	for i, vote := range votes {
		last[strings.ToLower(vote.Voter)] = i
	}
	rows := make([]components.VoteRow, 0, len(votes))
	for i, vote := range votes {
		tone := "ok"
		if vote.Decision == string(approval.Reject) {
			tone = "bad"
		}
		rows = append(rows, components.VoteRow{
			Voter: vote.Voter, Decision: vote.Decision, Tone: tone, Comment: vote.Comment, Via: vote.Via,
			When: clock(vote.CreatedAt), WhenISO: iso(vote.CreatedAt), Replaced: last[strings.ToLower(vote.Voter)] != i,
		})
	}
	return rows
}

// yourVote says what voter's vote that counts is, if any.
func yourVote(rows []components.VoteRow, voter string) string {
	for _, r := range rows {
		if strings.EqualFold(r.Voter, voter) && !r.Replaced {
			return fmt.Sprintf("You voted %s at %s UTC; you can change your vote until it is decided.", r.Decision, r.When)
		}
	}
	return ""
}

// linkError is the 403 page of a link that does not work; for an expired
// one it names the subject it was for and offers to sign in and vote from
// the dashboard.
func (s *Server) linkError(c echo.Context, claims approval.Claims, subject approvals.Subject, err error) error {
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Code != apperr.Forbidden {
		return err
	}
	v := approvalsview.LinkErrorView{Label: "Vote", Message: ae.Message, SignInURL: pageurl.SignIn("")}
	if errors.Is(err, approval.ErrExpired) && subject.ID != "" {
		v.Expired, v.Kind, v.ID, v.Voter = true, subject.Kind, subject.ID, claims.Voter
		v.IDLabel = strings.ToUpper(subject.Kind[:1]) + subject.Kind[1:]
		if sum, ok, err := s.Approvals.Describe(c.Request().Context(), subject); err == nil && ok {
			v.Label = orNone(sum.Label, v.Label)
			v.SignInURL = pageurl.SignIn(sum.URL)
			for _, f := range sum.Facts {
				v.Facts = append(v.Facts, approvalsview.Fact{Label: f.Label, Value: f.Value, Mono: f.Mono})
			}
		}
	}
	return s.render(c, http.StatusForbidden, approvalsview.LinkError(v))
}

// noStore keeps a page whose URL is a credential out of caches.
func noStore(c echo.Context) {
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("X-Robots-Tag", "noindex")
}

// apiApprovals lists what waits for the caller's vote: "approvals" of
// every kind of subject (?kind=, ?limit=, ?offset=), and "executions", the
// infrastructure executions among them as rows, kept for the clients that
// read them (gantry infra approvals).
func (s *Server) apiApprovals(c echo.Context) error {
	ctx := c.Request().Context()
	email := strings.ToLower(principalOf(c).User.Email)
	f := approvals.WaitingFilter{Kind: c.QueryParam("kind"), Limit: 100}
	for name, dst := range map[string]*int{"limit": &f.Limit, "offset": &f.Offset} {
		if raw := c.QueryParam(name); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 0 || (name == "limit" && (n < 1 || n > 500)) {
				return apperr.Field(name, "must be a whole number (limit: 1 to 500)")
			}
			*dst = n
		}
	}
	w, err := s.Approvals.WaitingFor(ctx, email, f)
	if err != nil {
		return err
	}
	xs, err := models.ExecutionsAwaitingVoter(ctx, s.DB.Bun, email)
	if err != nil {
		return err
	}
	out := make([]approvalJSON, len(w.Items))
	for i, it := range w.Items {
		out[i] = approvalJSON{
			Subject: it.Subject.String(), Kind: it.Subject.Kind, ID: it.Subject.ID, Title: it.Summary.Title, URL: it.Summary.URL,
			Summary: it.Summary.Text, Voters: it.Approval.Voters, Approvals: it.Result.Approvals, MinApprovals: it.Approval.MinApprovals,
			Rejections: it.Result.Rejections, MinRejections: it.Approval.MinRejections, YourVote: string(it.YourVote),
			WaitingSince: it.Approval.CreatedAt,
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"approvals": out, "total": w.Total, "executions": infraExecutionsOf(xs)})
}

// approvalJSON is one approval waiting for the caller.
type approvalJSON struct {
	Subject       string    `json:"subject"` // "<kind>:<id>"
	Kind          string    `json:"kind"`
	ID            string    `json:"id"`
	Title         string    `json:"title"`
	URL           string    `json:"url"` // its page, relative to Gantry's address
	Summary       string    `json:"summary"`
	Voters        []string  `json:"voters"`
	Approvals     int       `json:"approvals"`
	MinApprovals  int       `json:"min_approvals"`
	Rejections    int       `json:"rejections"`
	MinRejections int       `json:"min_rejections"`
	YourVote      string    `json:"your_vote,omitempty"` // approve or reject, while it can change
	WaitingSince  time.Time `json:"waiting_since"`
}
