package infrarun_test

import (
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
	t.Run("an aborted or rejected execution also rolls the run back", func(t *testing.T) {
		step := infrarun.Next(rollbackChain(S, S, A, S))
		require.Equal(t, []int64{1, 2, 4}, step.RollBack)
	})
}
