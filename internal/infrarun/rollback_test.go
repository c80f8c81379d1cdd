package infrarun_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/infrarun"
)

// A chain vpc <- rds <- ec2 in account prod, and dns in shared (prod
// depends on shared).
func rollbackChain(vpc, rds, ec2, dns string) []infrarun.State {
	return []infrarun.State{
		{ID: 1, CfgPath: "live/prod/vpc", Account: "prod", AccountDeps: []string{"shared"}, Status: vpc, NewResources: true},
		{ID: 2, CfgPath: "live/prod/rds", Account: "prod", AccountDeps: []string{"shared"}, CfgDeps: []string{"live/prod/vpc"}, Status: rds, NewResources: true},
		{ID: 3, CfgPath: "live/prod/ec2", Account: "prod", AccountDeps: []string{"shared"}, CfgDeps: []string{"live/prod/rds"}, Status: ec2},
		{ID: 4, CfgPath: "live/shared/dns", Account: "shared", Status: dns, NewResources: true},
	}
}

// rollbackOf is the rollback execution id of the state, as the service
// makes it: with the rolled-back execution's dependencies.
func rollbackOf(s infrarun.State, id int64, status string) infrarun.State {
	return infrarun.State{ID: id, CfgPath: s.CfgPath, Account: s.Account, CfgDeps: s.CfgDeps, AccountDeps: s.AccountDeps, Status: status, RollbackOf: s.ID}
}

