package approval_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/approval"
)

// scenario is a random valid policy and a random history of votes, in the
// order they were recorded (At never decreases).
type scenario struct {
	p     approval.Policy
	votes []approval.Vote
}

var outsiders = []string{"eve@example.com", "mallory@example.com"}

func randomCase(rng *rand.Rand, s string) string {
	switch rng.IntN(4) {
	case 0:
		return strings.ToUpper(s)
	case 1:
		return " " + s
	}
	return s
}

// randomVotes returns n votes from people (voters and outsiders), starting
// at minute from and moving forward by 0 to 2 minutes, so that ties happen.
func randomVotes(rng *rand.Rand, people []string, n, from int) []approval.Vote {
	votes := make([]approval.Vote, 0, n)
	minute := from
	for range n {
		minute += rng.IntN(3)
		d := "a"
		if rng.IntN(2) == 0 {
			d = "r"
		}
		v := vote(randomCase(rng, people[rng.IntN(len(people))]), d, minute)
		v.Comment = fmt.Sprint("vote ", len(votes))
		votes = append(votes, v)
	}
	return votes
}

func randomScenario(rng *rand.Rand) scenario {
	n := 1 + rng.IntN(5)
	var voters []string
	for i := range n {
		voters = append(voters, fmt.Sprintf("v%d@example.com", i))
	}
	if rng.IntN(4) == 0 { // a duplicate in another case
		voters = append(voters, strings.ToUpper(voters[rng.IntN(n)]))
	}
	p := approval.Policy{Voters: voters, MinApprovals: 1 + rng.IntN(n), MinRejections: 1 + rng.IntN(n)}
	people := append(slices.Clone(voters[:n]), outsiders...)
	return scenario{p: p, votes: randomVotes(rng, people, rng.IntN(16), 0)}
}

func forEachScenario(t *testing.T, n int, check func(t *testing.T, rng *rand.Rand, s scenario)) {
	t.Helper()
	for i := range n {
		seed := uint64(i)
		rng := rand.New(rand.NewPCG(seed, 0x766f7465))
		s := randomScenario(rng)
		ok := t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { check(t, rng, s) })
		if !ok {
			t.Logf("scenario: %+v", s)
			return
		}
	}
}

func isVoter(p approval.Policy, who string) bool {
	for _, v := range p.Voters {
		if strings.EqualFold(strings.TrimSpace(v), strings.TrimSpace(who)) {
			return true
		}
	}
	return false
}

// latestAfter returns, per voter (lower case), the decision of their latest
// vote among the first k of votes (which are in recording order), counting
// voters only: a model written independently of Tally.
func latestAfter(p approval.Policy, votes []approval.Vote, k int) map[string]approval.Decision {
	latest := map[string]approval.Decision{}
	for _, v := range votes[:k] {
		if isVoter(p, v.Voter) {
			latest[strings.ToLower(strings.TrimSpace(v.Voter))] = v.Decision
		}
	}
	return latest
}

func count(latest map[string]approval.Decision, d approval.Decision) int {
	n := 0
	for _, got := range latest {
		if got == d {
			n++
		}
	}
	return n
}

// model recomputes the outcome from scratch after every vote: the first
// prefix at which a threshold is met decides.
func model(p approval.Policy, votes []approval.Vote) (approval.State, int) {
	for k := 1; k <= len(votes); k++ {
		latest := latestAfter(p, votes, k)
		if count(latest, approval.Approve) >= p.MinApprovals {
			return approval.Approved, k - 1
		}
		if count(latest, approval.Reject) >= p.MinRejections {
			return approval.Rejected, k - 1
		}
	}
	return approval.Pending, -1
}

func TestPropertyTallyMatchesTheModel(t *testing.T) {
	t.Parallel()
	forEachScenario(t, 3000, func(t *testing.T, _ *rand.Rand, s scenario) {
		require.NoError(t, s.p.Validate())
		r := approval.Tally(s.p, s.votes)
		state, at := model(s.p, s.votes)
		require.Equal(t, state, r.State)
		if state == approval.Pending {
			require.Nil(t, r.Decisive)
			at = len(s.votes) - 1
		} else {
			require.NotNil(t, r.Decisive)
			require.Equal(t, s.votes[at].Comment, r.Decisive.Comment, "the decisive vote")
		}
		latest := latestAfter(s.p, s.votes, at+1)
		require.Equal(t, count(latest, approval.Approve), r.Approvals)
		require.Equal(t, count(latest, approval.Reject), r.Rejections)
		require.Equal(t, r.Approvals+r.Rejections, len(r.Votes))
		require.Len(t, r.Waiting, len(s.p.Normalized().Voters)-len(latest))
		for _, w := range r.Waiting {
			require.NotContains(t, latest, w)
		}
	})
}

func TestPropertyDecidedNeverChanges(t *testing.T) {
	t.Parallel()
	forEachScenario(t, 3000, func(t *testing.T, rng *rand.Rand, s scenario) {
		// Every longer history, vote by vote: once decided, the whole result
		// stays as it was.
		var decided *approval.Result
		for k := range len(s.votes) + 1 {
			r := approval.Tally(s.p, s.votes[:k])
			if decided != nil {
				require.Equal(t, *decided, r, "after %d votes", k)
			} else if r.Decided() {
				decided = &r
			}
		}
		// And with a burst of further votes by anyone, voters included.
		r := approval.Tally(s.p, s.votes)
		last := 0
		if len(s.votes) > 0 {
			last = int(s.votes[len(s.votes)-1].At.Sub(t0) / time.Minute)
		}
		people := append(slices.Clone(s.p.Voters), outsiders...)
		more := append(slices.Clone(s.votes), randomVotes(rng, people, 1+rng.IntN(10), last)...)
		after := approval.Tally(s.p, more)
		if r.Decided() {
			require.Equal(t, r, after)
			for _, v := range people {
				require.Error(t, approval.CanVote(s.p, after, v), "nobody may vote once decided")
			}
		}
	})
}

