package approvals_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/mail"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

const (
	ada   = "ada@example.com"
	grace = "grace@example.com"
)

// gateKind is a test-only kind of subject, shaped as pipeline gates will
// be: it remembers its open gates and what the votes decided.
type gateKind struct {
	approvals map[string]int64 // gate id → approval id
	ended     map[string]bool  // gates that take no votes any more
	decided   map[string]approval.State
}

func newGateKind() *gateKind {
	return &gateKind{approvals: map[string]int64{}, ended: map[string]bool{}, decided: map[string]approval.State{}}
}

func (g *gateKind) Name() string { return "gate" }

func (g *gateKind) Lock(_ context.Context, _ jobs.Tx, id string) (approvals.Ballot, error) {
	aid, ok := g.approvals[id]
	if !ok {
		return approvals.Ballot{}, apperr.New(apperr.NotFound, "No gate %s.", id)
	}
	b := approvals.Ballot{ApprovalID: aid, Log: models.LogEntry{DeploymentID: "release-1", TargetID: "gate:" + id, Revision: "r1"}}
	if g.ended[id] {
		b.Closed = apperr.New(apperr.Conflict, "Gate %s is over; votes are closed.", id)
	}
	return b, nil
}

func (g *gateKind) Decided(_ context.Context, _ jobs.Tx, id string, res approval.Result, _ string) error {
	g.decided[id] = res.State
	return nil
}

func (g *gateKind) Describe(_ context.Context, _ bun.IDB, ids []string) (map[string]approvals.Summary, error) {
	out := map[string]approvals.Summary{}
	for _, id := range ids {
		if _, ok := g.approvals[id]; ok {
			out[id] = approvals.Summary{Title: "gate " + id, URL: "/pipelines/gates/" + id, Text: "promote r1 to prod",
				Approved: "r1 goes on to prod.", Rejected: "r1 stops here.",
				Mail: approvals.Mail{Subject: "Vote on gate " + id, Body: "r1 waits at gate " + id + ".\n\n", Review: "Review the release and vote"}}
		}
	}
	return out, nil
}

type sent struct {
	mu   sync.Mutex
	msgs []mail.Message
}

func (s *sent) Send(_ context.Context, m mail.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, m)
	return nil
}

func (s *sent) subjects() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.msgs {
		out = append(out, m.Subject+" → "+strings.Join(m.To, ","))
	}
	return out
}

type bundle struct {
	db    *models.DB
	svc   *approvals.Service
	gates *gateKind
	queue *jobs.Queue
	mail  *sent
	ctx   context.Context
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db := testdb.New(t)
	b := setupOn(t, db)
	b.db = db
	return b
}

func setupOn(t *testing.T, db *models.DB) *bundle {
	t.Helper()
	queue, err := jobs.NewQueue(db.Bun)
	require.NoError(t, err)
	b := &bundle{gates: newGateKind(), queue: queue, mail: &sent{}, ctx: t.Context()}
	b.svc = approvals.New(approvals.Options{Queue: queue, BaseURL: "http://gantry.test", Mail: b.mail,
		Signer: approval.Signer{Key: []byte(strings.Repeat("k", 32))}, Kinds: []approvals.Kind{b.gates}})
	return b
}

// open opens gate id's approval: two voters, two approvals or one
// rejection decide.
func (b *bundle) open(t *testing.T, id string) {
	t.Helper()
	err := b.queue.InTx(b.ctx, func(ctx context.Context, tx jobs.Tx) error {
		a, err := b.svc.Open(ctx, tx, approvals.Subject{Kind: "gate", ID: id}, approval.Policy{Voters: []string{ada, grace}, MinApprovals: 2, MinRejections: 1})
		b.gates.approvals[id] = a.ID
		return err
	})
	require.NoError(t, err)
}

func TestVotesDecideAndTellTheKind(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.open(t, "7")
	gate := approvals.Subject{Kind: "gate", ID: "7"}

	out, err := b.svc.Vote(b.ctx, approvals.VoteInput{Subject: gate, Voter: "Ada@Example.com", Decision: "approve", Via: approvals.ViaAPI})
	require.NoError(t, err)
	require.Equal(t, approval.Pending, out.State)
	require.Equal(t, 2, out.MinApprovals)
	require.Empty(t, b.gates.decided)

	_, err = b.svc.Vote(b.ctx, approvals.VoteInput{Subject: gate, Voter: "olivia@example.com", Decision: "approve", Via: approvals.ViaAPI})
	require.ErrorIs(t, err, approval.ErrNotVoter)

	out, err = b.svc.Vote(b.ctx, approvals.VoteInput{Subject: gate, Voter: grace, Decision: "approve", Comment: "ship it", Via: approvals.ViaDashboard})
	require.NoError(t, err)
	require.Equal(t, approval.Approved, out.State)
	require.Equal(t, approval.Approved, b.gates.decided["7"], "the kind moved its work on")

	_, err = b.svc.Vote(b.ctx, approvals.VoteInput{Subject: gate, Voter: ada, Decision: "reject", Via: approvals.ViaAPI})
	require.ErrorIs(t, err, approval.ErrDecided)

	entries, err := models.ListLog(b.ctx, b.queue.DB(), models.LogFilter{Target: "gate:7"})
	require.NoError(t, err)
	var events []string
	for _, e := range entries {
		require.Equal(t, "release-1", e.DeploymentID)
		events = append(events, e.Event)
	}
	require.ElementsMatch(t, []string{"gate-voted", "gate-voted", "gate-approved"}, events)

	_, err = b.svc.Vote(b.ctx, approvals.VoteInput{Subject: approvals.Subject{Kind: "nope", ID: "1"}, Voter: ada, Decision: "approve"})
	require.Equal(t, apperr.NotFound, apperr.CodeOf(err))
}

