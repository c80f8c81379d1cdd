package approvals

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/mail"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/models"
)

// Link is the page where voter votes on subject without signing in: a
// signed link of their own, working for the service's link lifetime.
func (s *Service) Link(subject Subject, voter string) (string, error) {
	token, err := s.signer.Sign(approval.Claims{Subject: subject.String(), Voter: voter,
		Expires: s.now().Add(s.linkLifetime), Nonce: rand.Text()})
	if err != nil {
		return "", err
	}
	return s.baseURL + pageurl.VotingLink(token), nil
}

// RequestVoteOn is RequestVote for a subject written "<kind>:<id>" (the
// vote request job's argument).
func (s *Service) RequestVoteOn(ctx context.Context, subject, voter string) error {
	sub, ok := ParseSubject(subject)
	if !ok {
		return fmt.Errorf("requesting a vote: %q is no subject (want kind:id)", subject)
	}
	return s.RequestVote(ctx, sub, voter)
}

// RequestVote emails one voter a signed link to vote on subject, while its
// approval waits for votes (a request that comes after the decision, or
// after the subject ended, sends nothing).
func (s *Service) RequestVote(ctx context.Context, subject Subject, voter string) error {
	db := s.queue.DB()
	a, err := models.ApprovalBySubject(ctx, db, subject.String())
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if a.State != models.ApprovalPending || a.ClosedAt != nil {
		return nil
	}
	kind, ok := s.kinds[subject.Kind]
	if !ok {
		return fmt.Errorf("requesting a vote on %s: no kind %q is registered", subject, subject.Kind)
	}
	sums, err := kind.Describe(ctx, db, []string{subject.ID})
	if err != nil {
		return err
	}
	sum, ok := sums[subject.ID]
	if !ok {
		return nil // gone meanwhile
	}
	link, err := s.Link(subject, voter)
	if err != nil {
		return err
	}
	msg := mail.Message{
		To:      []string{voter},
		Subject: sum.Mail.Subject,
		Text:    sum.Mail.Body + fmt.Sprintf("%s (this link is yours; it votes as %s):\n%s\n", sum.Mail.Review, voter, link),
	}
	if s.mail == nil {
		// The link is a credential: it stays out of the log. The voter
		// votes from /approvals instead.
		s.logger.WarnContext(ctx, "no mail configured: vote request not sent; the voter can vote from /approvals", "voter", voter, subject.Kind, subject.ID)
		return nil
	}
	return s.mail.Send(ctx, msg)
}
