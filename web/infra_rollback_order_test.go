package web

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/models"
)

// A rollback page's "Waits for" follows the engine: rollbacks of deleted
// units whose runs ordered them differently go one at a time, newest
// first, and the page says so; one run's rollbacks keep the dependency
// order.
func TestInfraExecutionDeps_rollbacksInTurn(t *testing.T) {
	rollback := func(id, of int64, path string, deps ...string) models.Execution {
		return models.Execution{ID: id, ExecutionID: "rollback-" + path, CfgPath: path, AccountName: "a", CfgDeps: deps,
			RollbackOf: &of, Status: models.ExecWaiting}
	}
	xs := []models.Execution{
		rollback(11, 1, "a/u1"), rollback(12, 2, "a/u2", "a/u1"), // run A: u2 read u1
		rollback(13, 3, "a/u1", "a/u2"), rollback(14, 4, "a/u2"), // run B: u1 read u2
	}
	deps := infraExecutionDeps(&xs[1], xs)
	require.Len(t, deps, 2)
	require.Equal(t, "a/u1", deps[0].Path)
	require.Equal(t, "a/u2", deps[1].Path)
	require.Contains(t, deps[0].Why, "one at a time, newest first")
	require.Empty(t, infraExecutionDeps(&xs[3], xs), "the newest goes first")

	deps = infraExecutionDeps(&xs[0], xs[:2])
	require.Len(t, deps, 1)
	require.Equal(t, "its rollback goes first: it depended on this unit", deps[0].Why)
}