func TestNext_rollback(t *testing.T) {
	t.Parallel()
	const (
		W = infrarun.Waiting
		R = infrarun.Running
		S = infrarun.Succeeded
		F = infrarun.Failed
		A = infrarun.Aborted
	)
	t.Run("a run that succeeded rolls nothing back", func(t *testing.T) {
		step := infrarun.Next(rollbackChain(S, S, S, S))
		require.True(t, step.Done)
		require.True(t, step.Succeeded)
		require.Empty(t, step.RollBack)
	})
	t.Run("nothing is rolled back while executions still run", func(t *testing.T) {
		step := infrarun.Next(rollbackChain(S, F, W, R))
		require.Equal(t, []int64{3}, step.Abort)
		require.False(t, step.Done)
		require.Empty(t, step.RollBack)
	})
	t.Run("a failed run rolls back every execution that recorded new provider resources", func(t *testing.T) {
		step := infrarun.Next(rollbackChain(S, S, F, S))
		require.False(t, step.Done, "the run is not over: its rollbacks are to be made")
		require.Equal(t, []int64{1, 2, 4}, step.RollBack, "ec2 recorded none")
		require.Empty(t, step.Start)
	})
	t.Run("rollbacks run in reverse dependency order", func(t *testing.T) {
		run := rollbackChain(S, S, F, S)
		states := append(run, rollbackOf(run[0], 11, W), rollbackOf(run[1], 12, W), rollbackOf(run[3], 14, W))
		step := infrarun.Next(states)
		require.Empty(t, step.RollBack, "made once")
		require.Equal(t, []int64{12}, step.Start, "rds first: vpc's waits for it, dns's for every prod rollback")
		require.False(t, step.Done)

		states[4].Status, states[5].Status = W, S
		step = infrarun.Next(states)
		require.Equal(t, []int64{11}, step.Start)
		states[4].Status = S
		step = infrarun.Next(states)
		require.Equal(t, []int64{14}, step.Start, "shared last: prod depended on it")
		states[6].Status = S
		step = infrarun.Next(states)
		require.True(t, step.Done)
		require.False(t, step.Succeeded, "a rolled-back run failed")
		require.Empty(t, step.Start)
	})
	t.Run("a failed rollback is held for an operator and holds what waits for it", func(t *testing.T) {
		run := rollbackChain(S, S, F, S)
		states := append(run, rollbackOf(run[0], 11, W), rollbackOf(run[1], 12, F), rollbackOf(run[3], 14, W))
		step := infrarun.Next(states)
		require.Equal(t, []int64{12}, step.Held)
		require.Empty(t, step.Start, "never retried on its own, and vpc's and dns's rollbacks wait")
		require.Empty(t, step.Abort)
		require.False(t, step.Done, "the run waits for the operator")

		states[5].Resolved = true
		step = infrarun.Next(states)
		require.Empty(t, step.Held)
		require.Equal(t, []int64{11}, step.Start, "marked resolved: the rollbacks after it go on")
	})
	t.Run("rollbacks of a unit deleted by the merge wait for the run's executions", func(t *testing.T) {
		deleted := infrarun.State{ID: 9, CfgPath: "live/prod/old", Account: "prod", Status: S}
		states := []infrarun.State{
			{ID: 1, CfgPath: "live/prod/vpc", Account: "prod", Status: R},
			rollbackOf(deleted, 10, W),
		}
		step := infrarun.Next(states)
		require.Empty(t, step.Start)
		require.False(t, step.Done)
		states[0].Status = S
		step = infrarun.Next(states)
		require.Equal(t, []int64{10}, step.Start)
		states[1].Status = S
		step = infrarun.Next(states)
		require.True(t, step.Done)
		require.True(t, step.Succeeded, "the merge applied and the deleted unit's resources are gone")
	})
	t.Run("rollbacks of one unit go newest first, one at a time", func(t *testing.T) {
		older := infrarun.State{ID: 5, CfgPath: "live/prod/old", Account: "prod"}
		newer := infrarun.State{ID: 8, CfgPath: "live/prod/old", Account: "prod"}
		states := []infrarun.State{rollbackOf(older, 20, W), rollbackOf(newer, 21, W)}
		require.Equal(t, []int64{21}, infrarun.Next(states).Start)
	})
	t.Run("rollbacks of deleted units whose runs ordered them differently go one at a time, newest first", func(t *testing.T) {
		// Run A had u2 read u1, a later run B u1 read u2; a merge deletes both.
		states := []infrarun.State{
			{ID: 11, CfgPath: "a/u1", Account: "a", Status: W, RollbackOf: 1},                            // run A
			{ID: 12, CfgPath: "a/u2", Account: "a", CfgDeps: []string{"a/u1"}, Status: W, RollbackOf: 2}, // run A
			{ID: 13, CfgPath: "a/u1", Account: "a", CfgDeps: []string{"a/u2"}, Status: W, RollbackOf: 3}, // run B
			{ID: 14, CfgPath: "a/u2", Account: "a", Status: W, RollbackOf: 4},                            // run B
		}
		require.True(t, infrarun.RollbacksInTurn(states))
		require.False(t, infrarun.RollbacksInTurn(states[:2]), "one run's order has no cycle")
		for _, want := range []int64{14, 13, 12, 11} {
			step := infrarun.Next(states)
			require.False(t, step.Done)
			require.Equal(t, []int64{want}, step.Start)
			states[slices.IndexFunc(states, func(s infrarun.State) bool { return s.ID == want })].Status = S
		}
		require.True(t, infrarun.Next(states).Done)
	})
	t.Run("an aborted or rejected execution also rolls the run back", func(t *testing.T) {
		step := infrarun.Next(rollbackChain(S, S, A, S))
		require.Equal(t, []int64{1, 2, 4}, step.RollBack)
	})
}

