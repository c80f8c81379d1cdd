package web_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/github/githubtest"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// infraBundle is a Gantry with workers and the standard Terragrunt
// repository registered as "live", voted on by ada and grace.
type infraBundle struct {
	*bundle
	repo *infratest.Repo
}

func setupInfra(t *testing.T) *infraBundle {
	t.Helper()
	b := setup(t)
	repo, _ := infratest.Standard(t)
	repo.Apply(infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2)
	b.Sync(t, repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{"ada@example.com", "grace@example.com"}, 1, 1))
	b.StartWorkers(t)
	return &infraBundle{bundle: b, repo: repo}
}

// deliver posts a delivery to the webhook the way GitHub does.
func (b *infraBundle) deliver(t *testing.T, event, id string, body []byte, secret string) *http.Response {
	t.Helper()
	res, err := githubtest.Deliver(t.Context(), http.DefaultClient, b.srv.URL+"/webhooks/github", secret, event, id, body)
	require.NoError(t, err)
	res.Body.Close()
	return res
}

func TestGitHubWebhook(t *testing.T) {
	t.Parallel()
	b := setupInfra(t)
	p := b.repo.OpenPR(7, map[string]string{infratest.VPC + "/main.tf": b.repo.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
	opened := b.repo.Event(p, "opened", "")

	res := b.deliver(t, "pull_request", "d-1", opened, "not the secret")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)

	unsigned, err := http.Post(b.srv.URL+"/webhooks/github", "application/json", bytes.NewReader(opened))
	require.NoError(t, err)
	unsigned.Body.Close()
	require.Equal(t, http.StatusUnauthorized, unsigned.StatusCode, "no signature header")

	res = b.deliver(t, "push", "d-2", []byte(`{"ref":"refs/heads/main"}`), servertest.WebhookSecret)
	require.Equal(t, http.StatusNoContent, res.StatusCode)
	require.Contains(t, res.Header.Get("X-Gantry-Ignored"), "push")

	res = b.deliver(t, "pull_request", "d-3", opened, servertest.WebhookSecret)
	require.Equal(t, http.StatusAccepted, res.StatusCode)
	res = b.deliver(t, "pull_request", "d-3", opened, servertest.WebhookSecret)
	require.Equal(t, http.StatusOK, res.StatusCode, "a redelivery is acknowledged and does nothing")
	b.WaitStatus(t, p.Head, github.PlanContext(infratest.VPC), "success")

	// GitHub's payloads may be larger than the API's 1 MB body limit.
	big := strings.Replace(string(b.repo.Event(p, "edited", "")), `"body":`, `"padding":"`+strings.Repeat("x", 2<<20)+`","body":`, 1)
	res = b.deliver(t, "pull_request", "d-4", []byte(big), servertest.WebhookSecret)
	require.Equal(t, http.StatusNoContent, res.StatusCode, "a 2 MB delivery is read and checked (edited needs no plan)")

	malformed := []byte(`{"action":"opened"`)
	res = b.deliver(t, "pull_request", "d-5", malformed, servertest.WebhookSecret)
	require.Equal(t, http.StatusBadRequest, res.StatusCode)

	// Deliveries and plans are measured.
	token := b.token(t, b.user(t, "mo@example.com", models.RoleViewer), auth.ScopeRead)
	metrics := b.metricsText(t, token)
	for _, line := range []string{
		`gantry_infra_webhook_deliveries_total{event="pull_request",result="accepted"} 1`,
		`gantry_infra_webhook_deliveries_total{event="pull_request",result="duplicate"} 1`,
		`gantry_infra_webhook_deliveries_total{event="pull_request",result="refused"} 1`,
		`gantry_infra_webhook_deliveries_total{event="",result="refused"} 1`,
		`gantry_infra_webhook_deliveries_total{event="pull_request",result="invalid"} 1`,
		`gantry_infra_webhook_deliveries_total{event="push",result="ignored"} 1`,
		`gantry_infra_command_seconds_count{kind="pr_plan",result="succeeded"} 1`,
		`gantry_infra_merge_locked{repository="live"} 0`,
		`gantry_infra_rollbacks_held{repository="live"} 0`,
	} {
		require.Contains(t, metrics, line)
	}
}

func (b *infraBundle) metricsText(t *testing.T, token string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(raw)
}

func TestInfraAPI(t *testing.T) {
	t.Parallel()
	b := setupInfra(t)
	ctx := t.Context()
	ada := b.user(t, "ada@example.com", models.RoleApprover)
	viewer := b.user(t, "vera@example.com", models.RoleViewer)
	outsider := b.user(t, "otto@example.com", models.RoleApprover)
	adaVote := b.token(t, ada, auth.ScopeRead, auth.ScopeVote)
	adaRead := b.token(t, ada, auth.ScopeRead)
	veraRead := b.token(t, viewer, auth.ScopeRead)
	ottoVote := b.token(t, outsider, auth.ScopeRead, auth.ScopeVote)

	p := b.repo.OpenPR(9, map[string]string{infratest.VPC + "/main.tf": b.repo.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
	sha := b.repo.Merge(p.Branch)
	b.Deliver(t, "pull_request", b.repo.Event(p, "closed", sha))
	run := b.WaitRunOf(t, "live", sha)
	vpc := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)

	res, body := b.call(t, http.MethodGet, "/api/v1/infra/repositories", veraRead, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	repos := body["repositories"].([]any)
	require.Len(t, repos, 1)
	lock := repos[0].(map[string]any)["merge_lock"].(map[string]any)
	require.EqualValues(t, run.ID, lock["run_id"])

	res, body = b.call(t, http.MethodGet, "/api/v1/infra/runs?repository=live&status=running", veraRead, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Len(t, body["runs"], 1)
	res, body = b.call(t, http.MethodGet, "/api/v1/infra/runs?status=sleeping&limit=0", veraRead, "")
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, errorFields(body), "status")
	require.Contains(t, errorFields(body), "limit")

	res, body = b.call(t, http.MethodGet, fmt.Sprintf("/api/v1/infra/runs/%d", run.ID), veraRead, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, true, body["holds_merge_lock"])
	require.Len(t, body["executions"], 3, "vpc and its dependents rds and ec2")
	res, _ = b.call(t, http.MethodGet, "/api/v1/infra/runs/999999", veraRead, "")
	require.Equal(t, http.StatusNotFound, res.StatusCode)

	res, body = b.call(t, http.MethodGet, "/api/v1/infra/executions/"+vpc.ExecutionID, veraRead, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	for _, field := range []string{"execution_id", "pr_id", "commit_id", "base_ref", "head_ref", "cfg_path", "cfg_deps", "account_name", "account_path", "account_deps",
		"plan_command", "apply_command", "voters", "approval_voters", "rejection_voters", "min_approval_count", "min_rejection_count", "status"} {
		require.Contains(t, body, field, "the seed's record field %s", field)
	}
	require.Contains(t, body["plan_output"], `"vpc-v2"`)
	require.Equal(t, sha, body["commit_id"])
	require.EqualValues(t, 9, body["pr_id"])

	res, body = b.call(t, http.MethodGet, "/api/v1/approvals", adaRead, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Len(t, body["executions"], 1)

	votes := "/api/v1/infra/executions/" + vpc.ExecutionID + "/votes"
	res, _ = b.call(t, http.MethodPost, votes, adaRead, `{"decision":"approve"}`)
	require.Equal(t, http.StatusForbidden, res.StatusCode, "a token without the vote scope")
	res, _ = b.call(t, http.MethodPost, votes, veraRead, `{"decision":"approve"}`)
	require.Equal(t, http.StatusForbidden, res.StatusCode, "a viewer")
	res, body = b.call(t, http.MethodPost, votes, ottoVote, `{"decision":"approve"}`)
	require.Equal(t, http.StatusForbidden, res.StatusCode, "an approver who is not a voter of the account")
	require.Contains(t, body["error"].(map[string]any)["message"], "not a voter")
	res, body = b.call(t, http.MethodPost, votes, adaVote, `{"decision":"maybe"}`)
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, errorFields(body), "decision")
	res, body = b.call(t, http.MethodPost, votes, adaVote, `{"decision":"approve","why":"x"}`)
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, errorFields(body), "why")
	res, body = b.call(t, http.MethodPost, "/api/v1/infra/executions/run-0-none-x-y-000/votes", adaVote, `{"decision":"approve"}`)
	require.Equal(t, http.StatusNotFound, res.StatusCode)

	res, body = b.call(t, http.MethodPost, votes, adaVote, `{"decision":"approve","comment":"the bot agrees"}`)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Equal(t, "approved", body["state"])
	b.WaitExecution(t, run.ID, infratest.VPC, models.ExecSucceeded, models.StepApplying)

	res, body = b.call(t, http.MethodGet, "/api/v1/infra/executions/"+vpc.ExecutionID, veraRead, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, []any{"ada@example.com"}, body["approval_voters"])
	require.Contains(t, body["apply_output"], "Apply complete!")
	entries, err := models.ListLog(ctx, b.db.Bun, models.LogFilter{Event: "execution-voted", Limit: 10})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "ada@example.com", entries[0].Actor)
	require.Equal(t, "api", entries[0].Detail["via"])

	res, _ = b.call(t, http.MethodPost, votes, adaVote, `{"decision":"reject"}`)
	require.Equal(t, http.StatusConflict, res.StatusCode, "decided")
	res, _ = b.call(t, http.MethodGet, "/api/v1/infra/runs", "", "")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
}

// TestAbortRun: operators abort a run from its page or through the API;
// others may not.
func TestAbortRun(t *testing.T) {
	t.Parallel()
	b := setupInfra(t)
	b.user(t, "olivia@example.com", models.RoleOperator)
	b.user(t, "vera@example.com", models.RoleViewer)
	ops := b.token(t, b.user(t, "bot@example.com", models.RoleOperator), auth.ScopeRead, auth.ScopeWrite)

	merge := func(number int, unit, value string) *models.Run {
		p := b.repo.OpenPR(number, map[string]string{unit + "/main.tf": b.repo.Resource(unit, "x", `"`+value+`"`)})
		sha := b.repo.Merge(p.Branch)
		b.Deliver(t, "pull_request", b.repo.Event(p, "closed", sha))
		run := b.WaitRunOf(t, "live", sha)
		b.WaitExecution(t, run.ID, unit, models.ExecRunning, models.StepVoting)
		return run
	}
	run := merge(31, infratest.DNS, "dns-v9")
	path := fmt.Sprintf("/infra/runs/%d", run.ID)

	viewer := b.browser(t)
	viewer.login(t, "vera@example.com")
	_, page, csrf := viewer.get(t, path)
	require.NotContains(t, page, `data-testid="abort-form"`, "viewers see no abort button")
	res, _ := viewer.post(t, path+"/abort", url.Values{"_csrf": {csrf}})
	require.Equal(t, http.StatusForbidden, res.StatusCode)

	op := b.browser(t)
	op.login(t, "olivia@example.com")
	_, page, csrf = op.get(t, path)
	require.Contains(t, page, `data-testid="abort-form"`)
	res, _ = op.post(t, path+"/abort", url.Values{"_csrf": {csrf}, "reason": {"nobody will vote"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, page, _ = op.get(t, path)
	require.Contains(t, page, "Aborted run")
	require.Contains(t, page, "aborted by user:olivia@example.com: nobody will vote")
	require.NotContains(t, page, `data-testid="abort-form"`, "a run that is over cannot be aborted")

	run = merge(32, infratest.DNS, "dns-v10")
	res2, body := b.call(t, http.MethodPost, fmt.Sprintf("/api/v1/infra/runs/%d/abort", run.ID), ops, `{"reason":"superseded"}`)
	require.Equal(t, http.StatusOK, res2.StatusCode, body)
	require.Equal(t, "failed", body["run"].(map[string]any)["status"])
	res2, _ = b.call(t, http.MethodPost, fmt.Sprintf("/api/v1/infra/runs/%d/abort", run.ID), ops, "")
	require.Equal(t, http.StatusConflict, res2.StatusCode)
}
