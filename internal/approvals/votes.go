package approvals

import (
	"context"
	"errors"
	"fmt"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// VoteInput is one vote on a subject.
type VoteInput struct {
	Subject  Subject
	Voter    string // email address
	Decision string // approve or reject
	Comment  string
	Via      string // ViaLink, ViaDashboard or ViaAPI
}

// Outcome is what the votes add up to after one, with the thresholds they
// are counted against.
type Outcome struct {
	approval.Result
	MinApprovals  int
	MinRejections int
}

// Vote records a vote in a transaction of its own; see RecordVote.
func (s *Service) Vote(ctx context.Context, in VoteInput) (Outcome, error) {
	var out Outcome
	err := s.queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		var err error
		out, err = s.RecordVote(ctx, tx, in)
		return err
	})
	return out, err
}

// RecordVote records a vote on a subject waiting for votes, in the caller's
// transaction, with its log entry. When the votes decide, the approval
// records the decision, the log says so, and the subject's kind moves its
// work on (Kind.Decided), all in the same transaction. A voter may change
// their vote until then.
func (s *Service) RecordVote(ctx context.Context, tx jobs.Tx, in VoteInput) (Outcome, error) {
	decision, err := approval.ParseDecision(in.Decision)
	if err != nil {
		return Outcome{}, err
	}
	if len(in.Comment) > MaxComment {
		return Outcome{}, apperr.Field("comment", fmt.Sprintf("is %d bytes; at most %d", len(in.Comment), MaxComment))
	}
	kind, ok := s.kinds[in.Subject.Kind]
	if !ok {
		return Outcome{}, apperr.New(apperr.NotFound, "No %s: nothing of kind %q takes votes.", in.Subject, in.Subject.Kind)
	}
	voter := normalize(in.Voter)
	ballot, err := kind.Lock(ctx, tx, in.Subject.ID)
	if err != nil {
		return Outcome{}, err
	}
	a, err := models.LockApproval(ctx, tx, ballot.ApprovalID)
	if err != nil {
		return Outcome{}, err
	}
	votes, err := models.VotesOf(ctx, tx, a.ID)
	if err != nil {
		return Outcome{}, err
	}
	policy := PolicyOf(a)
	if err := approval.CanVote(policy, approval.Tally(policy, engineVotes(votes)), voter); err != nil {
		return Outcome{}, err
	}
	if ballot.Closed != nil {
		return Outcome{}, ballot.Closed
	}
	v := &models.Vote{ApprovalID: a.ID, Voter: voter, Decision: string(decision), Comment: in.Comment, Via: in.Via}
	if err := models.InsertVote(ctx, tx, v); err != nil {
		return Outcome{}, err
	}
	res := approval.Tally(policy, engineVotes(append(votes, *v)))
	out := Outcome{Result: res, MinApprovals: a.MinApprovals, MinRejections: a.MinRejections}
	name := kind.Name()
	if err := s.log(ctx, tx, ballot, name+"-voted", voter,
		map[string]any{"decision": v.Decision, "comment": v.Comment, "via": v.Via, "approvals": res.Approvals, "rejections": res.Rejections}); err != nil {
		return out, err
	}
	if !res.Decided() {
		return out, nil
	}
	if err := models.DecideApproval(ctx, tx, a.ID, string(res.State)); err != nil {
		return out, err
	}
	event, detail := name+"-approved", map[string]any{"approved_by": VotersWith(res, approval.Approve)}
	if res.State == approval.Rejected {
		event, detail = name+"-rejected", map[string]any{"rejected_by": VotersWith(res, approval.Reject)}
	}
	if err := s.log(ctx, tx, ballot, event, voter, detail); err != nil {
		return out, err
	}
	return out, kind.Decided(ctx, tx, in.Subject.ID, res, voter)
}

func (s *Service) log(ctx context.Context, tx jobs.Tx, b Ballot, event, actor string, detail map[string]any) error {
	e := b.Log
	e.Event, e.Actor, e.Detail = event, actor, detail
	return models.AppendLog(ctx, tx, &e)
}

// VoteWithLink records the vote of the voter an emailed link was sent to.
func (s *Service) VoteWithLink(ctx context.Context, token, decision, comment string) (approval.Claims, Outcome, error) {
	c, subject, err := s.OpenLink(ctx, token)
	if err != nil {
		return c, Outcome{}, err
	}
	out, err := s.Vote(ctx, VoteInput{Subject: subject, Voter: c.Voter, Decision: decision, Comment: comment, Via: ViaLink})
	return c, out, err
}

// OpenLink is VerifyLink for a link that is being used (its page shown,
// its vote cast): a voter whose Gantry account was disabled (someone who
// left) can no longer see the subject nor vote through links mailed
// before.
func (s *Service) OpenLink(ctx context.Context, token string) (approval.Claims, Subject, error) {
	c, subject, err := s.VerifyLink(token)
	if err != nil {
		return c, subject, err
	}
	switch u, err := models.UserByEmail(ctx, s.queue.DB(), c.Voter); {
	case err == nil && u.Disabled():
		return c, Subject{}, apperr.New(apperr.Forbidden, "The Gantry account of %s is disabled, so its voting links no longer work.", c.Voter)
	case err != nil && !errors.Is(err, models.ErrNotFound):
		return c, subject, err
	}
	return c, subject, nil
}

// VerifyLink checks a voting link's token and names its subject. An expired
// link's claims and subject come back with the error (approval.ErrExpired),
// so its page can say what it was for.
func (s *Service) VerifyLink(token string) (approval.Claims, Subject, error) {
	c, err := s.signer.Verify(token, s.now())
	if err != nil && !errors.Is(err, approval.ErrExpired) {
		return c, Subject{}, err
	}
	subject, ok := ParseSubject(c.Subject)
	if _, known := s.kinds[subject.Kind]; !ok || !known {
		return c, Subject{}, apperr.New(apperr.Forbidden, "This link is not a vote on anything this Gantry knows of.")
	}
	return c, subject, err
}