// Properties of a whole run with rollbacks, over random graphs and
// outcomes: no rollback is made or started before every other execution
// has ended; each execution with new provider resources of a failed run
// is rolled back exactly once; a rollback starts only once the rollbacks
// of everything that waited on the execution it rolls back have ended; a
// failed rollback holds the run until it is resolved; and the run ends.
func TestNext_rollbackProperties(t *testing.T) {
	t.Parallel()
	rolled := 0
	for seed := range uint64(300) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		accs := []infrarun.Account{{Name: "a", Path: "a"}, {Name: "b", Path: "b", DependsOn: []string{"a"}}}
		n := 1 + rnd.IntN(10)
		units := make([]infrarun.Unit, n)
		for i := range units {
			units[i].Path = accs[rnd.IntN(2)].Name + "/" + string(rune('A'+i))
			for j := 0; j < i; j++ {
				if rnd.IntN(3) == 0 {
					units[i].Deps = append(units[i].Deps, units[j].Path)
				}
			}
		}
		specs, err := infrarun.Plan(1, "abcd", units, accs, rnd)
		if err != nil {
			continue
		}
		var states []infrarun.State
		for i, sp := range specs {
			states = append(states, infrarun.State{ID: int64(i + 1), CfgPath: sp.CfgPath, Account: sp.Account, CfgDeps: sp.CfgDeps, AccountDeps: sp.AccountDeps, Status: infrarun.Waiting})
		}
		forward := len(states)
		fails := map[int64]bool{}
		for i := range states {
			fails[states[i].ID] = rnd.IntN(4) == 0
		}
		// waitedOnBy: the forward executions that waited on x.
		waitedOnBy := func(x infrarun.State) []int64 {
			var out []int64
			for _, o := range states[:forward] {
				if o.ID != x.ID && (slices.Contains(o.CfgDeps, x.CfgPath) || (o.Account != x.Account && slices.Contains(o.AccountDeps, x.Account))) {
					out = append(out, o.ID)
				}
			}
			return out
		}
		idx := func(id int64) int { return slices.IndexFunc(states, func(s infrarun.State) bool { return s.ID == id }) }
		rollbackOfID := func(of int64) int {
			return slices.IndexFunc(states, func(s infrarun.State) bool { return s.RollbackOf == of })
		}
		ended := func(s infrarun.State) bool {
			return s.Status == infrarun.Succeeded || s.Status == infrarun.Aborted || (s.Status == infrarun.Failed && (s.RollbackOf == 0 || s.Resolved))
		}
		var running []int
		for round := 0; ; round++ {
			require.Less(t, round, 200, "seed %d: the run never ends", seed)
			step := infrarun.Next(states)
			for _, id := range step.Abort {
				states[idx(id)].Status = infrarun.Aborted
			}
			forwardOver := !slices.ContainsFunc(states[:forward], func(s infrarun.State) bool {
				return s.Status == infrarun.Waiting || s.Status == infrarun.Running
			})
			for _, id := range step.RollBack {
				require.True(t, forwardOver, "seed %d: a rollback made while executions run", seed)
				x := states[idx(id)]
				require.True(t, x.NewResources, "seed %d", seed)
				require.Equal(t, -1, rollbackOfID(id), "seed %d: %s rolled back twice", seed, x.CfgPath)
				states = append(states, infrarun.State{ID: int64(len(states) + 1), CfgPath: x.CfgPath, Account: x.Account,
					CfgDeps: x.CfgDeps, AccountDeps: x.AccountDeps, Status: infrarun.Waiting, RollbackOf: id})
				rolled++
			}
			for _, id := range step.Start {
				i := idx(id)
				if r := states[i]; r.RollbackOf != 0 {
					require.True(t, forwardOver, "seed %d", seed)
					for _, w := range waitedOnBy(states[idx(r.RollbackOf)]) {
						if j := rollbackOfID(w); j >= 0 {
							require.True(t, ended(states[j]), "seed %d: the rollback of %s started before that of %s, which depended on it", seed, r.CfgPath, states[j].CfgPath)
						}
					}
				}
				states[i].Status = infrarun.Running
				running = append(running, i)
			}
			for _, i := range step.Held {
				j := idx(i)
				require.Equal(t, infrarun.Failed, states[j].Status)
				states[j].Resolved = true // the operator resolves it
			}
			if step.Done {
				for _, s := range states[:forward] {
					if s.NewResources && slices.ContainsFunc(states[:forward], func(o infrarun.State) bool { return o.Status != infrarun.Succeeded }) {
						require.GreaterOrEqual(t, rollbackOfID(s.ID), 0, "seed %d: %s of a failed run not rolled back", seed, s.CfgPath)
					}
				}
				break
			}
			if len(running) == 0 && len(step.Start) == 0 && len(step.RollBack) == 0 && len(step.Held) == 0 && len(step.Abort) == 0 {
				t.Fatalf("seed %d: the run is stuck", seed)
			}
			// One running execution ends, in random order.
			if len(running) > 0 {
				k := rnd.IntN(len(running))
				i := running[k]
				running = slices.Delete(running, k, k+1)
				s := &states[i]
				switch {
				case s.RollbackOf != 0 && rnd.IntN(4) == 0:
					s.Status = infrarun.Failed
				case s.RollbackOf == 0 && fails[s.ID]:
					s.Status = infrarun.Failed
				default:
					s.Status = infrarun.Succeeded
					s.NewResources = s.RollbackOf == 0 && rnd.IntN(2) == 0
				}
			}
		}
	}
	require.Greater(t, rolled, 50, "the random runs rolled back something")
}

