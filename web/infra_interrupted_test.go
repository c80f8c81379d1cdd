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
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/models"
)

// TestInterruptedApply_operatorsChoose: an interrupted apply is shown on its
// page and its run's page with the explanation; operators get the three
// choices (page and API), viewers and approvers only the explanation, and
// their posts are refused.
func TestInterruptedApply_operatorsChoose(t *testing.T) {
	t.Parallel()
	b := setupInfra(t)
	b.user(t, "olivia@example.com", models.RoleOperator)
	b.user(t, "vera@example.com", models.RoleViewer)
	b.user(t, "ada@example.com", models.RoleApprover)
	ops := b.token(t, b.user(t, "bot@example.com", models.RoleOperator), auth.ScopeRead, auth.ScopeWrite)
	voterToken := b.token(t, b.user(t, "grace@example.com", models.RoleApprover), auth.ScopeRead, auth.ScopeWrite, auth.ScopeVote)

	p := b.repo.OpenPR(41, map[string]string{infratest.DNS + "/main.tf": b.repo.Resource(infratest.DNS, "x", `"dns-v41"`)})
	sha := b.repo.Merge(p.Branch)
	b.Deliver(t, "pull_request", b.repo.Event(p, "closed", sha))
	run := b.WaitRunOf(t, "live", sha)
	interrupt := func() *models.Execution {
		t.Helper()
		x := b.WaitExecution(t, run.ID, infratest.DNS, models.ExecRunning, models.StepVoting)
		x.Step, x.ApplyStartedAt, x.ApplyOutput = models.StepApplying, new(time.Time), "terraform_data.x: Modifying...\n"
		*x.ApplyStartedAt = time.Now()
		require.NoError(t, models.UpdateExecution(t.Context(), b.DB.Bun, x, "step", "apply_started_at", "apply_output"))
		require.NoError(t, b.Infra.ApplyExecution(t.Context(), x.ID))
		return b.WaitExecution(t, run.ID, infratest.DNS, models.ExecRunning, models.StepInterrupted)
	}
	x := interrupt()
	path := "/infra/executions/" + x.ExecutionID
	runPath := fmt.Sprintf("/infra/runs/%d", run.ID)

	for _, who := range []string{"vera@example.com", "ada@example.com"} {
		c := b.browser(t)
		c.login(t, who)
		for _, page := range []string{path, runPath} {
			_, body, _ := c.get(t, page)
			require.Contains(t, body, "interrupted — state unknown", who, page)
			require.Contains(t, body, "Gantry will not apply it again on its own", who, page)
			require.Contains(t, body, `data-testid="interrupted-note"`, who, page)
			require.NotContains(t, body, `data-testid="interrupted-form"`, "%s sees no buttons on %s", who, page)
		}
		_, _, csrf := c.get(t, path)
		for _, action := range []string{"mark-failed", "mark-applied", "plan-again"} {
			res, _ := c.post(t, path+"/"+action, url.Values{"_csrf": {csrf}})
			require.Equal(t, http.StatusForbidden, res.StatusCode, who, action)
		}
	}
	for _, action := range []string{"mark-failed", "mark-applied", "plan-again"} {
		res, _ := b.call(t, http.MethodPost, "/api/v1/infra/executions/"+x.ExecutionID+"/"+action, voterToken, "")
		require.Equal(t, http.StatusForbidden, res.StatusCode, action)
	}
	api, body := b.call(t, http.MethodGet, "/api/v1/infra/executions/"+x.ExecutionID, ops, "")
	require.Equal(t, http.StatusOK, api.StatusCode)
	require.Equal(t, models.StepInterrupted, body["step"])
	require.Equal(t, "terraform_data.x: Modifying...\n", body["apply_output"], "the partial output is kept")

	// An operator plans again through the API.
	res, body := b.call(t, http.MethodPost, "/api/v1/infra/executions/"+x.ExecutionID+"/plan-again", ops, `{"reason":"unsure"}`)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Equal(t, models.StepPlanning, body["step"])
	res, _ = b.call(t, http.MethodPost, "/api/v1/infra/executions/"+x.ExecutionID+"/mark-failed", ops, "")
	require.Equal(t, http.StatusConflict, res.StatusCode, "only an interrupted apply takes the choice")

	// Interrupted again: an operator marks it failed from the run's page.
	x = interrupt()
	op := b.browser(t)
	op.login(t, "olivia@example.com")
	_, page, _ := op.get(t, runPath)
	require.Contains(t, page, `data-testid="interrupted-form"`)
	_, page, csrf := op.get(t, path)
	for _, action := range []string{"mark-failed", "mark-applied", "plan-again"} {
		require.Contains(t, page, `formaction="`+path+"/"+action+`"`)
	}
	res, _ = op.post(t, path+"/mark-failed", url.Values{"_csrf": {csrf}, "reason": {"half of it exists"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	b.WaitRun(t, run.ID, models.RunFailed)
	_, page, _ = op.get(t, path)
	require.Contains(t, page, "Marked as failed")
	require.Contains(t, page, "the interrupted apply was marked as failed by user:olivia@example.com: half of it exists")
	require.NotContains(t, page, `data-testid="interrupted"`)

	entries, err := models.ListLog(t.Context(), b.DB.Bun, models.LogFilter{Target: infra.ExecutionTarget(x.ExecutionID), Event: infra.EventExecutionResolved})
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.Equal(t, "user:olivia@example.com", entries[0].Actor)
	require.Equal(t, infra.ChoiceFailed, entries[0].Detail["choice"])
	require.Contains(t, entries[1].Actor, "bot@example.com")
	require.Equal(t, infra.ChoicePlanAgain, entries[1].Detail["choice"])
}
