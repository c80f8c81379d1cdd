package allocation_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/allocation"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// env is a factory: an available environment of pool "ci" released at
// t0+released hours (released < 0: never).
func env(id int64, released int, caps ...string) allocation.Environment {
	e := allocation.Environment{ID: id, Pool: "ci", Status: allocation.StatusAvailable, Capabilities: kv(caps...)}
	if released >= 0 {
		e.LastReleasedAt = t0.Add(time.Duration(released) * time.Hour)
	}
	return e
}

func withStatus(e allocation.Environment, s allocation.Status) allocation.Environment {
	e.Status = s
	return e
}

func kv(pairs ...string) map[string]string {
	if len(pairs) == 0 {
		return nil
	}
	m := map[string]string{}
	for i := 0; i < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return m
}

func req(pairs ...string) allocation.Requirement {
	return allocation.Requirement{Capabilities: kv(pairs...)}
}

func TestMatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		envs  []allocation.Environment // candidates and all alike
		reqs  []allocation.Requirement
		picks []int64
	}{
		{
			name:  "an empty requirement takes the least recently released",
			envs:  []allocation.Environment{env(1, 5), env(2, 1), env(3, 3)},
			reqs:  []allocation.Requirement{req()},
			picks: []int64{2},
		},
		{
			name:  "never released goes before any release",
			envs:  []allocation.Environment{env(1, 0), env(2, -1)},
			reqs:  []allocation.Requirement{req()},
			picks: []int64{2},
		},
		{
			name:  "ties by ID",
			envs:  []allocation.Environment{env(9, 2), env(4, 2), env(7, 2)},
			reqs:  []allocation.Requirement{req(), req()},
			picks: []int64{4, 7},
		},
		{
			name:  "capabilities must all match",
			envs:  []allocation.Environment{env(1, 0, "region", "eu"), env(2, 1, "region", "eu", "gpu", "t4"), env(3, 2, "gpu", "t4")},
			reqs:  []allocation.Requirement{req("region", "eu", "gpu", "t4")},
			picks: []int64{2},
		},
		{
			name: "finds the assignment greedy misses",
			// A matches e1 and e2 and e1 is preferred; B matches only e1.
			envs:  []allocation.Environment{env(1, 0, "zone", "x", "big", "yes"), env(2, 1, "zone", "x")},
			reqs:  []allocation.Requirement{req("zone", "x"), req("big", "yes")},
			picks: []int64{2, 1},
		},
		{
			name: "the constrained requirement does not push the other onto a worse environment than needed",
			envs: []allocation.Environment{
				env(1, 0, "gpu", "t4"), env(2, 1), env(3, 2), env(4, 3, "gpu", "t4"),
			},
			reqs:  []allocation.Requirement{req(), req("gpu", "t4")},
			picks: []int64{2, 1},
		},
		{
			name:  "only available environments are picked",
			envs:  []allocation.Environment{withStatus(env(1, -1), allocation.StatusInUse), withStatus(env(2, -1), allocation.StatusDirty), env(3, 9)},
			reqs:  []allocation.Requirement{req()},
			picks: []int64{3},
		},
		{
			name:  "a duplicated candidate counts once",
			envs:  []allocation.Environment{env(1, 0), env(1, 0), env(2, 1)},
			reqs:  []allocation.Requirement{req(), req()},
			picks: []int64{1, 2},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			picks, err := allocation.Match(tc.envs, tc.envs, tc.reqs)
			require.NoError(t, err)
			require.Equal(t, tc.picks, picks)
		})
	}
}

func TestMatchIgnoresCandidateOrder(t *testing.T) {
	t.Parallel()
	envs := []allocation.Environment{env(1, 3), env(2, -1), env(3, 1), env(4, 1), env(5, -1)}
	want, err := allocation.Match(envs, nil, []allocation.Requirement{req(), req(), req()})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 5, 3}, want)
	slices.Reverse(envs)
	got, err := allocation.Match(envs, nil, []allocation.Requirement{req(), req(), req()})
	require.NoError(t, err)
	require.Equal(t, want, got)
}

