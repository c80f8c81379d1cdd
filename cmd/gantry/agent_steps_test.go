package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/client"
	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/pipelines"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// agentsEnv is a Gantry with workers, tuned so that an agent silent for 3s
// has stopped responding (the test's agents poll, and so heartbeat, every
// second: --poll 1s), and an agent token.
func agentsEnv(t *testing.T, yaml string) (*servertest.Server, string) {
	t.Helper()
	s := servertest.New(t, "GANTRY_API_RATE=10000")
	s.Pipelines().AgentDeadAfter = 3 * time.Second // read by the workers only, started below
	s.Sync(t, yaml)
	s.StartWorkers(t)
	ctx := context.Background()
	u, err := access.CreateUser(ctx, s.DB.Bun, access.NewUser{Email: "agents@example.com", Role: "operator", Password: "correct-horse-battery"}, "test")
	require.NoError(t, err)
	token, _, err := access.CreateToken(ctx, s.DB.Bun, u, access.NewToken{Name: "agents", Scopes: []string{"agent"}}, "test")
	require.NoError(t, err)
	return s, token
}

// lockedBuffer is an agent's log, read while it writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startAgent runs `gantry agent` in-process as instance id for pipeline
// host host, talking to server, until the returned stop is called (or the
// test ends).
func startAgent(t *testing.T, server, token, id, host string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &lockedBuffer{}
	done := make(chan error, 1)
	env := []string{"GANTRY_SERVER=" + server, "GANTRY_TOKEN=" + token, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	go func() {
		done <- run(ctx, []string{"agent", "--cluster", "deploy", "--id", id, "--attr", "host=" + host, "--poll", "1s"}, env, logs, logs)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Errorf("agent %s did not stop", id)
			}
			t.Logf("agent %s:\n%s", id, logs.String())
		})
	}
	t.Cleanup(stop)
	return stop
}

// agentPipeline deploys to hosts h1 and h2 on their agents: the command
// appends "<agent instance> <host> <revision>" to dir/marks, as only the
// agent's environment can say.
func agentPipeline(dir string, timeout string, cmd string) string {
	return fmt.Sprintf(`pipelines:
  - name: web
    stages:
      - {name: build, artifacts: [x86]}
      - name: prod
        after: [build]
        host_groups: [{name: g, hosts: [h1, h2]}]
        steps:
          - name: deployed
            runs_on: agent
            timeout: %s
            run: [sh, -c, %q, sh, "{host}", "{revision}"]
`, timeout, strings.ReplaceAll(cmd, "DIR", dir))
}

const markOnAgent = `echo "$GANTRY_AGENT_INSTANCE $1 $2" >> DIR/marks; echo "deployed $1"`

