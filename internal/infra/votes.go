package infra

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// Where a vote came from.
const (
	ViaLink      = "link"
	ViaDashboard = "dashboard"
	ViaAPI       = "api"
)

// MaxComment is the longest comment a vote takes.
const MaxComment = 4000

func approvalClaims(x *models.Execution, voter string, expires time.Time, nonce string) approval.Claims {
	return approval.Claims{Subject: ExecutionTarget(x.ExecutionID), Voter: voter, Expires: expires, Nonce: nonce}
}

// VoteInput is one vote on an execution's plan.
type VoteInput struct {
	ExecutionID string
	Voter       string // email address
	Decision    string // approve or reject
	Comment     string
	Via         string
}

// Vote records a vote on an execution waiting for votes. On the minimum
// approvals the saved plan is applied; on the minimum rejections the
// execution fails and what depends on it is aborted. A voter may change
// their vote until then.
func (s *Service) Vote(ctx context.Context, in VoteInput) (approval.Result, error) {
	decision, err := approval.ParseDecision(in.Decision)
	if err != nil {
		return approval.Result{}, err
	}
	if len(in.Comment) > MaxComment {
		return approval.Result{}, apperr.Field("comment", fmt.Sprintf("is %d bytes; at most %d", len(in.Comment), MaxComment))
	}
	voter := strings.ToLower(strings.TrimSpace(in.Voter))
	var result approval.Result
	err = s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		x, err := models.ExecutionByExecutionID(ctx, tx, in.ExecutionID)
		if err != nil {
			return notFound(err, "execution "+in.ExecutionID)
		}
		run, err := models.LockRun(ctx, tx, x.RunID)
		if err != nil {
			return err
		}
		if x, err = models.ExecutionByID(ctx, tx, x.ID); err != nil {
			return err
		}
		switch {
		case x.Ended():
			return apperr.New(apperr.Conflict, "Execution %s is %s; votes are closed.", x.ExecutionID, describe(x))
		case x.ApprovalID == nil:
			return apperr.New(apperr.Conflict, "Execution %s is %s; it takes votes once its plan is ready.", x.ExecutionID, describe(x))
		}
		a, err := models.LockApproval(ctx, tx, *x.ApprovalID)
		if err != nil {
			return err
		}
		votes, err := models.VotesOf(ctx, tx, a.ID)
		if err != nil {
			return err
		}
		policy := policyOf(a)
		if err := approval.CanVote(policy, approval.Tally(policy, engineVotes(votes)), voter); err != nil {
			return err
		}
		if x.Status != models.ExecRunning || x.Step != models.StepVoting {
			return apperr.New(apperr.Conflict, "Execution %s is %s; votes are closed.", x.ExecutionID, describe(x))
		}
		v := &models.Vote{ApprovalID: a.ID, Voter: voter, Decision: string(decision), Comment: in.Comment, Via: in.Via}
		if err := models.InsertVote(ctx, tx, v); err != nil {
			return err
		}
		result = approval.Tally(policy, engineVotes(append(votes, *v)))
		if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventExecutionVoted, voter,
			map[string]any{"decision": v.Decision, "comment": v.Comment, "via": v.Via, "approvals": result.Approvals, "rejections": result.Rejections}); err != nil {
			return err
		}
		switch result.State {
		case approval.Approved:
			if err := models.DecideApproval(ctx, tx, a.ID, string(result.State)); err != nil {
				return err
			}
			x.Step = models.StepApplying
			if err := models.UpdateExecution(ctx, tx, x, "step"); err != nil {
				return err
			}
			if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventExecutionApproved, voter,
				map[string]any{"approved_by": votersWith(result, approval.Approve)}); err != nil {
				return err
			}
			return tx.Enqueue(ctx, jobs.ApplyExecutionArgs{ExecutionID: x.ID}, nil)
		case approval.Rejected:
			if err := models.DecideApproval(ctx, tx, a.ID, string(result.State)); err != nil {
				return err
			}
			rejectedBy := votersWith(result, approval.Reject)
			if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventExecutionRejected, voter,
				map[string]any{"rejected_by": rejectedBy}); err != nil {
				return err
			}
			return s.finish(ctx, tx, run, x, false, "rejected by "+strings.Join(rejectedBy, ", "), voter)
		}
		return nil
	})
	return result, err
}

// VoteWithLink records the vote of the voter an emailed link was sent to.
func (s *Service) VoteWithLink(ctx context.Context, token, decision, comment string) (approval.Claims, approval.Result, error) {
	c, err := s.VerifyLink(token)
	if err != nil {
		return c, approval.Result{}, err
	}
	// A voter whose Gantry account was disabled (someone who left) cannot
	// go on voting through links mailed before.
	switch u, err := models.UserByEmail(ctx, s.Queue.DB(), c.Voter); {
	case err == nil && u.Disabled():
		return c, approval.Result{}, apperr.New(apperr.Forbidden, "The Gantry account of %s is disabled, so its voting links no longer work.", c.Voter)
	case err != nil && !errors.Is(err, models.ErrNotFound):
		return c, approval.Result{}, err
	}
	res, err := s.Vote(ctx, VoteInput{ExecutionID: strings.TrimPrefix(c.Subject, "execution:"), Voter: c.Voter, Decision: decision, Comment: comment, Via: ViaLink})
	return c, res, err
}

// VerifyLink checks a voting link's token and names its execution.
func (s *Service) VerifyLink(token string) (approval.Claims, error) {
	c, err := s.Signer.Verify(token, s.now())
	if err != nil {
		return c, err
	}
	if !strings.HasPrefix(c.Subject, "execution:") {
		return c, apperr.New(apperr.Forbidden, "This link is not a vote on an infrastructure execution.")
	}
	return c, nil
}

// LinkExecutionID is the execution a verified link votes on.
func LinkExecutionID(c approval.Claims) string { return strings.TrimPrefix(c.Subject, "execution:") }

func describe(x *models.Execution) string {
	if x.Status == models.ExecRunning && x.Step != "" {
		return x.Step
	}
	return x.Status
}

// Tally is what an approval's votes add up to (each voter's latest vote
// counts, thresholds are "at least").
func Tally(a *models.Approval, votes []models.Vote) approval.Result {
	return approval.Tally(policyOf(a), engineVotes(votes))
}

func policyOf(a *models.Approval) approval.Policy {
	return approval.Policy{Voters: a.Voters, MinApprovals: a.MinApprovals, MinRejections: a.MinRejections}
}

func engineVotes(votes []models.Vote) []approval.Vote {
	out := make([]approval.Vote, len(votes))
	for i, v := range votes {
		out[i] = approval.Vote{Voter: v.Voter, Decision: approval.Decision(v.Decision), Comment: v.Comment, At: v.CreatedAt}
	}
	return out
}

func votersWith(r approval.Result, d approval.Decision) []string {
	var out []string
	for _, v := range r.Votes {
		if v.Decision == d {
			out = append(out, v.Voter)
		}
	}
	return out
}
