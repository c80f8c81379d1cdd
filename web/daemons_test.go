package web_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/models"
)

// TestDaemonsAPI: the daemons API's statuses and field names for bad
// input, and the agent scope's fence (an agent token does agent work and
// nothing else; other tokens cannot act as agents).
func TestDaemonsAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ops := b.user(t, "ops@example.com", models.RoleOperator)
	write := b.token(t, ops, "read", "write")
	agent := b.token(t, ops, "agent")
	viewer := b.token(t, b.user(t, "view@example.com", models.RoleViewer), "read", "write")

	env := func(name string, minHealthy int) string {
		return fmt.Sprintf(`{"name":%q,"task_definition":{"name":"logger","command":["/bin/sleep","100"]},
			"instance_group":{"cluster":"web","attributes":["role=web"]},"deployment_configuration":{"min_healthy_percent":%d}}`, name, minHealthy)
	}
	res, body := b.call(t, http.MethodPost, "/api/v1/daemons/environments", write, env("logs", 150))
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, body["error"].(map[string]any)["fields"], "deployment_configuration.min_healthy_percent")

	res, body = b.call(t, http.MethodPost, "/api/v1/daemons/environments", write, env("logs", 50))
	require.Equal(t, http.StatusCreated, res.StatusCode, body)
	version := body["environment_version"].(string)

	res, _ = b.call(t, http.MethodPost, "/api/v1/daemons/environments", viewer, env("other", 50))
	require.Equal(t, http.StatusForbidden, res.StatusCode, "viewers cannot create")
	res, body = b.call(t, http.MethodPost, "/api/v1/daemons/environments", write, `{"name":"logs2","task_definition":{"name":"logger","command":["/bin/true"]},"instance_group":{"cluster":"web"}}`)
	require.Equal(t, http.StatusConflict, res.StatusCode, "the same task definition on an overlapping group")
	require.Contains(t, body["error"].(map[string]any)["message"], "logs")

	res, _ = b.call(t, http.MethodGet, "/api/v1/daemons/environments/nope", write, "")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	res, _ = b.call(t, http.MethodPost, "/api/v1/daemons/environments/logs/deployments", write, `{"version_id":"6c1c8a3e-1b1a-4c8e-9d55-9c5c0e3a1f00"}`)
	require.Equal(t, http.StatusNotFound, res.StatusCode, "an unknown version")
	res, body = b.call(t, http.MethodPost, "/api/v1/daemons/environments/logs/deployments", write, `{"version_id":"v1"}`)
	require.Equal(t, http.StatusBadRequest, res.StatusCode, body)
	res, body = b.call(t, http.MethodGet, "/api/v1/daemons/environments/logs/diff?version_id="+version, write, "")
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.EqualValues(t, 0, body["matching_instances"], "a filter that matches nothing is allowed")
	res, _ = b.call(t, http.MethodPost, "/api/v1/daemons/environments/logs/stop", write, "")
	require.Equal(t, http.StatusConflict, res.StatusCode, "nothing in progress")

	// The agent scope: agent endpoints only.
	res, _ = b.call(t, http.MethodGet, "/api/v1/daemons/environments", agent, "")
	require.Equal(t, http.StatusForbidden, res.StatusCode, "an agent token reads nothing else")
	res, _ = b.call(t, http.MethodPost, "/api/v1/daemons/agents", write, `{"cluster":"web"}`)
	require.Equal(t, http.StatusForbidden, res.StatusCode, "a write token is no agent")
	res, body = b.call(t, http.MethodPost, "/api/v1/daemons/agents", agent, `{"cluster":"Web!"}`)
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, body["error"].(map[string]any)["fields"], "cluster")
	res, body = b.call(t, http.MethodPost, "/api/v1/daemons/agents", agent, `{"cluster":"web","id":"m-1","attributes":{"role":"web"}}`)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	res, body = b.call(t, http.MethodGet, "/api/v1/daemons/agents/m-1/tasks?wait=0s", agent, "")
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Empty(t, body["tasks"])
	res, _ = b.call(t, http.MethodPost, "/api/v1/daemons/agents/m-1/tasks/6c1c8a3e-1b1a-4c8e-9d55-9c5c0e3a1f00", agent, `{"state":"running"}`)
	require.Equal(t, http.StatusNotFound, res.StatusCode, "not a task of the instance")
	// A task for m-1, running: the metrics count it by environment and state.
	res, body = b.call(t, http.MethodPost, "/api/v1/daemons/environments", write, `{"name":"metrics","task_definition":{"name":"m","command":["/bin/true"]},"instance_group":{"cluster":"web"}}`)
	require.Equal(t, http.StatusCreated, res.StatusCode, body)
	res, body = b.call(t, http.MethodPost, "/api/v1/daemons/environments/metrics/deployments", write, fmt.Sprintf(`{"version_id":%q}`, body["environment_version"]))
	require.Equal(t, http.StatusAccepted, res.StatusCode, body)
	d, err := b.Daemons().GetDeployment(t.Context(), "metrics", uuid.MustParse(body["id"].(string)))
	require.NoError(t, err)
	require.NoError(t, b.Daemons().ClaimDeployment(t.Context(), d.ID))
	_, err = b.Daemons().StepDeployment(t.Context(), d.ID)
	require.NoError(t, err)
	res, body = b.call(t, http.MethodGet, "/api/v1/daemons/agents/m-1/tasks?wait=0s", agent, "")
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	tasks := body["tasks"].([]any)
	require.Len(t, tasks, 1)
	taskID := tasks[0].(map[string]any)["id"].(string)
	res, _ = b.call(t, http.MethodPost, "/api/v1/daemons/agents/m-1/tasks/"+taskID, agent, `{"state":"running","pid":42}`)
	require.Equal(t, http.StatusNoContent, res.StatusCode)
	metrics := b.metrics(t, write)
	require.Contains(t, metrics, `gantry_daemon_tasks{environment="metrics",state="running"} 1`)
	require.Contains(t, metrics, `gantry_daemon_deployments{state="in-progress"} 1`)
	require.Contains(t, metrics, `gantry_daemon_cluster_staleness_seconds{cluster="web"}`)

	res, _ = b.call(t, http.MethodDelete, "/api/v1/daemons/agents/m-1", agent, "")
	require.Equal(t, http.StatusNoContent, res.StatusCode)
	res, _ = b.call(t, http.MethodGet, "/api/v1/daemons/agents/m-1/tasks?wait=0s", agent, "")
	require.Equal(t, http.StatusNotFound, res.StatusCode, "a departed instance must register again")

	res, _ = b.call(t, http.MethodDelete, "/api/v1/daemons/environments/logs", write, "")
	require.Equal(t, http.StatusNoContent, res.StatusCode)
}
