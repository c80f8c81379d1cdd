package approval_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// vote is a factory: voter's decision d ("a" or "r") recorded at t0+minute
// minutes.
func vote(voter, d string, minute int) approval.Vote {
	dec := approval.Approve
	if d == "r" {
		dec = approval.Reject
	}
	return approval.Vote{Voter: voter, Decision: dec, At: t0.Add(time.Duration(minute) * time.Minute)}
}

func policy(minApprovals, minRejections int, voters ...string) approval.Policy {
	return approval.Policy{Voters: voters, MinApprovals: minApprovals, MinRejections: minRejections}
}

func fieldsOf(t *testing.T, err error) map[string]string {
	t.Helper()
	var ae *apperr.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, apperr.Invalid, ae.Code)
	return ae.Fields
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		p      approval.Policy
		fields []string // the fields at fault; none: valid
	}{
		{name: "one voter, one each", p: policy(1, 1, "ada@example.com")},
		{name: "thresholds may equal the voters", p: policy(3, 3, "a@example.com", "b@example.com", "c@example.com")},
		{name: "unanimity to approve, any veto", p: policy(3, 1, "a@example.com", "b@example.com", "c@example.com")},
		{name: "spaces around an address are fine", p: policy(1, 1, " ada@example.com ")},
		{name: "no voters", p: policy(1, 1), fields: []string{"voters"}},
		{name: "zero approvals", p: policy(0, 1, "a@example.com"), fields: []string{"min_approvals"}},
		{name: "negative rejections", p: policy(1, -1, "a@example.com"), fields: []string{"min_rejections"}},
		{name: "more approvals than voters", p: policy(3, 1, "a@example.com", "b@example.com"), fields: []string{"min_approvals"}},
		{name: "more rejections than voters", p: policy(1, 3, "a@example.com", "b@example.com"), fields: []string{"min_rejections"}},
		{
			name:   "duplicates count once, whatever their case",
			p:      policy(2, 2, "ada@example.com", "ADA@Example.com"),
			fields: []string{"min_approvals", "min_rejections"},
		},
		{name: "empty address", p: policy(1, 1, "a@example.com", " "), fields: []string{"voters[1]"}},
		{name: "not an address", p: policy(1, 1, "ada"), fields: []string{"voters[0]"}},
		{name: "a display name is refused", p: policy(1, 1, "Ada <ada@example.com>"), fields: []string{"voters[0]"}},
		{name: "two addresses in one entry", p: policy(1, 1, "a@example.com, b@example.com"), fields: []string{"voters[0]"}},
		{
			name:   "every problem at once",
			p:      policy(0, 9, "a@example.com", "nope"),
			fields: []string{"voters[1]", "min_approvals", "min_rejections"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.p.Validate()
			if len(tc.fields) == 0 {
				require.NoError(t, err)
				return
			}
			got := fieldsOf(t, err)
			require.Len(t, got, len(tc.fields), "fields: %v", got)
			for _, f := range tc.fields {
				require.Contains(t, got, f)
				require.NotEmpty(t, got[f])
			}
		})
	}
}

func TestValidateSaysWhy(t *testing.T) {
	t.Parallel()
	f := fieldsOf(t, policy(3, 0, "a@example.com", "b@example.com").Validate())
	require.Contains(t, f["min_approvals"], "at most the number of voters (2)")
	require.Contains(t, f["min_rejections"], "at least 1")
}

func TestNormalized(t *testing.T) {
	t.Parallel()
	p := policy(1, 1, " Ada@Example.com", "bob@example.com", "ada@example.COM", "", "BOB@example.com").Normalized()
	require.Equal(t, []string{"ada@example.com", "bob@example.com"}, p.Voters)
	require.True(t, p.IsVoter("ADA@example.com "))
	require.False(t, p.IsVoter("eve@example.com"))
	require.False(t, p.IsVoter(""))
}

