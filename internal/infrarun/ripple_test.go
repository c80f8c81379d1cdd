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
	specs, err := Ripple(7, "abcdef", "live/prod/vpc", readers, rippleRun(), []string{"run-7-abcd-prod-rds-001"}, rippleAccounts, rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
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
	specs, err := Ripple(7, "abcdef", "live/prod/vpc", []Unit{{Path: "live/prod/mq"}}, rippleRun(), nil, rippleAccounts, rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	require.Empty(t, specs)
	specs, err = Ripple(7, "abcdef", "live/prod/vpc", nil, rippleRun(), nil, rippleAccounts, rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	require.Empty(t, specs)
}

func TestRippleErrors(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 1))
	_, err := Ripple(7, "abcdef", "live/prod/nope", nil, rippleRun(), nil, rippleAccounts, rnd)
	require.ErrorContains(t, err, "live/prod/nope is not a unit of the run")
	_, err = Ripple(7, "abcdef", "live/prod/vpc", []Unit{{Path: "live/dev/app", Deps: []string{"live/prod/vpc"}}}, rippleRun(), nil, rippleAccounts, rnd)
	require.ErrorContains(t, err, "no account's path contains live/dev/app")

	// A reader in shared (which prod depends on) reading a prod unit:
	// prod's waiting mq would wait for it, and it for mq.
	_, err = Ripple(7, "abcdef", "live/prod/vpc", []Unit{{Path: "live/shared/peer", Deps: []string{"live/prod/mq", "live/prod/vpc"}}}, rippleRun(), nil, rippleAccounts, rnd)
	require.ErrorContains(t, err, "adding live/shared/peer would make units wait on each other forever")

	// The same reader waiting only for vpc, which succeeded: no cycle.
	specs, err := Ripple(7, "abcdef", "live/prod/vpc", []Unit{{Path: "live/shared/peer", Deps: []string{"live/prod/vpc"}}}, rippleRun(), nil, rippleAccounts, rnd)
	require.NoError(t, err)
	require.Len(t, specs, 1)
}
