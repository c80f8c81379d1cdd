package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// TestDriftPages: /infra says how to turn drift detection on until a
// repository has it; then it lists the drifted unit with a link to its
// plan, a viewer reads the check but may not reconcile, and an operator
// reconciles it from the page (a run) or through the API, which refuses
// what cannot be reconciled with 404 and 409.
func TestDriftPages(t *testing.T) {
	t.Parallel()
	b := setupPages(t, 1)
	r := b.repo
	asVera, asOlivia := b.browser(t), b.browser(t)
	asVera.login(t, vera)
	asOlivia.login(t, olivia)

	status, page, _ := asVera.get(t, "/infra")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, section(t, page, "drift"), `data-testid="drift-empty"`)

	// dns's state changed behind Gantry's back; drift detection on.
	infratest.Git(t, r.Work, "checkout", "--quiet", infratest.Trunk)
	r.Write(map[string]string{infratest.DNS + "/main.tf": r.Resource(infratest.DNS, "zone", `"dns-changed-by-hand"`)})
	r.Apply(infratest.DNS)
	infratest.Git(t, r.Work, "checkout", "--quiet", "--", infratest.DNS+"/main.tf")
	yaml := r.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{ada, grace}, 1, 1)
	b.Sync(t, strings.Replace(yaml, "scan: graph\n", "scan: graph\n    drift: {schedule: every 12h}\n", 1))
	require.NoError(t, b.Infra.ScheduleDrift(t.Context()))
	var drifted models.DriftUnit
	servertest.WaitFor(t, func() (bool, string) {
		all, err := models.ListDrift(t.Context(), b.db.Bun)
		require.NoError(t, err)
		if len(all) != 1 || all[0].Checking > 0 || all[0].Sweep == nil || len(all[0].Drifted) != 1 {
			return false, fmt.Sprintf("drift: %+v", all)
		}
		drifted = all[0].Drifted[0]
		return true, ""
	})
	checkURL := fmt.Sprintf("/infra/drift/%d", drifted.ID)

	// A viewer: listed with its plan, no button, reconciling refused.
	_, page, csrf := asVera.get(t, "/infra")
	drift := section(t, page, "drift")
	require.Contains(t, drift, `data-unit="live/shared/dns" data-found="drifted"`)
	require.Contains(t, drift, `href="`+checkURL+`"`)
	require.Contains(t, drift, "Plan: 0 to add, 1 to change, 0 to destroy")
	require.Contains(t, drift, "every 12h")
	require.NotContains(t, drift, `data-testid="reconcile-form"`)
	status, page, _ = asVera.get(t, checkURL)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, "dns-changed-by-hand")
	require.Contains(t, section(t, page, "drift-status"), "drifted")
	res, _ := asVera.post(t, checkURL+"/reconcile", url.Values{"_csrf": {csrf}})
	require.Equal(t, http.StatusForbidden, res.StatusCode)

	// An operator reconciles from the page: a run, listed as reconciling.
	_, page, csrf = asOlivia.get(t, checkURL)
	require.Contains(t, page, `action="`+checkURL+`/reconcile"`)
	res, _ = asOlivia.post(t, checkURL+"/reconcile", url.Values{"_csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Regexp(t, `^/infra/runs/\d+$`, res.Header.Get("Location"))
	_, page, _ = asOlivia.get(t, res.Header.Get("Location"))
	require.Contains(t, page, "Reconcile drift of live/shared/dns")
	_, page, _ = asOlivia.get(t, "/infra")
	require.Contains(t, section(t, page, "drift"), `data-testid="drift-reconciling"`)

	// The API: the list, and what cannot be reconciled.
	token := b.token(t, b.user(t, "ops-bot@example.com", models.RoleOperator), auth.ScopeRead, auth.ScopeWrite)
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/api/v1/infra/drift", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var list []map[string]any
	require.NoError(t, jsonDecode(resp, &list))
	require.Len(t, list, 1)
	require.Equal(t, "live/shared/dns", list[0]["path"])
	require.Equal(t, "drifted", list[0]["status"])
	require.NotNil(t, list[0]["reconcile_run_id"])

	res2, body := b.call(t, http.MethodPost, "/api/v1/infra/drift/999999/reconcile", token, "")
	require.Equal(t, http.StatusNotFound, res2.StatusCode, body)
	res2, body = b.call(t, http.MethodPost, "/api/v1"+checkURL+"/reconcile", token, "")
	require.Equal(t, http.StatusConflict, res2.StatusCode, body)
	require.Contains(t, fmt.Sprint(body), "reconciling live/shared/dns already")
	var clean models.DriftCheck
	require.NoError(t, b.db.Bun.NewSelect().Model(&clean).Where("path = ?", infratest.VPC).OrderExpr("id DESC").Limit(1).Scan(t.Context()))
	res2, body = b.call(t, http.MethodPost, fmt.Sprintf("/api/v1/infra/drift/%d/reconcile", clean.ID), token, "")
	require.Equal(t, http.StatusConflict, res2.StatusCode, body)
	require.Contains(t, fmt.Sprint(body), "found no drift")
}