func readMarks(t *testing.T, dir string) []string {
	data, err := os.ReadFile(filepath.Join(dir, "marks"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func TestPipelineStepsRunOnTheirHostsAgents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, token := agentsEnv(t, agentPipeline(dir, "1m", markOnAgent))
	ctx := context.Background()
	svc := s.Pipelines()
	startAgent(t, s.URL, token, "agent-h1", "h1")

	_, _, err := svc.Register(ctx, "web", "v1", "ci")
	require.NoError(t, err)
	_, _, err = svc.RegisterArtifact(ctx, "web", "v1", "x86", "s3://b/v1", "ci")
	require.NoError(t, err)

	// h1's agent deploys h1; h2 has no agent yet: its step waits, and says
	// what for.
	s.WaitStep(t, "web", "v1", "host-deployed", "web/prod/g/h1", "done")
	h2 := s.WaitStep(t, "web", "v1", "host-deployed", "web/prod/g/h2", "waiting")
	require.Equal(t, "waits for host h2's agent to connect (gantry agent --attr host=h2)", h2.Why)
	require.Equal(t, []string{"agent-h1 h1 v1"}, readMarks(t, dir))

	startAgent(t, s.URL, token, "agent-h2", "h2")
	s.WaitRevisionFinished(t, "web", "v1")
	marks := readMarks(t, dir)
	slices.Sort(marks)
	require.Equal(t, []string{"agent-h1 h1 v1", "agent-h2 h2 v1"}, marks, "each host's command ran on its own agent, once")

	d, err := svc.Revision(ctx, "web", "v1")
	require.NoError(t, err)
	for _, st := range d.Steps {
		if st.Step.Event == "host-deployed" {
			require.Equal(t, "deployed "+st.Step.Target[len("web/prod/g/"):]+"\n", st.Work.Output, "the agent sent the output")
		}
	}
	done, err := models.ListLog(ctx, s.DB.Bun, models.LogFilter{Deployment: pipelines.DeploymentID("web", "v1"), Event: "host-deployed"})
	require.NoError(t, err)
	require.Len(t, done, 2)
	agents := []string{done[0].Detail["agent"].(string), done[1].Detail["agent"].(string)}
	slices.Sort(agents)
	require.Equal(t, []string{"agent-h1", "agent-h2"}, agents)

	t.Run("a repeated report changes nothing; another agent's step is not found", func(t *testing.T) {
		dispatches, err := models.AgentStepsOfRevision(ctx, s.DB.Bun, d.Revision.ID)
		require.NoError(t, err)
		require.Len(t, dispatches, 2)
		h1 := dispatches[slices.IndexFunc(dispatches, func(a models.PipelineAgentStep) bool { return a.Host == "h1" })]
		api := client.New(s.URL, client.WithToken(token))
		zero := 0
		require.NoError(t, api.ReportStep(ctx, "agent-h1", h1.ID.String(), client.AgentStepReport{ExitCode: &zero}))
		again, err := models.ListLog(ctx, s.DB.Bun, models.LogFilter{Deployment: pipelines.DeploymentID("web", "v1"), Event: "host-deployed"})
		require.NoError(t, err)
		require.Len(t, again, 2)

		var apiErr *client.APIError
		err = api.ReportStep(ctx, "agent-h2", h1.ID.String(), client.AgentStepReport{ExitCode: &zero})
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, 404, apiErr.Status)
		err = svc.ReportAgentStep(ctx, "agent-h1", uuid.New(), pipelines.AgentStepReport{ExitCode: &zero})
		require.Equal(t, apperr.NotFound, apperr.CodeOf(err))
	})
}

func TestAnAgentThatDisconnectsMidStepFailsItsStep(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// h1 deploys at once; h2's command runs until its agent is gone.
	s, token := agentsEnv(t, agentPipeline(dir, "10m", `echo "$GANTRY_AGENT_INSTANCE $1 $2" >> DIR/marks; [ "$1" = h1 ] || exec sleep 600`))
	ctx := context.Background()
	svc := s.Pipelines()
	// h2's agent reaches Gantry through a proxy that the test cuts: the
	// agent lives on, but Gantry hears nothing more from it.
	target, err := url.Parse(s.URL)
	require.NoError(t, err)
	proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
	t.Cleanup(proxy.Close)
	startAgent(t, s.URL, token, "agent-h1", "h1")
	startAgent(t, proxy.URL, token, "agent-h2", "h2")

	_, _, err = svc.Register(ctx, "web", "v1", "ci")
	require.NoError(t, err)
	_, _, err = svc.RegisterArtifact(ctx, "web", "v1", "x86", "s3://b/v1", "ci")
	require.NoError(t, err)
	running := s.WaitStep(t, "web", "v1", "host-deployed", "web/prod/g/h2", "running")
	require.Equal(t, "running on host h2's agent (instance agent-h2)", running.Why)
	servertest.WaitFor(t, func() (bool, string) {
		return slices.Contains(readMarks(t, dir), "agent-h2 h2 v1"), "h2's command has not started"
	})

	proxy.CloseClientConnections()
	proxy.Config.SetKeepAlivesEnabled(false)
	proxy.Close()
	failed := s.WaitStep(t, "web", "v1", "host-deployed", "web/prod/g/h2", "failed")
	require.Contains(t, failed.Work.Reason, "host h2's agent (instance agent-h2) stopped responding while running the step: no heartbeat for")
	s.WaitStep(t, "web", "v1", "host-deployed", "web/prod/g/h1", "done")
	d, err := svc.Revision(ctx, "web", "v1")
	require.NoError(t, err)
	require.NotNil(t, d.Blocked, "the revision waits for an operator to retry or skip")
	g, err := models.LatestAt(ctx, s.DB.Bun, "web/prod/g/h2", "host-failed")
	require.NoError(t, err)
	require.NotNil(t, g)

	// The operator brings the host back and retries: its agent runs it.
	startAgent(t, s.URL, token, "agent-h2b", "h2")
	require.NoError(t, svc.Retry(ctx, pipelines.StepRef{Pipeline: "web", Revision: "v1", Event: "host-deployed", Target: "web/prod/g/h2"}, "user:op@example.com"))
	s.WaitStep(t, "web", "v1", "host-deployed", "web/prod/g/h2", "running")
	servertest.WaitFor(t, func() (bool, string) {
		return slices.Contains(readMarks(t, dir), "agent-h2b h2 v1"), "the retry has not run on the new agent"
	})
}

func TestAStepPastItsTimeoutIsStoppedByItsAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, token := agentsEnv(t, agentPipeline(dir, "1s", `echo "started $1"; exec sleep 600`))
	ctx := context.Background()
	startAgent(t, s.URL, token, "agent-h1", "h1")
	_, _, err := s.Pipelines().Register(ctx, "web", "v1", "ci")
	require.NoError(t, err)
	_, _, err = s.Pipelines().RegisterArtifact(ctx, "web", "v1", "x86", "s3://b/v1", "ci")
	require.NoError(t, err)
	failed := s.WaitStep(t, "web", "v1", "host-deployed", "web/prod/g/h1", "failed")
	require.Equal(t, "timed out after 1s (step deployed's timeout, on host h1's agent)", failed.Work.Reason)
	require.Equal(t, "started h1\n", failed.Work.Output)
}