func TestMatchFailures(t *testing.T) {
	t.Parallel()
	inUse := func(e allocation.Environment) allocation.Environment { return withStatus(e, allocation.StatusInUse) }
	cases := []struct {
		name       string
		candidates []allocation.Environment
		all        []allocation.Environment
		reqs       []allocation.Requirement
		now        bool   // ErrUnsatisfiableNow, else never
		field      string // of the NeverSatisfiableError
		capability string
		competing  []int
		reason     string
	}{
		{
			name:       "all matching environments are in use",
			candidates: []allocation.Environment{env(2, 0)},
			all:        []allocation.Environment{inUse(env(1, 0, "gpu", "t4")), env(2, 0)},
			reqs:       []allocation.Requirement{req("gpu", "t4")},
			now:        true,
		},
		{
			name:       "dirty and cleaning environments will come back",
			candidates: nil,
			all:        []allocation.Environment{withStatus(env(1, 0), allocation.StatusDirty), withStatus(env(2, 0), allocation.StatusCleaning)},
			reqs:       []allocation.Requirement{req(), req()},
			now:        true,
		},
		{
			name:       "an available environment locked by someone else is not a candidate",
			candidates: []allocation.Environment{},
			all:        []allocation.Environment{env(1, 0)},
			reqs:       []allocation.Requirement{req()},
			now:        true,
		},
		{
			name:       "no environment has the capability",
			candidates: []allocation.Environment{env(1, 0)},
			all:        []allocation.Environment{env(1, 0, "region", "eu")},
			reqs:       []allocation.Requirement{req(), req("gpu", "a100")},
			field:      "requirements[1].capabilities.gpu",
			capability: "gpu",
			reason:     `no environment in the pool has capability "gpu"`,
		},
		{
			name:       "no environment has the value",
			all:        []allocation.Environment{env(1, 0, "gpu", "t4"), env(2, 0, "gpu", "v100")},
			reqs:       []allocation.Requirement{req("gpu", "a100")},
			field:      "requirements[0].capabilities.gpu",
			capability: "gpu",
			reason:     `no environment in the pool has gpu="a100" (offered: "t4", "v100")`,
		},
		{
			name:   "each capability exists but not together",
			all:    []allocation.Environment{env(1, 0, "gpu", "t4"), env(2, 0, "region", "eu")},
			reqs:   []allocation.Requirement{req("region", "eu", "gpu", "t4")},
			field:  "requirements[0].capabilities",
			reason: `no environment in the pool has all of gpu="t4", region="eu" together`,
		},
		{
			name:      "more environments than the pool has",
			all:       []allocation.Environment{env(1, 0), inUse(env(2, 0))},
			reqs:      []allocation.Requirement{req(), req(), req()},
			field:     "requirements",
			competing: []int{0, 1, 2},
			reason:    "the request needs 3 environments, but only 2 registered environments match it",
		},
		{
			name:      "ten wanted of four: all ten are named",
			all:       []allocation.Environment{env(1, 0), env(2, 0), env(3, 0), env(4, 0)},
			reqs:      []allocation.Requirement{req(), req(), req(), req(), req(), req(), req(), req(), req(), req()},
			field:     "requirements",
			competing: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
			reason:    "the request needs 10 environments, but only 4 registered environments match it",
		},
		{
			name:      "two requirements compete for one environment",
			all:       []allocation.Environment{env(1, 0, "gpu", "t4"), env(2, 0), env(3, 0)},
			reqs:      []allocation.Requirement{req(), req("gpu", "t4"), req("gpu", "t4")},
			field:     "requirements",
			competing: []int{1, 2},
			reason:    "requirements 1, 2 need 2 distinct environments, but only 1 registered environment matches any of them",
		},
		{
			name:       "deregistering environments do not come back",
			candidates: nil,
			all:        []allocation.Environment{withStatus(env(1, 0, "gpu", "t4"), allocation.StatusDeregistering), inUse(env(2, 0))},
			reqs:       []allocation.Requirement{req("gpu", "t4")},
			field:      "requirements[0].capabilities.gpu",
			capability: "gpu",
			reason:     `no environment in the pool has capability "gpu"`,
		},
		{
			name:   "an empty pool",
			reqs:   []allocation.Requirement{req()},
			field:  "pool",
			reason: "the pool has no registered environments",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			picks, err := allocation.Match(tc.candidates, tc.all, tc.reqs)
			require.Nil(t, picks)
			if tc.now {
				require.ErrorIs(t, err, allocation.ErrUnsatisfiableNow)
				require.NoError(t, allocation.Classify(tc.all, tc.reqs))
				return
			}
			require.ErrorIs(t, err, allocation.ErrNeverSatisfiable)
			require.NotErrorIs(t, err, allocation.ErrUnsatisfiableNow)
			var never *allocation.NeverSatisfiableError
			require.True(t, errors.As(err, &never))
			require.Equal(t, tc.field, never.Field)
			require.Equal(t, tc.reason, never.Reason)
			require.Equal(t, tc.capability, never.Capability)
			require.Equal(t, tc.competing, never.Competing)
			require.Equal(t, err, allocation.Classify(tc.all, tc.reqs))
		})
	}
}

func TestMatchNeedsARequirement(t *testing.T) {
	t.Parallel()
	_, err := allocation.Match([]allocation.Environment{env(1, 0)}, nil, nil)
	require.Error(t, err)
	require.NotErrorIs(t, err, allocation.ErrUnsatisfiableNow)
	require.NotErrorIs(t, err, allocation.ErrNeverSatisfiable)
}

func TestRequirementMatches(t *testing.T) {
	t.Parallel()
	e := env(1, 0, "region", "eu", "gpu", "t4")
	require.True(t, req().Matches(e))
	require.True(t, req("region", "eu").Matches(e))
	require.True(t, req("region", "eu", "gpu", "t4").Matches(e))
	require.False(t, req("region", "us").Matches(e))
	require.False(t, req("zone", "").Matches(e), "a missing key does not match an empty value")
	require.False(t, req("region", "eu", "ssd", "yes").Matches(e))
}

func TestCompare(t *testing.T) {
	t.Parallel()
	envs := []allocation.Environment{env(3, 2), env(2, -1), env(5, 1), env(1, 2), env(4, -1)}
	slices.SortFunc(envs, allocation.Compare)
	ids := make([]int64, len(envs))
	for i, e := range envs {
		ids[i] = e.ID
	}
	require.Equal(t, []int64{2, 4, 5, 1, 3}, ids)
}
