package infrarun_test

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/infrarun"
)

var accounts = []infrarun.Account{
	{Name: "shared", Path: "live/shared"},
	{Name: "prod", Path: "live/prod", DependsOn: []string{"shared"}},
	{Name: "production", Path: "live/production"},
}

func TestPlan(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 2))
	units := []infrarun.Unit{
		{Path: "live/prod/vpc"},
		{Path: "live/prod/rds", Deps: []string{"live/prod/vpc", "live/prod/kms"}}, // kms is not collected
		{Path: "live/shared/dns"},
		{Path: "live/production/app", Deps: []string{"live/production/app"}}, // itself: ignored
	}
	specs, err := infrarun.Plan(7, "c8c5f6afc7345bd21cd79acaf740dc18b60755e3", units, accounts, rnd)
	require.NoError(t, err)
	require.Len(t, specs, 4)
	byPath := map[string]infrarun.Spec{}
	for _, s := range specs {
		byPath[s.CfgPath] = s
	}
	rds := byPath["live/prod/rds"]
	require.Equal(t, []string{"live/prod/vpc"}, rds.CfgDeps, "cfg_deps hold collected units only")
	require.Equal(t, "prod", rds.Account)
	require.Equal(t, "live/prod", rds.AccountPath)
	require.Equal(t, []string{"shared"}, rds.AccountDeps)
	require.Regexp(t, regexp.MustCompile(`^run-7-c8c5-prod-rds-\d{3}$`), rds.ExecutionID, "the seed's execution_id format")
	require.Equal(t, "production", byPath["live/production/app"].Account, "whole directories: live/prod does not contain live/production")
	require.Empty(t, byPath["live/production/app"].CfgDeps)

	t.Run("a unit under no account", func(t *testing.T) {
		_, err := infrarun.Plan(1, "abcd", []infrarun.Unit{{Path: "live/dev/x"}, {Path: "other/y"}}, accounts, rnd)
		require.ErrorContains(t, err, "no account's path contains live/dev/x, other/y")
	})
	t.Run("directory and account dependencies that wait on each other", func(t *testing.T) {
		// prod waits for every shared execution; a shared unit depending on
		// a prod unit can never start.
		_, err := infrarun.Plan(1, "abcd", []infrarun.Unit{
			{Path: "live/prod/vpc"},
			{Path: "live/shared/dns", Deps: []string{"live/prod/vpc"}},
		}, accounts, rnd)
		require.ErrorContains(t, err, "would wait on each other forever")
		require.ErrorContains(t, err, "live/prod/vpc")
	})
	t.Run("a long leaf keeps the id's shape", func(t *testing.T) {
		require.Equal(t, "run-12-ab-prod-x-005", infrarun.ExecutionID(12, "ab", "prod", "live/prod/x", 5))
		require.Equal(t, "run-12-abcd-prod-x-999", infrarun.ExecutionID(12, "abcdef", "prod", "live/prod/x", 1999))
	})
}

func TestNext(t *testing.T) {
	t.Parallel()
	st := func(id int64, path, account, status string, deps ...string) infrarun.State {
		return infrarun.State{ID: id, CfgPath: path, Account: account, CfgDeps: deps, Status: status}
	}
	withAccountDeps := func(s infrarun.State, deps ...string) infrarun.State { s.AccountDeps = deps; return s }

	tests := []struct {
		name   string
		states []infrarun.State
		want   infrarun.Step
	}{
		{
			name: "everything without dependencies starts at once",
			states: []infrarun.State{
				st(1, "a", "x", infrarun.Waiting), st(2, "b", "x", infrarun.Waiting), st(3, "c", "x", infrarun.Waiting, "a"),
			},
			want: infrarun.Step{Start: []int64{1, 2}},
		},
		{
			name: "a dependency still running holds its dependents",
			states: []infrarun.State{
				st(1, "a", "x", infrarun.Running), st(2, "b", "x", infrarun.Waiting, "a"),
			},
			want: infrarun.Step{},
		},
		{
			name: "an account dependency waits for every execution of that account",
			states: []infrarun.State{
				st(1, "s1", "shared", infrarun.Succeeded), st(2, "s2", "shared", infrarun.Running),
				withAccountDeps(st(3, "p1", "prod", infrarun.Waiting), "shared"),
			},
			want: infrarun.Step{},
		},
		{
			name: "a failure aborts every execution below it, however far",
			states: []infrarun.State{
				st(1, "a", "x", infrarun.Failed), st(2, "b", "x", infrarun.Waiting, "a"), st(3, "c", "x", infrarun.Waiting, "b"),
				st(4, "d", "x", infrarun.Waiting),
			},
			want: infrarun.Step{Abort: []int64{2, 3}, Start: []int64{4}},
		},
		{
			name: "done and succeeded",
			states: []infrarun.State{
				st(1, "a", "x", infrarun.Succeeded), st(2, "b", "x", infrarun.Succeeded, "a"),
			},
			want: infrarun.Step{Done: true, Succeeded: true},
		},
		{
			name: "done, not succeeded",
			states: []infrarun.State{
				st(1, "a", "x", infrarun.Failed), st(2, "b", "x", infrarun.Waiting, "a"),
			},
			want: infrarun.Step{Abort: []int64{2}, Done: true},
		},
		{
			name:   "a run without executions is done",
			states: nil,
			want:   infrarun.Step{Done: true, Succeeded: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, infrarun.Next(tt.states))
		})
	}
}