func TestTally(t *testing.T) {
	t.Parallel()
	const a, b, c = "a@example.com", "b@example.com", "c@example.com"
	three := policy(2, 2, a, b, c)
	for _, tc := range []struct {
		name        string
		p           approval.Policy
		votes       []approval.Vote
		state       approval.State
		approvals   int
		rejections  int
		waiting     []string
		decisive    *approval.Vote // nil: none
		countedFrom []string       // voters of Result.Votes, in order
	}{
		{
			name: "no votes", p: three,
			state: approval.Pending, waiting: []string{a, b, c},
		},
		{
			name: "below both thresholds", p: three,
			votes: []approval.Vote{vote(a, "a", 1), vote(b, "r", 2)},
			state: approval.Pending, approvals: 1, rejections: 1, waiting: []string{c}, countedFrom: []string{a, b},
		},
		{
			name: "reaching the approval threshold approves", p: three,
			votes: []approval.Vote{vote(a, "a", 1), vote(b, "r", 2), vote(c, "a", 3)},
			state: approval.Approved, approvals: 2, rejections: 1, decisive: ptr(vote(c, "a", 3)), countedFrom: []string{a, b, c},
		},
		{
			name: "reaching the rejection threshold rejects", p: three,
			votes: []approval.Vote{vote(a, "r", 1), vote(b, "r", 2)},
			state: approval.Rejected, rejections: 2, waiting: []string{c}, decisive: ptr(vote(b, "r", 2)), countedFrom: []string{a, b},
		},
		{
			// The seed's code compared with "==": a second approval past a
			// minimum of 1 never approved.
			name:  "thresholds are at least: min 1, two approvals",
			p:     policy(1, 1, a, b),
			votes: []approval.Vote{vote(a, "a", 1), vote(b, "a", 1)},
			state: approval.Approved, approvals: 1, waiting: []string{b}, decisive: ptr(vote(a, "a", 1)), countedFrom: []string{a},
		},
		{
			name:  "thresholds are at least: approvals arrive together",
			p:     policy(2, 3, a, b, c),
			votes: []approval.Vote{vote(a, "a", 5), vote(b, "a", 5), vote(c, "a", 5)},
			state: approval.Approved, approvals: 2, waiting: []string{c}, decisive: ptr(vote(b, "a", 5)), countedFrom: []string{a, b},
		},
		{
			name: "the latest vote of a voter counts", p: three,
			votes: []approval.Vote{vote(a, "a", 1), vote(a, "r", 2), vote(b, "a", 3)},
			state: approval.Pending, approvals: 1, rejections: 1, waiting: []string{c}, countedFrom: []string{a, b},
		},
		{
			name: "voting the same twice counts once", p: three,
			votes: []approval.Vote{vote(a, "a", 1), vote(a, "a", 2)},
			state: approval.Pending, approvals: 1, waiting: []string{b, c}, countedFrom: []string{a},
		},
		{
			name: "non-voters never count", p: three,
			votes: []approval.Vote{vote("eve@example.com", "a", 1), vote(a, "a", 2), vote("mallory@example.com", "a", 3)},
			state: approval.Pending, approvals: 1, waiting: []string{b, c}, countedFrom: []string{a},
		},
		{
			name: "voters match case-insensitively", p: policy(2, 2, "A@Example.com", b),
			votes: []approval.Vote{vote(" a@EXAMPLE.com", "a", 1), vote("B@example.com", "a", 2)},
			state: approval.Approved, approvals: 2, decisive: ptr(vote(b, "a", 2)), countedFrom: []string{a, b},
		},
		{
			name: "votes are replayed in time order, not slice order", p: three,
			votes: []approval.Vote{vote(a, "a", 9), vote(a, "r", 1), vote(b, "a", 5)},
			state: approval.Approved, approvals: 2, waiting: []string{c}, decisive: ptr(vote(a, "a", 9)), countedFrom: []string{a, b},
		},
		{
			name: "the same time keeps slice order", p: three,
			votes: []approval.Vote{vote(a, "r", 4), vote(a, "a", 4), vote(b, "a", 4)},
			state: approval.Approved, approvals: 2, waiting: []string{c}, decisive: ptr(vote(b, "a", 4)), countedFrom: []string{a, b},
		},
		{
			// a approves, b rejects, a switches: rejected at minute 3. Then
			// b and c approve, which would meet the approval threshold too;
			// the first decision stands and the counts stay those at it.
			name: "both thresholds met by vote changes: the first one reached stands", p: three,
			votes: []approval.Vote{
				vote(a, "a", 1), vote(b, "r", 2), vote(a, "r", 3), vote(b, "a", 4), vote(c, "a", 5),
			},
			state: approval.Rejected, rejections: 2, waiting: []string{c}, decisive: ptr(vote(a, "r", 3)), countedFrom: []string{a, b},
		},
		{
			name: "a change after the decision is ignored", p: policy(1, 1, a, b),
			votes: []approval.Vote{vote(a, "a", 1), vote(a, "r", 2), vote(b, "r", 3)},
			state: approval.Approved, approvals: 1, waiting: []string{b}, decisive: ptr(vote(a, "a", 1)), countedFrom: []string{a},
		},
		{
			name: "unknown decisions are ignored", p: policy(1, 1, a),
			votes: []approval.Vote{{Voter: a, Decision: "abstain", At: t0}, {Voter: a, Decision: "", At: t0}},
			state: approval.Pending, waiting: []string{a},
		},
		{
			name: "an invalid policy never decides without a vote", p: policy(0, 0, a),
			state: approval.Pending, waiting: []string{a},
		},
		{
			name: "an unreachable threshold is never reached", p: policy(2, 2, a),
			votes: []approval.Vote{vote(a, "a", 1)},
			state: approval.Pending, approvals: 1, countedFrom: []string{a},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := approval.Tally(tc.p, tc.votes)
			require.Equal(t, tc.state, r.State)
			require.Equal(t, tc.state != approval.Pending, r.Decided())
			require.Equal(t, tc.approvals, r.Approvals, "approvals")
			require.Equal(t, tc.rejections, r.Rejections, "rejections")
			require.Equal(t, tc.waiting, r.Waiting, "waiting")
			if tc.decisive == nil {
				require.Nil(t, r.Decisive)
			} else {
				require.NotNil(t, r.Decisive)
				require.Equal(t, *tc.decisive, *r.Decisive)
			}
			var counted []string
			for _, v := range r.Votes {
				counted = append(counted, v.Voter)
			}
			require.Equal(t, tc.countedFrom, counted, "counted votes")
		})
	}
}

