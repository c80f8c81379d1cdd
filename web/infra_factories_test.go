package web_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/models"
)

// Rows of the infrastructure area written as the workers write them, for
// page tests that need a run in a given state without running one.

// insertRun stores run 3 of repository "live" (registered by the caller)
// with status.
func (b *bundle) insertRun(t *testing.T, status string) *models.Run {
	t.Helper()
	run := &models.Run{Repository: "live", PRNumber: 3, PRTitle: "Bigger", BaseRef: "main", HeadRef: "bigger", HeadSHA: "a1b2c3d4e5",
		MergeCommit: "f00dfeed00", Scan: "graph", Status: status}
	require.NoError(t, models.InsertRun(t.Context(), b.db.Bun, run))
	return run
}

// newExecution is an execution of run for unit live/prod/<unit>, voted on
// by ada, at status and step; the caller sets the rest and stores it.
func newExecution(run *models.Run, id, unit, status, step string) *models.Execution {
	return &models.Execution{ExecutionID: id, RunID: run.ID, CfgPath: "live/prod/" + unit, CfgDeps: []string{}, AccountName: "prod",
		AccountPath: "live/prod/", AccountDeps: []string{}, InitCommand: []string{}, PlanCommand: []string{"terraform", "plan"},
		ApplyCommand: []string{"terraform", "apply"}, Voters: []string{ada}, MinApprovalCount: 1, MinRejectionCount: 1,
		Status: status, Step: step}
}
