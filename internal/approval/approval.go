// Package approval is the one mechanism Gantry uses wherever people must
// agree before something happens: infrastructure executions, pipeline gates,
// reinstating a dirty environment. It is pure: no database, no clock, no I/O.
// Callers load the policy and the recorded votes, call Tally, and persist what
// it says.
//
// The rules:
//
//   - A Policy names its voters by email address, compared case-insensitively;
//     duplicates count once. It asks for at least MinApprovals approvals or
//     at least MinRejections rejections. Thresholds are "at least", never
//     "exactly": a policy asking for 1 approval is approved with 2.
//   - Each voter has one vote that counts: their latest. A voter may change
//     it until the question is decided. Votes of people who are not voters
//     never count.
//   - Tally replays the votes in time order (Vote.At; votes with the same At
//     in the order given) and stops at the first vote that reaches a
//     threshold. That vote is Result.Decisive, and the result is frozen
//     there: votes after it change nothing, so a decided approval can never
//     flip, even when vote changes would meet both thresholds later.
//   - CanVote says whether a person may vote now: ErrNotVoter for people
//     who are not voters, ErrDecided once the question is decided.
//
// Replaying by At means At must follow the order in which votes are
// recorded. Stamp it from one clock while holding the approval's lock (for
// example PostgreSQL's clock_timestamp() after SELECT … FOR UPDATE of the
// approval row), check CanVote under the same lock, and pass the votes
// ordered by At, then by id. Then every vote recorded after the decision is
// refused, and one appended anyway (a race, a replayed job) sorts after the
// decisive vote and is ignored.
//
// Links emailed to voters are signed by a Signer (link.go): a token bound to
// one voter and one subject (such as "execution:123"), valid until it
// expires, so a voter can vote without signing in.
package approval

import (
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/gantryhq/gantry/internal/apperr"
)

// Decision is what a voter says.
type Decision string

// Decisions, as stored.
const (
	Approve Decision = "approve"
	Reject  Decision = "reject"
)

// ParseDecision accepts "approve" or "reject" (any case, surrounding spaces
// ignored); anything else is an error naming the field "decision".
func ParseDecision(s string) (Decision, error) {
	switch d := Decision(strings.ToLower(strings.TrimSpace(s))); d {
	case Approve, Reject:
		return d, nil
	}
	return "", apperr.Field("decision", `must be "approve" or "reject"`)
}

// State is where an approval stands.
type State string

// States, as stored.
const (
	Pending  State = "pending"  // neither threshold reached yet
	Approved State = "approved" // MinApprovals reached first; final
	Rejected State = "rejected" // MinRejections reached first; final
)

// Policy says who votes and how many of them must agree.
type Policy struct {
	// Voters are email addresses, compared case-insensitively; a voter listed
	// twice counts once.
	Voters []string
	// MinApprovals is how many voters must approve (at least this many).
	MinApprovals int
	// MinRejections is how many voters must reject (at least this many).
	MinRejections int
}

// Field names in the errors of Validate.
const (
	FieldVoters        = "voters"
	FieldMinApprovals  = "min_approvals"
	FieldMinRejections = "min_rejections"
)

// Validate reports every problem with p as an *apperr.Error (code Invalid)
// whose Fields name the fields at fault: "voters" (or "voters[i]" for one
// address), "min_approvals", "min_rejections".
//
// Both thresholds must be between 1 and the number of distinct voters, so
// that both outcomes are reachable:
//
//   - A threshold of 0 would be met before anyone votes: an approval that
//     needs no approvals runs without a human, and one that needs no
//     rejections is rejected at once.
//   - An approval threshold above the number of voters can never be met:
//     the work could never run, and it would hold whatever it holds (the
//     merge lock of a repository, a pipeline's position) until someone
//     edits the configuration.
//   - A rejection threshold above the number of voters can never be met
//     either: the voters could not stop the work, only leave it waiting
//     forever, again holding the lock, instead of ending it as rejected so
//     that the next one can go.
//
// Thresholds whose sum exceeds the number of voters plus one are allowed
// (for example three voters, unanimity either way): then everyone may have
// voted with the result still pending, until someone changes their vote.
func (p Policy) Validate() error {
	bad := apperr.Fields{}
	seen := map[string]bool{}
	for i, v := range p.Voters {
		if reason := checkAddress(v); reason != "" {
			bad.Add(fmt.Sprintf("%s[%d]", FieldVoters, i), reason)
			continue
		}
		seen[normalize(v)] = true
	}
	n := len(seen)
	if len(p.Voters) == 0 {
		bad.Add(FieldVoters, "at least one voter is required")
	}
	switch {
	case p.MinApprovals < 1:
		bad.Add(FieldMinApprovals, "must be at least 1: with 0, the work would be approved before anyone votes")
	case n > 0 && p.MinApprovals > n:
		bad.Add(FieldMinApprovals, fmt.Sprintf("must be at most the number of voters (%d): more approvals than voters can never be reached", n))
	}
	switch {
	case p.MinRejections < 1:
		bad.Add(FieldMinRejections, "must be at least 1: with 0, the work would be rejected before anyone votes")
	case n > 0 && p.MinRejections > n:
		bad.Add(FieldMinRejections, fmt.Sprintf("must be at most the number of voters (%d): otherwise the voters could never reject, and the work would wait forever", n))
	}
	if len(bad) == 0 {
		return nil
	}
	return &apperr.Error{Code: apperr.Invalid, Message: "invalid approval policy", Fields: bad}
}

