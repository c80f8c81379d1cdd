package infrarun

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func rippleRun() []State {
	return []State{
		{ID: 1, CfgPath: "live/shared/dns", Account: "shared", Status: Succeeded},
		{ID: 2, CfgPath: "live/prod/vpc", Account: "prod", AccountDeps: []string{"shared"}, Status: Succeeded},
		{ID: 3, CfgPath: "live/prod/mq", Account: "prod", AccountDeps: []string{"shared"}, Status: Waiting},
	}
}

var rippleAccounts = []Account{
	{Name: "shared", Path: "live/shared"},
	{Name: "prod", Path: "live/prod", DependsOn: []string{"shared"}},
}

func TestRippleAddsReadersWaitingForTheSource(t *testing.T) {
	readers := []Unit{
		{Path: "live/prod/rds", Deps: []string{"live/prod/vpc"}},
		{Path: "live/prod/app", Deps: []string{"live/prod/mq", "live/prod/rds", "live/prod/vpc"}},
		{Path: "live/prod/mq", Deps: []string{"live/prod/vpc"}}, // already in the run
	}
	specs, orphans, err := Ripple(7, "abcdef", "live/prod/vpc", readers, rippleRun(), []string{"run-7-abcd-prod-rds-001"}, rippleAccounts, rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	require.Empty(t, orphans)
	require.Len(t, specs, 2)
	rds, app := specs[0], specs[1]
	require.Equal(t, "live/prod/rds", rds.CfgPath)
	require.Equal(t, []string{"live/prod/vpc"}, rds.CfgDeps)
	require.Equal(t, "prod", rds.Account)
	require.Equal(t, []string{"shared"}, rds.AccountDeps)
	require.Regexp(t, `^run-7-abcd-prod-rds-\d{3}$`, rds.ExecutionID)
	require.NotEqual(t, "run-7-abcd-prod-rds-001", rds.ExecutionID, "ids are unique within the run")
	// app also waits for mq (in the run) and rds (added with it); vpc it
	// waits for through rds.
	require.Equal(t, []string{"live/prod/mq", "live/prod/rds"}, app.CfgDeps)

	// Once added, the engine starts rds (vpc succeeded) and holds app and
	// the run: it is not over while a ripple waits.
	states := rippleRun()
	for i, s := range specs {
		states = append(states, State{ID: int64(10 + i), CfgPath: s.CfgPath, Account: s.Account, CfgDeps: s.CfgDeps, AccountDeps: s.AccountDeps, Status: Waiting})
	}
	step := Next(states)
	require.ElementsMatch(t, []int64{3, 10}, step.Start)
	require.False(t, step.Done)
}

func TestRippleNothingToAdd(t *testing.T) {
	specs, _, err := Ripple(7, "abcdef", "live/prod/vpc", []Unit{{Path: "live/prod/mq"}}, rippleRun(), nil, rippleAccounts, rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	require.Empty(t, specs)
	specs, _, err = Ripple(7, "abcdef", "live/prod/vpc", nil, rippleRun(), nil, rippleAccounts, rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	require.Empty(t, specs)
}

func TestRippleErrors(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 1))
	_, _, err := Ripple(7, "abcdef", "live/prod/nope", nil, rippleRun(), nil, rippleAccounts, rnd)
	require.ErrorContains(t, err, "live/prod/nope is not a unit of the run")

	// A reader under no account cannot be placed; the others still are.
	specs, orphans, err := Ripple(7, "abcdef", "live/prod/vpc",
		[]Unit{{Path: "live/dev/app", Deps: []string{"live/prod/vpc"}}, {Path: "live/prod/rds", Deps: []string{"live/prod/vpc"}}}, rippleRun(), nil, rippleAccounts, rnd)
	require.NoError(t, err)
	require.Equal(t, []string{"live/dev/app"}, orphans)
	require.Len(t, specs, 1)
	require.Equal(t, "live/prod/rds", specs[0].CfgPath)

	// A reader that also reads the orphan waits only for what is in the
	// run: the orphan has no execution to wait for.
	specs, orphans, err = Ripple(7, "abcdef", "live/prod/vpc",
		[]Unit{{Path: "live/dev/app", Deps: []string{"live/prod/vpc"}}, {Path: "live/prod/web", Deps: []string{"live/dev/app", "live/prod/vpc"}}}, rippleRun(), nil, rippleAccounts, rnd)
	require.NoError(t, err)
	require.Equal(t, []string{"live/dev/app"}, orphans)
	require.Len(t, specs, 1)
	require.Equal(t, []string{"live/prod/vpc"}, specs[0].CfgDeps)

	// A reader in shared (which prod depends on) reading a prod unit:
	// prod's waiting mq would wait for it, and it for mq.
	_, _, err = Ripple(7, "abcdef", "live/prod/vpc", []Unit{{Path: "live/shared/peer", Deps: []string{"live/prod/mq", "live/prod/vpc"}}}, rippleRun(), nil, rippleAccounts, rnd)
	require.ErrorContains(t, err, "adding live/shared/peer would make units wait on each other forever")

	// The same reader waiting only for vpc, which succeeded: no cycle.
	specs, _, err = Ripple(7, "abcdef", "live/prod/vpc", []Unit{{Path: "live/shared/peer", Deps: []string{"live/prod/vpc"}}}, rippleRun(), nil, rippleAccounts, rnd)
	require.NoError(t, err)
	require.Len(t, specs, 1)
}

// TestRewait: web (in the run, waiting) reads mq through cache, which is
// outside the run; vpc's ripple adds cache, so web must now wait for it.
func TestRewait(t *testing.T) {
	run := append(rippleRun(), State{ID: 4, CfgPath: "live/prod/web", Account: "prod", CfgDeps: []string{"live/prod/vpc"}, AccountDeps: []string{"shared"}, Status: Waiting})
	added := []Spec{{CfgPath: "live/prod/cache", CfgDeps: []string{"live/prod/vpc"}, Account: "prod", AccountDeps: []string{"shared"}}}
	below := map[string][]string{"live/prod/cache": {"live/prod/web", "live/prod/vpc-peer"}}
	deps, err := Rewait(run, added, below)
	require.NoError(t, err)
	require.Equal(t, map[int64][]string{4: {"live/prod/cache", "live/prod/vpc"}}, deps)

	// Once it waits for cache, the engine holds web until cache is done.
	run[3].CfgDeps = deps[4]
	states := append(run, State{ID: 10, CfgPath: "live/prod/cache", Account: "prod", CfgDeps: added[0].CfgDeps, AccountDeps: added[0].AccountDeps, Status: Waiting})
	require.ElementsMatch(t, []int64{3, 10}, Next(states).Start)

	// Nothing below: nothing changes.
	deps, err = Rewait(run, added, nil)
	require.NoError(t, err)
	require.Empty(t, deps)

	// A shared unit below a prod ripple, while prod waits for shared.
	run = append(rippleRun(), State{ID: 4, CfgPath: "live/shared/peer", Account: "shared", Status: Waiting})
	_, err = Rewait(run, added, map[string][]string{"live/prod/cache": {"live/shared/peer"}})
	require.ErrorContains(t, err, "would make units wait on each other forever")
}
