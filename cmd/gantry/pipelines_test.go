package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/client"
	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/servertest"
)

// pipelinesEnv is a Gantry with workers and pipeline web (a build for x86,
// then one host running true), and the environment of CI at a terminal
// with a token of scopes.
func pipelinesEnv(t *testing.T, role string, scopes ...string) (*servertest.Server, []string) {
	t.Helper()
	s := servertest.New(t, "GANTRY_API_RATE=1000")
	s.Sync(t, `pipelines:
  - name: web
    stages:
      - {name: build, artifacts: [x86]}
      - name: prod
        after: [build]
        host_groups: [{name: g, hosts: [h1]}]
        steps: [{name: deployed, run: ["true"]}]
`)
	s.StartWorkers(t)
	u, err := access.CreateUser(context.Background(), s.DB.Bun, access.NewUser{Email: "ci@example.com", Role: role, Password: "correct-horse-battery"}, "test")
	require.NoError(t, err)
	token, _, err := access.CreateToken(context.Background(), s.DB.Bun, u, access.NewToken{Name: "ci", Scopes: scopes}, "test")
	require.NoError(t, err)
	return s, []string{"GANTRY_SERVER=" + s.URL, "GANTRY_TOKEN=" + token}
}

func TestPipelinesCLIRegistersRevisionsAndArtifacts(t *testing.T) {
	t.Parallel()
	s, env := pipelinesEnv(t, "operator", "read", "write")

	out, _, err := gantry(t, env, "pipelines", "revision", "web", "1.4.2")
	require.NoError(t, err)
	require.Equal(t, "Registered web 1.4.2; it is on its way through the pipeline.\n", out)
	out, _, err = gantry(t, env, "pipelines", "revision", "web", "1.4.2")
	require.NoError(t, err)
	require.Equal(t, "web 1.4.2 was registered already (in_flight); nothing changed.\n", out)

	_, _, err = gantry(t, env, "pipelines", "artifact", "web", "1.4.2", "--arch", "riscv", "--location", "s3://x")
	var apiErr *client.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 400, apiErr.Status)
	require.Contains(t, apiErr.Fields["arch"], `pipeline web builds no artifact for "riscv" (it waits for x86)`)
	_, _, err = gantry(t, env, "pipelines", "artifact", "web", "1.4.2", "--arch", "x86")
	require.ErrorContains(t, err, "--location required")

	out, _, err = gantry(t, env, "pipelines", "artifact", "web", "1.4.2", "--arch", "x86", "--location", "s3://web-1.4.2")
	require.NoError(t, err)
	require.Equal(t, "Registered the x86 artifact of web 1.4.2 at s3://web-1.4.2.\n", out)
	_, _, err = gantry(t, env, "pipelines", "artifact", "web", "1.4.2", "--arch", "x86", "--location", "s3://other")
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 409, apiErr.Status, "artifacts do not change")

	s.WaitRevisionFinished(t, "web", "1.4.2")
	out, _, err = gantry(t, env, "pipelines", "list")
	require.NoError(t, err)
	require.Regexp(t, `web\s+2\s+1\s+0\s+0\s+1\.4\.2`, out)
	out, _, err = gantry(t, env, "pipelines", "show", "web", "1.4.2", "-o", "json")
	require.NoError(t, err)
	var d client.PipelineRevisionDetail
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	require.Equal(t, "finished", d.Status)
	require.Equal(t, "s3://web-1.4.2", d.Artifacts[0].Location)

	_, _, err = gantry(t, env, "pipelines", "revision", "nowhere", "1")
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 404, apiErr.Status)
}

func TestPipelinesCLINeedsTheWriteScopeToRegister(t *testing.T) {
	t.Parallel()
	_, env := pipelinesEnv(t, "operator", "read")
	_, _, err := gantry(t, env, "pipelines", "revision", "web", "1")
	var apiErr *client.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 403, apiErr.Status)
	out, _, err := gantry(t, nil, "pipelines", "artifact", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "Examples:")
}