// checkAddress returns why s is not a bare email address, or "".
func checkAddress(s string) string {
	t := strings.TrimSpace(s)
	if t == "" {
		return "must not be empty"
	}
	a, err := mail.ParseAddress(t)
	if err != nil || a.Name != "" || a.Address != t {
		return fmt.Sprintf("%q is not an email address (give the bare address, such as ada@example.com)", s)
	}
	return ""
}

// Normalized returns p with its voters trimmed, lower-cased and
// deduplicated, in the order they first appear; empty entries are dropped.
// Store voters in this form.
func (p Policy) Normalized() Policy {
	out := make([]string, 0, len(p.Voters))
	for _, v := range p.Voters {
		if n := normalize(v); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	p.Voters = out
	return p
}

// IsVoter says whether email is one of p's voters (case-insensitively).
func (p Policy) IsVoter(email string) bool {
	n := normalize(email)
	return n != "" && slices.ContainsFunc(p.Voters, func(v string) bool { return normalize(v) == n })
}

// normalize is the form in which voters are compared.
func normalize(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// Vote is one vote as recorded. A voter may have several; the latest counts.
type Vote struct {
	Voter    string // email address
	Decision Decision
	Comment  string
	At       time.Time // when it was recorded; see the package doc
}

// Result is what the votes add up to.
type Result struct {
	State State
	// Approvals and Rejections count the voters whose vote counts approve
	// or reject. Once decided, they are the counts at the decisive vote.
	Approvals, Rejections int
	// Waiting are the voters who had not voted (at the decision, once
	// decided), in Policy order, normalized.
	Waiting []string
	// Votes are the votes that count: each voter's latest (up to the
	// decision, once decided), in Policy order, with Voter normalized.
	Votes []Vote
	// Decisive is the vote that decided; nil while pending.
	Decisive *Vote
}

// Decided says whether the result is final.
func (r Result) Decided() bool { return r.State == Approved || r.State == Rejected }

// Tally adds up votes under p. votes may hold several votes per voter, in
// any order; see the package doc for how they are replayed. Votes by people
// who are not voters, and votes with a Decision other than Approve or
// Reject, are ignored.
//
// Tally expects a valid policy (Validate). On an invalid one it still never
// decides without a vote: thresholds below 1 count as 1, and thresholds above
// the number of voters are never reached.
func Tally(p Policy, votes []Vote) Result {
	p = p.Normalized()
	index := make(map[string]int, len(p.Voters))
	for i, v := range p.Voters {
		index[v] = i
	}
	minApprovals, minRejections := max(1, p.MinApprovals), max(1, p.MinRejections)

	replay := make([]Vote, 0, len(votes))
	for _, v := range votes {
		v.Voter = normalize(v.Voter)
		if _, ok := index[v.Voter]; ok && (v.Decision == Approve || v.Decision == Reject) {
			replay = append(replay, v)
		}
	}
	slices.SortStableFunc(replay, func(a, b Vote) int { return a.At.Compare(b.At) })

	r := Result{State: Pending}
	latest := make([]*Vote, len(p.Voters))
	for i := range replay {
		v := &replay[i]
		slot := &latest[index[v.Voter]]
		if *slot != nil {
			r.add((*slot).Decision, -1)
		}
		*slot = v
		r.add(v.Decision, +1)
		// A vote moves one voter to one side, so only the threshold of the
		// side it joined can have been reached just now: never both.
		if r.Approvals >= minApprovals {
			r.State = Approved
		} else if r.Rejections >= minRejections {
			r.State = Rejected
		}
		if r.State != Pending {
			decisive := *v
			r.Decisive = &decisive
			break
		}
	}
	for i, v := range latest {
		if v == nil {
			r.Waiting = append(r.Waiting, p.Voters[i])
		} else {
			r.Votes = append(r.Votes, *v)
		}
	}
	return r
}

func (r *Result) add(d Decision, n int) {
	switch d {
	case Approve:
		r.Approvals += n
	case Reject:
		r.Rejections += n
	}
}

// Errors of CanVote. They are *apperr.Error values (403 and 409); compare
// with errors.Is.
var (
	ErrNotVoter error = &apperr.Error{Code: apperr.Forbidden, Message: "You are not a voter of this approval."}
	ErrDecided  error = &apperr.Error{Code: apperr.Conflict, Message: "This approval has already been decided; votes are closed."}
)

// CanVote says whether voter may vote (or change their vote) on an approval
// under p whose votes currently add up to r: ErrNotVoter when voter is not
// one of p's voters, else ErrDecided when r is decided, else nil. Check it
// while holding the approval's lock, with r from Tally under that lock.
func CanVote(p Policy, r Result, voter string) error {
	if !p.IsVoter(voter) {
		return ErrNotVoter
	}
	if r.Decided() {
		return ErrDecided
	}
	return nil
}
