package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/models"
)

// TestRollbackPages: a run that failed and whose rollback of vpc failed
// shows a Rollback section on its page (what each rollback targets, from
// which commit, what is left, that it waits for an operator); the
// rollback's page is marked as one; the rolled-back execution's page lists
// the new provider resources its apply recorded with a link to their
// rollback. Operators get retry / mark resolved, others only the note and
// their posts are refused; marking it resolved is logged with who and the
// run ends.
func TestRollbackPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, vera, models.RoleViewer)
	b.user(t, olivia, models.RoleOperator)
	ctx := t.Context()
	db := b.db.Bun
	b.syncRepositories(t, "live")

	run := b.insertRun(t, models.RunRunning)
	taken, err := models.TakeMergeLock(ctx, db, run)
	require.NoError(t, err)
	require.True(t, taken)
	now := time.Now()
	vpc := newExecution(run, "run-3-f00d-prod-vpc-101", "vpc", models.ExecSucceeded, models.StepApplying)
	rds := newExecution(run, "run-3-f00d-prod-rds-102", "rds", models.ExecFailed, models.StepPlanning)
	rds.CfgDeps, rds.Error, vpc.FinishedAt, rds.FinishedAt = []string{"live/prod/vpc"}, "plan failed", &now, &now
	require.NoError(t, models.InsertExecutions(ctx, db, []*models.Execution{vpc, rds}))
	addresses := []string{`filer_file.single`, `module.net["east"].filer_file.subnet["a"]`}
	require.NoError(t, models.RecordNewResources(ctx, db, &models.NewResources{ExecutionID: vpc.ID,
		Providers: []string{"registry.terraform.io/gantryhq/filer"}, Addresses: addresses}))
	back := newExecution(run, infra.RollbackExecutionID(vpc.ExecutionID), "vpc", models.ExecFailed, models.StepApplying)
	back.Error, back.FinishedAt = "apply failed: refusing to destroy", &now
	rb := &models.Rollback{RollbackOf: vpc.ID, Reason: models.RollbackRunFailed, Commit: run.MergeCommit, Addresses: addresses,
		Remaining: []string{`filer_file.single`}}
	require.NoError(t, models.InsertRollback(ctx, db, back, rb))

	runPath := fmt.Sprintf("/infra/runs/%d", run.ID)
	backPath := "/infra/executions/" + back.ExecutionID
	viewer := b.browser(t)
	viewer.login(t, vera)
	_, page, _ := viewer.get(t, runPath)
	sec := section(t, page, "run-rollback")
	require.Contains(t, sec, "1 rollback failed and waits for an operator")
	require.Contains(t, sec, `href="`+backPath+`"`)
	require.Contains(t, sec, "its run failed")
	require.Contains(t, sec, "f00dfeed00")
	require.Contains(t, sec, "2 addresses targeted")
	require.Contains(t, sec, "Still in the state (1 resource):")
	require.Contains(t, sec, `data-testid="rollback-held-note"`)
	require.NotContains(t, sec, `data-testid="rollback-form"`)
	require.NotContains(t, section(t, page, "run-graph"), back.ExecutionID, "rollbacks are not in the run's graph and table")
	why := section(t, page, "lock-why")
	require.Contains(t, why, "rollback of live/prod/vpc")
	require.Contains(t, why, "an operator retries it or marks it resolved")

	_, page, csrf := viewer.get(t, backPath)
	require.Contains(t, page, "Rollback of live/prod/vpc")
	require.Contains(t, section(t, page, "execution-rollback"), "filer_file.single")
	res, _ := viewer.post(t, backPath+"/rollback-resolved", url.Values{"_csrf": {csrf}})
	require.Equal(t, http.StatusForbidden, res.StatusCode)

	_, page, _ = viewer.get(t, "/infra/executions/"+vpc.ExecutionID)
	created := section(t, page, "new-resources")
	require.Contains(t, created, "This apply introduced 1 provider to the unit (registry.terraform.io/gantryhq/filer)")
	require.Contains(t, created, `module.net[&#34;east&#34;].filer_file.subnet[&#34;a&#34;]`)
	require.Contains(t, created, `href="`+backPath+`"`)

	op := b.browser(t)
	op.login(t, olivia)
	_, page, csrf = op.get(t, runPath)
	form := section(t, page, "run-rollback")
	require.Contains(t, form, `formaction="`+backPath+`/rollback-retry"`)
	require.Contains(t, form, `formaction="`+backPath+`/rollback-resolved"`)
	res, _ = op.post(t, backPath+"/rollback-resolved", url.Values{"_csrf": {csrf}, "reason": {"deleted the file by hand"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, page, _ = op.get(t, backPath)
	require.Contains(t, page, "Marked resolved: the run goes on.")
	require.Contains(t, page, "Marked resolved by user:olivia@example.com")
	require.Contains(t, page, "deleted the file by hand")
	require.NotContains(t, page, `data-testid="rollback-form"`)
	_, page, _ = op.get(t, runPath)
	require.Contains(t, section(t, page, "rollback-note"), "1 rollback failed and was marked resolved by an operator")
	require.Contains(t, section(t, page, "run-rollback"), "failed · resolved")

	ended, err := models.RunByID(ctx, db, run.ID)
	require.NoError(t, err)
	require.Equal(t, models.RunFailed, ended.Status, "nothing else left: the run ends")
	lock, err := models.MergeLockOf(ctx, db, "live")
	require.NoError(t, err)
	require.Nil(t, lock)
	entries, err := models.ListLog(ctx, db, models.LogFilter{Target: infra.ExecutionTarget(back.ExecutionID), Event: infra.EventRollbackResolved})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "user:olivia@example.com", entries[0].Actor)

	opToken := b.token(t, b.user(t, "bot@example.com", models.RoleOperator), auth.ScopeRead, auth.ScopeWrite)
	api, body := b.call(t, http.MethodGet, "/api/v1/infra/executions/"+back.ExecutionID, opToken, "")
	require.Equal(t, http.StatusOK, api.StatusCode)
	require.Equal(t, true, body["is_rollback"], "the seed's is_rollback")
	api, body = b.call(t, http.MethodGet, "/api/v1/infra/executions/"+vpc.ExecutionID, opToken, "")
	require.Equal(t, http.StatusOK, api.StatusCode)
	require.Equal(t, false, body["is_rollback"])
	require.Equal(t, []any{"registry.terraform.io/gantryhq/filer"}, body["new_providers"], "the seed's new_providers")
	require.Len(t, body["new_resources"], 2, "the seed's new_resources: full addresses")
	api, _ = b.call(t, http.MethodPost, "/api/v1/infra/executions/"+back.ExecutionID+"/rollback-retry", opToken, `{"reason":"again"}`)
	require.Equal(t, http.StatusConflict, api.StatusCode, "resolved already")

	res, _ = op.post(t, backPath+"/rollback-retry", url.Values{"_csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, page, _ = op.get(t, backPath)
	require.Contains(t, page, "only a failed rollback waits for this choice")
}
