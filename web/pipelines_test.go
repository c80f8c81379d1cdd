package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

const gatedPipeline = `pipelines:
  - name: web
    stages:
      - {name: build, artifacts: [x86]}
      - {name: approval, after: [build], approval: {voters: [ada@example.com]}}
`

func TestPipelinesAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Sync(t, gatedPipeline)
	b.StartWorkers(t)
	op := b.token(t, b.user(t, "op@example.com", models.RoleOperator), "read", "write")
	viewer := b.token(t, b.user(t, "viewer@example.com", models.RoleViewer), "read", "write")

	res, body := b.call(t, http.MethodPost, "/api/v1/pipelines/web/revisions", viewer, `{"revision":"1"}`)
	require.Equal(t, http.StatusForbidden, res.StatusCode, "a viewer does not register revisions")
	res, body = b.call(t, http.MethodPost, "/api/v1/pipelines/web/revisions", op, `{"revision":"has space"}`)
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, errorFields(body), "revision")
	res, body = b.call(t, http.MethodPost, "/api/v1/pipelines/web/revisions", op, `{"revision":"1", "extra": true}`)
	require.Equal(t, http.StatusBadRequest, res.StatusCode, "unknown fields are refused: %v", body)
	res, body = b.call(t, http.MethodPost, "/api/v1/pipelines/web/revisions", op, `{"revision":"1"}`)
	require.Equal(t, http.StatusCreated, res.StatusCode, "%v", body)
	require.Equal(t, "in_flight", body["status"])
	res, _ = b.call(t, http.MethodPost, "/api/v1/pipelines/web/revisions", op, `{"revision":"1"}`)
	require.Equal(t, http.StatusOK, res.StatusCode, "registering again changes nothing")
	res, body = b.call(t, http.MethodPost, "/api/v1/pipelines/web/revisions/1/artifacts", op, `{"arch":"riscv","location":"s3://x"}`)
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, errorFields(body)["arch"], `builds no artifact for "riscv"`)
	res, _ = b.call(t, http.MethodPost, "/api/v1/pipelines/web/revisions/2/artifacts", op, `{"arch":"x86","location":"s3://x"}`)
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	res, body = b.call(t, http.MethodPost, "/api/v1/pipelines/web/revisions/1/artifacts", op, `{"arch":"x86","location":"s3://web-1"}`)
	require.Equal(t, http.StatusCreated, res.StatusCode, "%v", body)

	b.WaitStep(t, "web", "1", "stage-approved", "web/approval", "approval")
	res, body = b.call(t, http.MethodGet, "/api/v1/pipelines/web/revisions/1", viewer, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Nil(t, body["blocked"])
	res, body = b.call(t, http.MethodGet, "/api/v1/pipelines/web/status?at=build", viewer, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "1", body["latest_finished"].(map[string]any)["revision"])
	require.Equal(t, "stage", body["level"])
	res, body = b.call(t, http.MethodGet, "/api/v1/pipelines/web/status", viewer, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Len(t, body["in_progress"], 1)
	res, _ = b.call(t, http.MethodGet, "/api/v1/pipelines/web/status?at=nowhere", viewer, "")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	res, body = b.call(t, http.MethodGet, "/api/v1/pipelines/web", viewer, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Len(t, body["in_flight"], 1)
	res, body = b.call(t, http.MethodPost, "/api/v1/pipelines/web/revisions/1/retry", op, `{"event":"stage-approved","target":"web/approval"}`)
	require.Equal(t, http.StatusConflict, res.StatusCode, "only a failed step is retried: %v", body)
	res, body = b.call(t, http.MethodGet, "/api/v1/pipelines/web/revisions?status=done", viewer, "")
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, errorFields(body), "status")
}

func TestPipelineGateIsVotedFromTheRevisionPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Sync(t, gatedPipeline)
	b.StartWorkers(t)
	b.user(t, "ada@example.com", models.RoleApprover)
	b.user(t, "bob@example.com", models.RoleApprover)

	bob := b.browser(t)
	bob.login(t, "bob@example.com")
	_, page, _ := bob.get(t, "/approvals")
	require.Contains(t, page, "Gate before approval of pipeline web: voted on by ada@example.com.")

	_, _, err := b.Pipelines().Register(t.Context(), "web", "1", "ci")
	require.NoError(t, err)
	_, _, err = b.Pipelines().RegisterArtifact(t.Context(), "web", "1", "x86", "s3://web-1", "ci")
	require.NoError(t, err)
	b.WaitStep(t, "web", "1", "stage-approved", "web/approval", "approval")

	_, page, _ = bob.get(t, "/pipelines/web/revisions/1")
	require.Contains(t, page, "Waiting for the voters; you are not one of them.")
	require.NotContains(t, page, `data-testid="gate-vote-form"`)

	ada := b.browser(t)
	ada.login(t, "ada@example.com")
	_, page, _ = ada.get(t, "/approvals")
	require.Contains(t, page, "web → approval", "the gate waits in /approvals")
	status, page, csrf := ada.get(t, "/pipelines/web/revisions/1")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, `data-testid="gate-vote-form"`)
	res, _ := ada.post(t, "/pipelines/web/revisions/1/vote", url.Values{"_csrf": {csrf}, "stage": {"approval"}, "decision": {"approve"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	b.WaitRevisionFinished(t, "web", "1")
	_ = servertest.Wait
}

func TestARunningStepsOutputIsFollowedLive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	script := filepath.Join(t.TempDir(), "slow.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho deploying \"$1\"\nsleep 20\n"), 0o755))
	b.Sync(t, fmt.Sprintf(`pipelines:
  - name: slow
    stages:
      - name: prod
        host_groups: [{name: g, hosts: [h1]}]
        steps: [{name: deployed, run: [%q, "{host}"]}]
`, script))
	b.StartWorkers(t)
	b.user(t, "viewer@example.com", models.RoleViewer)
	_, _, err := b.Pipelines().Register(t.Context(), "slow", "1", "ci")
	require.NoError(t, err)
	b.WaitStep(t, "slow", "1", "host-deployed", "slow/prod/g/h1", "running")

	br := b.browser(t)
	br.login(t, "viewer@example.com")
	tail := "/pipelines/slow/revisions/1/output?" + url.Values{"event": {"host-deployed"}, "target": {"slow/prod/g/h1"}}.Encode()
	servertest.WaitFor(t, func() (bool, string) {
		status, body, _ := br.get(t, tail)
		require.Equal(t, http.StatusOK, status, body)
		return strings.Contains(body, `"text":"deploying h1\n"`) && strings.Contains(body, `"done":false`), body
	})
	_, page, _ := br.get(t, "/pipelines/slow/revisions/1")
	require.Contains(t, page, `data-testid="step-output-live"`)
	require.Contains(t, page, "deploying h1")
	status, body, _ := br.get(t, tail+"&offset=-1")
	require.Equal(t, http.StatusBadRequest, status, body)
}
