// Package approvals is the one way a human agrees to something in Gantry,
// for every area: an approval per subject (a kind an area registers, and an
// id the area understands), its policy (voters and thresholds, frozen when
// the approval opens), the votes with their log entries, the tally, signed
// per-voter links and the emails that carry them, and what waits for a
// voter across every kind. The arithmetic and the link signatures are the
// pure engine internal/approval; this package persists and mails.
//
// An area registers a Kind (see Kind); infrastructure executions are the
// first (internal/infra). The area opens an approval when its subject is
// ready for votes (Open), closes it when the subject ends otherwise
// (Close), and hears of a decision through Kind.Decided, in the vote's
// transaction, to move its own work on.
package approvals

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/mail"
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

// DefaultLinkLifetime is how long a voting link works unless told.
const DefaultLinkLifetime = 7 * 24 * time.Hour

// Subject is what an approval decides: a kind an area registered and an id
// that area understands.
type Subject struct {
	Kind string
	ID   string
}

// String is the subject as approvals, links and log targets spell it:
// "<kind>:<id>".
func (s Subject) String() string { return s.Kind + ":" + s.ID }

// ParseSubject reads "<kind>:<id>".
func ParseSubject(s string) (Subject, bool) {
	kind, id, ok := strings.Cut(s, ":")
	if !ok || kind == "" || id == "" {
		return Subject{}, false
	}
	return Subject{Kind: kind, ID: id}, true
}

// Kind is one kind of subject an area puts to a vote. Its log entries are
// "<name>-voted", "<name>-approved" and "<name>-rejected", targeted at the
// subject.
type Kind interface {
	// Name is the kind's name, the subject's prefix ("execution").
	Name() string
	// Lock locks subject id inside a vote's transaction, as the area's own
	// changes to it lock it, and says which approval takes the vote. An
	// *apperr.Error says why it takes no vote: not found (NotFound), ended
	// or not ready (Conflict).
	Lock(ctx context.Context, tx jobs.Tx, id string) (Ballot, error)
	// Decided moves the area's work on once the votes decided (approved or
	// rejected), in the vote's transaction; actor cast the deciding vote.
	Decided(ctx context.Context, tx jobs.Tx, id string, res approval.Result, actor string) error
	// Describe says what people are shown of each subject: listings, vote
	// requests, the pages of links. It is called once per kind for a whole
	// page of subjects, never once per subject; ids it cannot find are left
	// out of the map.
	Describe(ctx context.Context, db bun.IDB, ids []string) (map[string]Summary, error)
}

// Ballot is a subject locked for one vote.
type Ballot struct {
	ApprovalID int64
	// Log is where the subject's log entries go: deployment, target and
	// revision; the vote fills in the rest.
	Log models.LogEntry
	// Closed, when set, says why votes are closed although the approval
	// is pending; it is told only to someone who may vote.
	Closed error
}

// Summary is what people are shown of a subject.
type Summary struct {
	Label   string // the kind in words, for a link page's frame: "Infrastructure vote"
	Title   string // what is voted on: "vpc/main"
	URL     string // its page in Gantry
	VoteURL string // where a signed-in voter votes on it ("": URL)
	Detail  string // a line under the title: "account shared"
	Context Context
	Text    string // what would happen, in a line: "Plan: 1 to add, 0 to change, 0 to destroy."
	// Facts name the subject out of its context (an expired link's page),
	// the last one being the subject's id.
	Facts []Fact
	// What a decision does, completing "That was enough: …".
	Approved, Rejected string
	// Mail is the vote request, less the link.
	Mail Mail
}

// Context is where a subject comes from: "live #7" and the pull request's
// title, for an execution.
type Context struct {
	Text     string
	LinkText string
	LinkURL  string
	Note     string
}

// Fact is one labelled value.
type Fact struct {
	Label string
	Value string
	Mono  bool
}

// Mail is a vote request as the area words it; the service adds the link.
type Mail struct {
	Subject string
	Body    string // ends with an empty line
	Review  string // "Review the plan and vote", before the link
}

// Options are the service's parts.
type Options struct {
	Queue  *jobs.Queue
	Logger *slog.Logger
	// Kinds are the areas' kinds of subject.
	Kinds []Kind
	// BaseURL is Gantry's public address, for the links in mail.
	BaseURL string
	// Mail sends the vote requests; nil logs that none was sent.
	Mail mail.Sender
	// Signer signs the voting links.
	Signer approval.Signer
	// LinkLifetime is how long a voting link works (DefaultLinkLifetime).
	LinkLifetime time.Duration
	Now          func() time.Time
}

