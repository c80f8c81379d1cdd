package allocation_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/allocation"
)

// scenario is a random pool and request, small enough to brute-force.
type scenario struct {
	candidates []allocation.Environment // what the caller locked
	all        []allocation.Environment // the pool
	reqs       []allocation.Requirement
}

var statuses = []allocation.Status{
	allocation.StatusAvailable, allocation.StatusAvailable, allocation.StatusAvailable,
	allocation.StatusInUse, allocation.StatusCleaning, allocation.StatusDirty, allocation.StatusDeregistering,
}

func randomCaps(rng *rand.Rand, maxKeys int) map[string]string {
	keys := []string{"region", "gpu", "zone"}
	values := []string{"a", "b"}
	caps := map[string]string{}
	for range rng.IntN(maxKeys + 1) {
		caps[keys[rng.IntN(len(keys))]] = values[rng.IntN(len(values))]
	}
	return caps
}

func randomScenario(rng *rand.Rand) scenario {
	var s scenario
	for i := range rng.IntN(11) {
		e := allocation.Environment{
			ID:           int64(rng.IntN(1000)*10 + i), // unique, in random order
			Pool:         "ci",
			Capabilities: randomCaps(rng, 3),
			Status:       statuses[rng.IntN(len(statuses))],
		}
		if rng.IntN(4) > 0 { // few distinct times, so ties happen
			e.LastReleasedAt = t0.Add(time.Duration(rng.IntN(4)) * time.Hour)
		}
		if i > 0 && rng.IntN(8) == 0 { // an occasional duplicate row
			e = s.all[rng.IntN(len(s.all))]
		}
		s.all = append(s.all, e)
		// Most available environments are candidates; some are locked by a
		// concurrent allocation, and now and then the caller's view is stale.
		if e.Status == allocation.StatusAvailable && rng.IntN(5) > 0 || rng.IntN(10) == 0 {
			s.candidates = append(s.candidates, e)
		}
	}
	for range 1 + rng.IntN(4) {
		s.reqs = append(s.reqs, allocation.Requirement{Capabilities: randomCaps(rng, 1+rng.IntN(2))})
	}
	return s
}

// usable returns the environments Match may pick: available candidates,
// one per ID.
func usable(candidates []allocation.Environment) []allocation.Environment {
	var out []allocation.Environment
	for _, e := range candidates {
		if e.Status == allocation.StatusAvailable && !slices.ContainsFunc(out, func(o allocation.Environment) bool { return o.ID == e.ID }) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, allocation.Compare)
	return out
}

// registered returns the environments Classify counts.
func registered(s scenario) []allocation.Environment {
	var out []allocation.Environment
	for _, e := range slices.Concat(s.all, s.candidates) {
		if e.Status != allocation.StatusDeregistering && !slices.ContainsFunc(out, func(o allocation.Environment) bool { return o.ID == e.ID }) {
			out = append(out, e)
		}
	}
	return out
}

// assignments calls visit with every assignment of distinct envs to reqs (as
// indexes into envs) until visit returns false.
func assignments(envs []allocation.Environment, reqs []allocation.Requirement, visit func([]int) bool) {
	used := make([]bool, len(envs))
	cur := make([]int, len(reqs))
	var rec func(r int) bool
	rec = func(r int) bool {
		if r == len(reqs) {
			return visit(slices.Clone(cur))
		}
		for e := range envs {
			if !used[e] && reqs[r].Matches(envs[e]) {
				used[e], cur[r] = true, e
				if !rec(r + 1) {
					return false
				}
				used[e] = false
			}
		}
		return true
	}
	rec(0)
}

func exists(envs []allocation.Environment, reqs []allocation.Requirement) bool {
	found := false
	assignments(envs, reqs, func([]int) bool { found = true; return false })
	return found
}

func forEachScenario(t *testing.T, n int, check func(t *testing.T, s scenario)) {
	t.Helper()
	for i := range n {
		seed := uint64(i)
		s := randomScenario(rand.New(rand.NewPCG(seed, 0x6a6e7472)))
		ok := t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { check(t, s) })
		if !ok {
			t.Logf("scenario: %+v", s)
			return
		}
	}
}

func TestPropertyPicksAreValid(t *testing.T) {
	t.Parallel()
	forEachScenario(t, 3000, func(t *testing.T, s scenario) {
		picks, err := allocation.Match(s.candidates, s.all, s.reqs)
		if err != nil {
			return
		}
		require.Len(t, picks, len(s.reqs))
		pool := usable(s.candidates)
		seen := map[int64]bool{}
		for i, id := range picks {
			require.False(t, seen[id], "environment %d picked twice", id)
			seen[id] = true
			idx := slices.IndexFunc(pool, func(e allocation.Environment) bool { return e.ID == id })
			require.GreaterOrEqual(t, idx, 0, "environment %d is not an available candidate", id)
			require.True(t, s.reqs[i].Matches(pool[idx]), "environment %d does not match requirement %d", id, i)
		}
	})
}

