package web_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/models"
)

// TestRipplePagesAndAPI: a run whose vpc apply changed its id output and
// brought in rds (changes, voting) and app (checked, no changes). The run
// page lists the ripple and marks both executions with their reason; the
// rds page says why it was added; the run and execution JSON carry the
// reason and what vpc's apply changed (names only).
func TestRipplePagesAndAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	viewer := b.user(t, vera, models.RoleViewer)
	br := b.browser(t)
	br.login(t, vera)
	ctx := t.Context()
	db := b.db.Bun
	b.syncRepositories(t, "live")

	run := b.insertRun(t, models.RunRunning)
	yes, no := true, false
	vpc := newExecution(run, "run-3-f00d-prod-vpc-001", "vpc", models.ExecSucceeded, models.StepApplying)
	vpc.HasChanges = &yes
	rds := newExecution(run, "run-3-f00d-prod-rds-002", "rds", models.ExecRunning, models.StepVoting)
	rds.HasChanges, rds.CfgDeps = &yes, []string{"live/prod/vpc"}
	app := newExecution(run, "run-3-f00d-prod-app-003", "app", models.ExecSucceeded, models.StepPlanning)
	app.HasChanges, app.CfgDeps = &no, []string{"live/prod/vpc"}
	require.NoError(t, models.InsertExecutions(ctx, db, []*models.Execution{vpc, rds, app}))
	require.NoError(t, models.RecordOutputChanges(ctx, db, &models.OutputChanges{ExecutionID: vpc.ID, Outputs: []string{"id"}, Readers: []string{"live/prod/app", "live/prod/rds"}}))
	require.NoError(t, models.InsertRipples(ctx, db, []*models.Ripple{
		{ExecutionID: rds.ID, SourceID: vpc.ID, SourceUnit: "live/prod/vpc", Outputs: []string{"id"}},
		{ExecutionID: app.ID, SourceID: vpc.ID, SourceUnit: "live/prod/vpc", Outputs: []string{"id"}},
	}))
	reason := "added because live/prod/vpc&#39;s outputs id changed"

	_, page, _ := br.get(t, fmt.Sprintf("/infra/runs/%d", run.ID))
	ripples := section(t, page, "run-ripples")
	require.Contains(t, ripples, `href="/infra/executions/run-3-f00d-prod-vpc-001"`)
	require.Regexp(t, `data-testid="ripple-changed">.*\n?.*run-3-f00d-prod-rds-002`, ripples)
	require.Regexp(t, `data-testid="ripple-checked">.*\n?.*run-3-f00d-prod-app-003`, ripples)
	table := section(t, page, "run-graph")
	require.Contains(t, table, reason)
	require.Contains(t, table, "checked · no changes")

	_, page, _ = br.get(t, "/infra/executions/run-3-f00d-prod-rds-002")
	require.Contains(t, section(t, page, "ripple-reason"), "Added because live/prod/vpc&#39;s outputs id changed")
	_, page, _ = br.get(t, "/infra/executions/run-3-f00d-prod-vpc-001")
	require.NotContains(t, page, `data-testid="ripple-reason"`)

	read := b.token(t, viewer, auth.ScopeRead)
	res, body := b.call(t, http.MethodGet, fmt.Sprintf("/api/v1/infra/runs/%d", run.ID), read, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	xs := body["executions"].([]any)
	require.Len(t, xs, 3)
	byUnit := map[string]map[string]any{}
	for _, x := range xs {
		byUnit[x.(map[string]any)["cfg_path"].(string)] = x.(map[string]any)
	}
	require.Equal(t, map[string]any{"source": "live/prod/vpc", "source_execution": "run-3-f00d-prod-vpc-001", "outputs": []any{"id"},
		"reason": "added because live/prod/vpc's outputs id changed"}, byUnit["live/prod/rds"]["ripple"])
	require.Equal(t, map[string]any{"outputs": []any{"id"}, "readers": []any{"live/prod/app", "live/prod/rds"}}, byUnit["live/prod/vpc"]["outputs_changed"])
	require.NotContains(t, byUnit["live/prod/vpc"], "ripple")

	res, body = b.call(t, http.MethodGet, "/api/v1/infra/executions/run-3-f00d-prod-app-003", read, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "live/prod/vpc", body["ripple"].(map[string]any)["source"])
}