// Service is the approvals of every area.
type Service struct {
	queue        *jobs.Queue
	logger       *slog.Logger
	kinds        map[string]Kind
	baseURL      string
	mail         mail.Sender
	signer       approval.Signer
	linkLifetime time.Duration
	now          func() time.Time
}

// New builds the service. Kinds may also come later, through Register,
// when an area needs the service to be built first.
func New(o Options) *Service {
	s := &Service{queue: o.Queue, logger: o.Logger, kinds: map[string]Kind{}, baseURL: o.BaseURL, mail: o.Mail,
		signer: o.Signer, linkLifetime: o.LinkLifetime, now: o.Now}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if s.linkLifetime <= 0 {
		s.linkLifetime = DefaultLinkLifetime
	}
	if s.now == nil {
		s.now = time.Now
	}
	for _, k := range o.Kinds {
		s.Register(k)
	}
	return s
}

// Register adds an area's kind of subject. Registering a name twice is a
// programming error.
func (s *Service) Register(k Kind) {
	if _, dup := s.kinds[k.Name()]; dup {
		panic(fmt.Sprintf("approvals: kind %q registered twice", k.Name()))
	}
	s.kinds[k.Name()] = k
}

// Signer is the signer of the voting links.
func (s *Service) Signer() approval.Signer { return s.signer }

// Open opens the approval of a subject under policy, in the caller's
// transaction; the policy is frozen from here on.
func (s *Service) Open(ctx context.Context, tx bun.IDB, subject Subject, p approval.Policy) (*models.Approval, error) {
	a := &models.Approval{Subject: subject.String(), Voters: p.Voters, MinApprovals: p.MinApprovals, MinRejections: p.MinRejections}
	if err := models.InsertApproval(ctx, tx, a); err != nil {
		return nil, err
	}
	return a, nil
}

// Close closes the votes on a subject that ended without a decision (a
// no-op when it has no pending approval), in the caller's transaction.
func (s *Service) Close(ctx context.Context, tx bun.IDB, subject Subject) error {
	return models.CloseApproval(ctx, tx, subject.String())
}

// Tally is what an approval's votes add up to (each voter's latest vote
// counts, thresholds are "at least").
func Tally(a *models.Approval, votes []models.Vote) approval.Result {
	return approval.Tally(PolicyOf(a), engineVotes(votes))
}

// PolicyOf is the policy frozen in an approval.
func PolicyOf(a *models.Approval) approval.Policy {
	return approval.Policy{Voters: a.Voters, MinApprovals: a.MinApprovals, MinRejections: a.MinRejections}
}

// VotersWith lists who voted d, each voter's latest vote counting.
func VotersWith(r approval.Result, d approval.Decision) []string {
	var out []string
	for _, v := range r.Votes {
		if v.Decision == d {
			out = append(out, v.Voter)
		}
	}
	return out
}

func engineVotes(votes []models.Vote) []approval.Vote {
	out := make([]approval.Vote, len(votes))
	for i, v := range votes {
		out[i] = approval.Vote{Voter: v.Voter, Decision: approval.Decision(v.Decision), Comment: v.Comment, At: v.CreatedAt}
	}
	return out
}

func normalize(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// Describe says what people are shown of one subject; false when its kind
// does not know it (any more).
func (s *Service) Describe(ctx context.Context, subject Subject) (Summary, bool, error) {
	kind, ok := s.kinds[subject.Kind]
	if !ok {
		return Summary{}, false, nil
	}
	sums, err := kind.Describe(ctx, s.queue.DB(), []string{subject.ID})
	if err != nil {
		return Summary{}, false, err
	}
	sum, ok := sums[subject.ID]
	return sum, ok, nil
}

// Approval is a subject's approval with its votes in the order they were
// cast; nil when the subject has none (yet).
func (s *Service) Approval(ctx context.Context, subject Subject) (*models.Approval, []models.Vote, error) {
	db := s.queue.DB()
	a, err := models.ApprovalBySubject(ctx, db, subject.String())
	if errors.Is(err, models.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	votes, err := models.VotesOf(ctx, db, a.ID)
	return a, votes, err
}