// Properties of the rollbacks of units a merge deleted, several of one
// unit, from earlier runs that each ordered the units its own way (random
// dependencies; in half the cases each run in a random direction): the
// rollbacks of one unit go newest first; when the runs agree (one
// direction for all), a rollback starts only after
// the rollbacks of the units that depended on its unit have ended; and
// the run always ends, failed rollbacks resolved by an operator.
func TestNext_rollbacksOfSeveralRunsProperties(t *testing.T) {
	t.Parallel()
	cycles := 0
	for seed := range uint64(500) {
		rnd := rand.New(rand.NewPCG(seed, 11))
		paths := []string{"a/u1", "a/u2", "a/u3", "b/u4"}
		var states []infrarun.State
		agree := rnd.IntN(2) == 0
		order := rnd.Perm(len(paths)) // the dependency direction of the first run
		for run := range 2 + rnd.IntN(3) {
			if !agree && run > 0 {
				order = rnd.Perm(len(paths))
			}
			// The run's units: a random subset; each may read those before it in order.
			var in []string
			for _, k := range order {
				if rnd.IntN(3) > 0 {
					in = append(in, paths[k])
				}
			}
			for i, p := range in {
				var deps []string
				for _, q := range in[:i] {
					if rnd.IntN(2) == 0 {
						deps = append(deps, q)
					}
				}
				id := int64(len(states) + 1)
				states = append(states, infrarun.State{ID: 100 + id, CfgPath: p, Account: p[:1], CfgDeps: deps, Status: infrarun.Waiting, RollbackOf: id})
			}
		}
		if len(states) == 0 {
			continue
		}
		// dependedOn: o's unit depended on r's in o's run.
		dependedOn := func(r, o infrarun.State) bool { return o.CfgPath != r.CfgPath && slices.Contains(o.CfgDeps, r.CfgPath) }
		ended := func(s infrarun.State) bool {
			return s.Status == infrarun.Succeeded || (s.Status == infrarun.Failed && s.Resolved)
		}
		if !agree {
			cycles++
		}
		for round := 0; ; round++ {
			require.Less(t, round, 100, "seed %d: the run never ends", seed)
			step := infrarun.Next(states)
			if step.Done {
				for _, s := range states {
					require.True(t, ended(s), "seed %d: done with %d %s", seed, s.ID, s.Status)
				}
				break
			}
			require.True(t, len(step.Start) > 0 || len(step.Held) > 0, "seed %d: stuck: nothing starts, nothing is held (%+v)", seed, states)
			for _, id := range step.Held {
				states[slices.IndexFunc(states, func(s infrarun.State) bool { return s.ID == id })].Resolved = true
			}
			for _, id := range step.Start {
				r := states[slices.IndexFunc(states, func(s infrarun.State) bool { return s.ID == id })]
				for _, o := range states {
					if o.CfgPath == r.CfgPath && o.RollbackOf > r.RollbackOf {
						require.True(t, ended(o), "seed %d: an older rollback of %s started before a newer one ended", seed, r.CfgPath)
					}
					if agree && dependedOn(r, o) {
						require.True(t, ended(o), "seed %d: the rollback of %s started before that of %s, which depended on it", seed, r.CfgPath, o.CfgPath)
					}
				}
			}
			// What started ends now, one in four failing (then resolved).
			for _, id := range step.Start {
				s := &states[slices.IndexFunc(states, func(s infrarun.State) bool { return s.ID == id })]
				s.Status = infrarun.Succeeded
				if rnd.IntN(4) == 0 {
					s.Status = infrarun.Failed
				}
			}
		}
	}
	require.Greater(t, cycles, 100, "the random runs disagreed often")
}