func TestTallyKeepsComments(t *testing.T) {
	t.Parallel()
	v := vote("Ada@example.com", "r", 1)
	v.Comment = "the plan destroys the database"
	r := approval.Tally(policy(1, 1, "ada@example.com"), []approval.Vote{v})
	require.Equal(t, approval.Rejected, r.State)
	require.Equal(t, "the plan destroys the database", r.Decisive.Comment)
	require.Equal(t, "ada@example.com", r.Decisive.Voter, "normalized")
	require.Equal(t, r.Votes, []approval.Vote{*r.Decisive})
}

func TestTallyDoesNotModifyItsInput(t *testing.T) {
	t.Parallel()
	votes := []approval.Vote{vote("B@example.com", "a", 2), vote("a@example.com", "r", 1)}
	orig := append([]approval.Vote(nil), votes...)
	p := policy(1, 1, "A@example.com", "b@example.com")
	r := approval.Tally(p, votes)
	require.Equal(t, orig, votes)
	require.Equal(t, []string{"A@example.com", "b@example.com"}, p.Voters)
	r.Decisive.Comment = "changed"
	require.Empty(t, votes[1].Comment)
}

func TestCanVote(t *testing.T) {
	t.Parallel()
	p := policy(1, 1, "ada@example.com", "bob@example.com")
	pending := approval.Tally(p, nil)
	decided := approval.Tally(p, []approval.Vote{vote("bob@example.com", "a", 1)})
	require.Equal(t, approval.Approved, decided.State)

	for _, tc := range []struct {
		name  string
		r     approval.Result
		voter string
		want  error
	}{
		{"a voter while pending", pending, "ada@example.com", nil},
		{"case does not matter", pending, " ADA@example.com", nil},
		{"not a voter", pending, "eve@example.com", approval.ErrNotVoter},
		{"empty", pending, "", approval.ErrNotVoter},
		{"decided, for everyone", decided, "ada@example.com", approval.ErrDecided},
		{"decided, for the decisive voter too", decided, "bob@example.com", approval.ErrDecided},
		{"not a voter comes first", decided, "eve@example.com", approval.ErrNotVoter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := approval.CanVote(p, tc.r, tc.voter)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestCanVoteErrorsMapToStatuses(t *testing.T) {
	t.Parallel()
	require.Equal(t, apperr.Forbidden, apperr.CodeOf(approval.ErrNotVoter))
	require.Equal(t, apperr.Conflict, apperr.CodeOf(approval.ErrDecided))
	require.False(t, errors.Is(approval.ErrDecided, approval.ErrNotVoter))
}

func TestParseDecision(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]approval.Decision{"approve": approval.Approve, " Reject ": approval.Reject, "APPROVE": approval.Approve} {
		got, err := approval.ParseDecision(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "yes", "approved", "rejected"} {
		_, err := approval.ParseDecision(in)
		require.Contains(t, fieldsOf(t, err), "decision", in)
	}
}

func ptr[T any](v T) *T { return &v }