func TestPropertyFailuresAreTrue(t *testing.T) {
	t.Parallel()
	forEachScenario(t, 3000, func(t *testing.T, s scenario) {
		_, err := allocation.Match(s.candidates, s.all, s.reqs)
		possibleNow := exists(usable(s.candidates), s.reqs)
		possibleEver := exists(registered(s), s.reqs)
		switch {
		case err == nil:
			require.True(t, possibleNow)
		case errors.Is(err, allocation.ErrUnsatisfiableNow):
			require.False(t, possibleNow, "Match gave up although an assignment exists among the available candidates")
			require.True(t, possibleEver, "423 for a request the pool can never serve")
		case errors.Is(err, allocation.ErrNeverSatisfiable):
			require.False(t, possibleNow)
			require.False(t, possibleEver, "400 for a request the pool could serve later")
			checkExplanation(t, s, err)
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	})
}

// checkExplanation verifies what a NeverSatisfiableError claims.
func checkExplanation(t *testing.T, s scenario, err error) {
	var never *allocation.NeverSatisfiableError
	require.True(t, errors.As(err, &never))
	require.NotEmpty(t, never.Field)
	require.NotEmpty(t, never.Reason)
	pool := registered(s)
	if len(pool) == 0 {
		require.Equal(t, "pool", never.Field)
		return
	}
	if never.Competing == nil {
		r := s.reqs[never.Requirement]
		for _, e := range pool {
			require.False(t, r.Matches(e), "requirement %d is said to match nothing but matches %d", never.Requirement, e.ID)
			if never.Capability != "" {
				v, ok := e.Capabilities[never.Capability]
				require.False(t, ok && v == r.Capabilities[never.Capability])
			}
		}
		return
	}
	// Hall's condition fails for the competing requirements.
	require.Contains(t, never.Competing, never.Requirement)
	matching := 0
	for _, e := range pool {
		if slices.ContainsFunc(never.Competing, func(i int) bool { return s.reqs[i].Matches(e) }) {
			matching++
		}
	}
	require.Less(t, matching, len(never.Competing))
}

// TestPropertyPreferenceIsBest checks the preference rule against every
// assignment: sort each assignment's environments by preference; ours is at
// least as preferred at every position.
func TestPropertyPreferenceIsBest(t *testing.T) {
	t.Parallel()
	forEachScenario(t, 3000, func(t *testing.T, s scenario) {
		picks, err := allocation.Match(s.candidates, s.all, s.reqs)
		if err != nil {
			return
		}
		pool := usable(s.candidates) // sorted by preference: index = rank
		rank := func(id int64) int {
			return slices.IndexFunc(pool, func(e allocation.Environment) bool { return e.ID == id })
		}
		ours := make([]int, len(picks))
		for i, id := range picks {
			ours[i] = rank(id)
		}
		slices.Sort(ours)
		assignments(pool, s.reqs, func(other []int) bool {
			slices.Sort(other)
			for i := range ours {
				require.LessOrEqual(t, ours[i], other[i], "assignment %v is preferred to ours %v", other, ours)
			}
			return true
		})
	})
}

func TestPropertyIdenticalRequirementsTakeTheLeastRecentlyReleased(t *testing.T) {
	t.Parallel()
	forEachScenario(t, 3000, func(t *testing.T, s scenario) {
		reqs := make([]allocation.Requirement, len(s.reqs))
		for i := range reqs {
			reqs[i] = s.reqs[0]
		}
		var want []int64
		for _, e := range usable(s.candidates) { // in preference order
			if reqs[0].Matches(e) && len(want) < len(reqs) {
				want = append(want, e.ID)
			}
		}
		picks, err := allocation.Match(s.candidates, s.all, reqs)
		if len(want) < len(reqs) {
			require.Error(t, err)
			return
		}
		require.NoError(t, err)
		require.Equal(t, want, picks)
	})
}

func TestPropertyCandidateOrderDoesNotMatter(t *testing.T) {
	t.Parallel()
	forEachScenario(t, 1000, func(t *testing.T, s scenario) {
		want, wantErr := allocation.Match(s.candidates, s.all, s.reqs)
		shuffled := slices.Clone(s.candidates)
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got, gotErr := allocation.Match(shuffled, s.all, s.reqs)
		require.Equal(t, want, got)
		require.Equal(t, wantErr, gotErr)
	})
}