func TestLinksVoteOnAnyKind(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.open(t, "9")
	gate := approvals.Subject{Kind: "gate", ID: "9"}

	require.NoError(t, b.svc.RequestVote(b.ctx, gate, grace))
	require.Len(t, b.mail.msgs, 1)
	m := b.mail.msgs[0]
	require.Equal(t, "Vote on gate 9", m.Subject)
	require.Contains(t, m.Text, "Review the release and vote (this link is yours; it votes as grace@example.com):\nhttp://gantry.test"+pageurl.VotingLinkPrefix)
	token := strings.TrimSpace(m.Text[strings.Index(m.Text, pageurl.VotingLinkPrefix)+len(pageurl.VotingLinkPrefix):])

	claims, subject, err := b.svc.VerifyLink(token)
	require.NoError(t, err)
	require.Equal(t, gate, subject)
	require.Equal(t, grace, claims.Voter)

	claims, out, err := b.svc.VoteWithLink(b.ctx, token, "reject", "not today")
	require.NoError(t, err)
	require.Equal(t, grace, claims.Voter)
	require.Equal(t, approval.Rejected, out.State)
	require.Equal(t, approval.Rejected, b.gates.decided["9"])

	require.NoError(t, b.svc.RequestVote(b.ctx, gate, ada))
	require.Len(t, b.mail.msgs, 1, "a decided approval asks nobody")

	expired, err := b.svc.Signer().Sign(approval.Claims{Subject: "gate:9", Voter: ada, Expires: time.Now().Add(-time.Minute)})
	require.NoError(t, err)
	_, subject, err = b.svc.VerifyLink(expired)
	require.ErrorIs(t, err, approval.ErrExpired)
	require.Equal(t, gate, subject, "an expired link still names its subject")

	unknown, err := b.svc.Signer().Sign(approval.Claims{Subject: "nope:1", Voter: ada, Expires: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	_, _, err = b.svc.VerifyLink(unknown)
	require.Equal(t, apperr.Forbidden, apperr.CodeOf(err))
}

func TestWaitingForListsOpenVotesOfEveryKind(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, id := range []string{"1", "2", "3"} {
		b.open(t, id)
	}
	_, err := b.svc.Vote(b.ctx, approvals.VoteInput{Subject: approvals.Subject{Kind: "gate", ID: "2"}, Voter: ada, Decision: "approve", Via: approvals.ViaAPI})
	require.NoError(t, err)

	// A subject that ended without a decision waits for nobody.
	b.gates.ended["3"] = true
	require.NoError(t, b.svc.Close(b.ctx, b.queue.DB(), approvals.Subject{Kind: "gate", ID: "3"}))
	_, err = b.svc.Vote(b.ctx, approvals.VoteInput{Subject: approvals.Subject{Kind: "gate", ID: "3"}, Voter: ada, Decision: "approve", Via: approvals.ViaAPI})
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err))

	w, err := b.svc.WaitingFor(b.ctx, "ADA@example.com", approvals.WaitingFilter{})
	require.NoError(t, err)
	require.Equal(t, 2, w.Total)
	require.Equal(t, "gate 1", w.Items[0].Summary.Title, "the longest waiting first")
	require.Equal(t, approval.Approve, w.Items[1].YourVote)
	require.Equal(t, 1, w.Items[1].Result.Approvals)

	page, err := b.svc.WaitingFor(b.ctx, ada, approvals.WaitingFilter{Kind: "gate", Limit: 1, Offset: 1})
	require.NoError(t, err)
	require.Equal(t, 2, page.Total)
	require.Len(t, page.Items, 1)
	require.Equal(t, "2", page.Items[0].Subject.ID)

	none, err := b.svc.WaitingFor(b.ctx, ada, approvals.WaitingFilter{Kind: "execution"})
	require.NoError(t, err)
	require.Zero(t, none.Total)
	none, err = b.svc.WaitingFor(b.ctx, "olivia@example.com", approvals.WaitingFilter{})
	require.NoError(t, err)
	require.Zero(t, none.Total)
}

// TestTheVoteRequestJobMailsAnyKind: an area asks for votes by inserting
// the shared job with its approval, in the same transaction, and the job
// mails each voter, whatever the kind of subject.
func TestTheVoteRequestJobMailsAnyKind(t *testing.T) {
	t.Parallel()
	b := setup(t)
	err := b.queue.InTx(b.ctx, func(ctx context.Context, tx jobs.Tx) error {
		a, err := b.svc.Open(ctx, tx, approvals.Subject{Kind: "gate", ID: "7"}, approval.Policy{Voters: []string{ada, grace}, MinApprovals: 1, MinRejections: 1})
		if err != nil {
			return err
		}
		b.gates.approvals["7"] = a.ID
		for _, v := range []string{ada, grace} {
			if err := tx.Enqueue(ctx, jobs.RequestApprovalVoteArgs{Subject: "gate:7", Voter: v}, nil); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)

	client, err := jobs.NewClient(jobs.SharedDeps{DB: b.db, Logger: slog.New(slog.DiscardHandler), Approvals: b.svc}, nil,
		jobs.ClientOptions{Work: true, Concurrency: 2, Logger: slog.New(slog.DiscardHandler), SkipPeriodic: true, FetchPollInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, client.Start(b.ctx))
	t.Cleanup(func() { _ = client.StopAndCancel(context.Background()) })
	require.Eventually(t, func() bool { return len(b.mail.subjects()) == 2 }, time.Minute, 50*time.Millisecond, "sent: %v", b.mail.subjects())
	require.ElementsMatch(t, []string{"Vote on gate 7 → " + ada, "Vote on gate 7 → " + grace}, b.mail.subjects())
}