// TestNext_properties drives random runs to the end with random outcomes
// and checks the invariants: an execution never starts before every
// execution it depends on (by directory and by account) succeeded; an
// execution is aborted exactly when something it depends on, however far
// up, failed; the run ends, and succeeds only when every execution did.
func TestNext_properties(t *testing.T) {
	t.Parallel()
	ran := 0
	for seed := range uint64(300) {
		rnd := rand.New(rand.NewPCG(seed, 99))
		accs := []infrarun.Account{{Name: "a", Path: "a"}, {Name: "b", Path: "b"}, {Name: "c", Path: "c"}}
		if rnd.IntN(2) == 0 {
			accs[2].DependsOn = []string{"a"}
		}
		n := 1 + rnd.IntN(12)
		units := make([]infrarun.Unit, n)
		for i := range units {
			units[i].Path = accs[rnd.IntN(3)].Name + "/" + string(rune('A'+i))
			// Directory dependencies on earlier units only: no cycle among
			// them, though account dependencies may still close one.
			for j := 0; j < i; j++ {
				if rnd.IntN(4) == 0 {
					units[i].Deps = append(units[i].Deps, units[j].Path)
				}
			}
		}
		specs, err := infrarun.Plan(1, "abcd", units, accs, rnd)
		if err != nil {
			require.ErrorContains(t, err, "would wait on each other forever", "seed %d", seed)
			continue
		}
		ran++
		states := make([]infrarun.State, len(specs))
		for i, sp := range specs {
			states[i] = infrarun.State{ID: int64(i + 1), CfgPath: sp.CfgPath, Account: sp.Account, CfgDeps: sp.CfgDeps, AccountDeps: sp.AccountDeps, Status: infrarun.Waiting}
		}
		fails := map[int64]bool{}
		for i := range states {
			fails[states[i].ID] = rnd.IntN(5) == 0
		}
		waitsOn := func(s infrarun.State) []int64 {
			var out []int64
			for _, o := range states {
				if o.ID != s.ID && (slices.Contains(s.CfgDeps, o.CfgPath) || (slices.Contains(s.AccountDeps, o.Account) && o.Account != s.Account)) {
					out = append(out, o.ID)
				}
			}
			return out
		}
		byID := func(id int64) *infrarun.State { return &states[id-1] }
		var running []int64
		for round := 0; ; round++ {
			require.Less(t, round, 100, "seed %d: the run never ends", seed)
			step := infrarun.Next(states)
			for _, id := range step.Abort {
				require.Equal(t, infrarun.Waiting, byID(id).Status)
				byID(id).Status = infrarun.Aborted
			}
			for _, id := range step.Start {
				s := byID(id)
				require.Equal(t, infrarun.Waiting, s.Status, "seed %d", seed)
				for _, d := range waitsOn(*s) {
					require.Equal(t, infrarun.Succeeded, byID(d).Status, "seed %d: %s started before %s succeeded", seed, s.CfgPath, byID(d).CfgPath)
				}
				s.Status = infrarun.Running
				running = append(running, id)
			}
			if step.Done {
				require.Empty(t, running)
				all := true
				for _, s := range states {
					require.Contains(t, []string{infrarun.Succeeded, infrarun.Failed, infrarun.Aborted}, s.Status, "seed %d", seed)
					all = all && s.Status == infrarun.Succeeded
				}
				require.Equal(t, all, step.Succeeded, "seed %d", seed)
				break
			}
			if len(running) == 0 {
				continue
			}
			// One running execution finishes, picked at random.
			k := rnd.IntN(len(running))
			id := running[k]
			running = slices.Delete(running, k, k+1)
			if fails[id] {
				byID(id).Status = infrarun.Failed
			} else {
				byID(id).Status = infrarun.Succeeded
			}
		}
		// Aborted exactly below a failure.
		var failedAbove func(s infrarun.State) bool
		failedAbove = func(s infrarun.State) bool {
			for _, d := range waitsOn(s) {
				if st := byID(d).Status; st == infrarun.Failed || (st == infrarun.Aborted && failedAbove(*byID(d))) {
					return true
				}
			}
			return false
		}
		for _, s := range states {
			require.Equal(t, s.Status == infrarun.Aborted, failedAbove(s), "seed %d: %s", seed, s.CfgPath)
		}
	}
	require.Greater(t, ran, 200, "most random runs have no cycle and are played to the end")
}

// TestPlan_executionIDsAreUniqueInARun: the same leaf name in many regions
// of one account (executions.execution_id is unique in the database).
func TestPlan_executionIDsAreUniqueInARun(t *testing.T) {
	t.Parallel()
	var units []infrarun.Unit
	for _, region := range []string{"us-east-1", "us-west-2", "eu-west-1", "eu-central-1"} {
		for env := range 50 {
			units = append(units, infrarun.Unit{Path: fmt.Sprintf("live/prod/%s/env%d/vpc", region, env)})
		}
	}
	for seed := range uint64(50) {
		specs, err := infrarun.Plan(7, "c8c5f6af", units, accounts, rand.New(rand.NewPCG(seed, 1)))
		require.NoError(t, err)
		seen := map[string]bool{}
		for _, s := range specs {
			require.False(t, seen[s.ExecutionID], "seed %d: %s twice", seed, s.ExecutionID)
			seen[s.ExecutionID] = true
			require.Regexp(t, `^run-7-c8c5-prod-vpc-\d{3}$`, s.ExecutionID)
		}
	}
}