func TestPropertyApprovedMeansEnoughDistinctApprovers(t *testing.T) {
	t.Parallel()
	forEachScenario(t, 3000, func(t *testing.T, _ *rand.Rand, s scenario) {
		r := approval.Tally(s.p, s.votes)
		if r.State != approval.Approved {
			return
		}
		// The latest vote of each voter up to and including the decisive
		// one, found by time rather than by Tally's own bookkeeping.
		latest := map[string]approval.Vote{}
		for _, v := range s.votes {
			if v.At.After(r.Decisive.At) {
				break
			}
			if isVoter(s.p, v.Voter) {
				latest[strings.ToLower(strings.TrimSpace(v.Voter))] = v
			}
			if v.Comment == r.Decisive.Comment {
				break
			}
		}
		approvers := 0
		for _, v := range latest {
			if v.Decision == approval.Approve {
				approvers++
			}
		}
		require.GreaterOrEqual(t, approvers, s.p.MinApprovals)
		require.Less(t, count(latestBefore(s, r.Decisive.Comment), approval.Approve), s.p.MinApprovals,
			"the decisive vote was needed")
	})
}

// latestBefore is latestAfter up to, not including, the vote with comment.
func latestBefore(s scenario, comment string) map[string]approval.Decision {
	k := slices.IndexFunc(s.votes, func(v approval.Vote) bool { return v.Comment == comment })
	return latestAfter(s.p, s.votes, k)
}

func TestPropertyNonVotersNeverCount(t *testing.T) {
	t.Parallel()
	forEachScenario(t, 3000, func(t *testing.T, rng *rand.Rand, s scenario) {
		var voters []approval.Vote
		for _, v := range s.votes {
			if isVoter(s.p, v.Voter) {
				voters = append(voters, v)
			}
		}
		// Outsiders' votes anywhere in time, in any number, for either side
		// (the voters' votes keep their order).
		all := append(slices.Clone(s.votes), randomVotes(rng, outsiders, rng.IntN(20), 0)...)
		slices.SortStableFunc(all, func(a, b approval.Vote) int { return a.At.Compare(b.At) })
		want := approval.Tally(s.p, voters)
		require.Equal(t, want, approval.Tally(s.p, s.votes))
		require.Equal(t, want, approval.Tally(s.p, all))
		for _, o := range outsiders {
			require.ErrorIs(t, approval.CanVote(s.p, want, o), approval.ErrNotVoter)
		}
	})
}

func TestPropertyThresholdsAreAtLeast(t *testing.T) {
	t.Parallel()
	forEachScenario(t, 3000, func(t *testing.T, rng *rand.Rand, s scenario) {
		voters := s.p.Normalized().Voters
		// k distinct voters all approve (k ≥ MinApprovals) with no
		// rejections: approved, whatever k is.
		k := s.p.MinApprovals + rng.IntN(len(voters)-s.p.MinApprovals+1)
		var votes []approval.Vote
		for i, v := range rng.Perm(len(voters))[:k] {
			votes = append(votes, vote(voters[v], "a", i))
		}
		r := approval.Tally(s.p, votes)
		require.Equal(t, approval.Approved, r.State, "%d approvals for a minimum of %d", k, s.p.MinApprovals)
		require.Equal(t, s.p.MinApprovals, r.Approvals, "frozen at the decision")

		// And in a random history: pending means no prefix ever met a
		// threshold.
		r = approval.Tally(s.p, s.votes)
		if r.State == approval.Pending {
			for k := range len(s.votes) + 1 {
				latest := latestAfter(s.p, s.votes, k)
				require.Less(t, count(latest, approval.Approve), s.p.MinApprovals)
				require.Less(t, count(latest, approval.Reject), s.p.MinRejections)
			}
		}
	})
}

func TestPropertySliceOrderDoesNotMatterForDistinctTimes(t *testing.T) {
	t.Parallel()
	forEachScenario(t, 3000, func(t *testing.T, rng *rand.Rand, s scenario) {
		votes := slices.Clone(s.votes)
		for i := range votes { // distinct times, same order
			votes[i].At = t0.Add(time.Duration(i) * time.Second)
		}
		want := approval.Tally(s.p, votes)
		rng.Shuffle(len(votes), func(i, j int) { votes[i], votes[j] = votes[j], votes[i] })
		require.Equal(t, want, approval.Tally(s.p, votes))
	})
}

func TestPropertySameTimeKeepsSliceOrder(t *testing.T) {
	t.Parallel()
	forEachScenario(t, 1000, func(t *testing.T, rng *rand.Rand, s scenario) {
		// Long histories (past where sorting is insertion sort) recorded in
		// two instants, out of order: time decides, then the slice order.
		people := append(slices.Clone(s.p.Voters), outsiders...)
		votes := append(slices.Clone(s.votes), randomVotes(rng, people, 20+rng.IntN(60), 0)...)
		var early, late []approval.Vote
		for i := range votes {
			votes[i].Comment = fmt.Sprint("vote ", i)
			votes[i].At = t0.Add(time.Duration(rng.IntN(2)) * time.Minute)
			if votes[i].At.Equal(t0) {
				early = append(early, votes[i])
			} else {
				late = append(late, votes[i])
			}
		}
		replay := append(early, late...)
		state, at := model(s.p, replay)
		r := approval.Tally(s.p, votes)
		require.Equal(t, state, r.State)
		if state != approval.Pending {
			require.Equal(t, replay[at].Comment, r.Decisive.Comment)
		}
	})
}
