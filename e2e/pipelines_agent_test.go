package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/require"
)

// TestPipelineStepsOnAgents runs a real gantry serve and real gantry
// agents, one per pipeline host, each in its own working directory: the
// prod stage's step (runs_on: agent) writes a file there. A host with no
// agent yet waits with the reason on the revision's page; an agent killed
// mid-step fails its host's step, with the reason on the page.
func TestPipelineStepsOnAgents(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "gantry.yaml")
	require.NoError(t, os.WriteFile(config, []byte(`pipelines:
  - name: site
    stages:
      - name: prod
        host_groups: [{name: all, hosts: [web-1, web-2]}]
        steps:
          - name: deployed
            runs_on: agent
            run: [sh, -c, 'echo "$GANTRY_AGENT_INSTANCE $0 $1" > deployed-$1.txt; [ "$1" != slow ] || { echo $$ > pid; exec sleep 600; }', "{host}", "{revision}"]
`), 0o600))
	srv := startServer(t, "GANTRY_CONFIG="+config)
	ada := srv.createUser(t, "Ada Lovelace", "ada@example.com", "admin")
	agentToken := srv.createToken(t, "ada@example.com", "agents", "agent")
	token := srv.createToken(t, "ada@example.com", "e2e-ci", "read,write")
	dirs := map[string]string{"web-1": t.TempDir(), "web-2": t.TempDir()}
	agents := map[string]*process{}
	startAgent := func(host string) {
		agents[host] = startProcessIn(t, dirs[host], "agent-"+host, processEnv("GANTRY_TOKEN="+agentToken), "agent", "--cluster", "deploy",
			"--attr", "host="+host, "--id", "agent-"+host, "--server", srv.URL, "--poll", "5s")
	}
	register := func(rev string) {
		t.Helper()
		status, out := callAPI(t, http.MethodPost, srv.URL+"/api/v1/pipelines/site/revisions", token, map[string]string{"revision": rev})
		require.Equal(t, http.StatusCreated, status, "%s", out)
	}
	page := newPage(t)
	signIn(t, page, srv.URL, ada)
	row := func(host string) playwright.Locator {
		return page.Locator(fmt.Sprintf(`[data-testid=step-row][data-event=host-deployed][data-target="site/prod/all/%s"]`, host))
	}
	wait := playwright.LocatorAssertionsToHaveAttributeOptions{Timeout: playwright.Float(float64(conditionWait / time.Millisecond))}
	reload := func(rev string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(conditionWait)
		for open(t, page, srv.URL+"/pipelines/site/revisions/"+rev, http.StatusOK); !cond(); open(t, page, srv.URL+"/pipelines/site/revisions/"+rev, http.StatusOK) {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting on revision %s's page", rev)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	state := func(host string) string {
		s, _ := row(host).GetAttribute("data-state")
		return s
	}

	startAgent("web-1")
	register("v1")
	// web-1's agent deploys it; web-2 has none: its step waits, and says so.
	reload("v1", func() bool { return state("web-1") == "done" && state("web-2") == "waiting" })
	require.NoError(t, expect.Locator(row("web-2").GetByTestId("step-why")).ToContainText("waits for host web-2's agent to connect (gantry agent --attr host=web-2)"))
	saveScreenshot(t, page, "pipeline-agent-waiting")
	deployed, err := os.ReadFile(filepath.Join(dirs["web-1"], "deployed-v1.txt"))
	require.NoError(t, err, "the command ran in web-1's agent's working directory")
	require.Equal(t, "agent-web-1 web-1 v1\n", string(deployed))

	startAgent("web-2")
	reload("v1", func() bool { return state("web-2") == "done" })
	deployed, err = os.ReadFile(filepath.Join(dirs["web-2"], "deployed-v1.txt"))
	require.NoError(t, err, "the command ran in web-2's agent's working directory")
	require.Equal(t, "agent-web-2 web-2 v1\n", string(deployed))
	saveScreenshot(t, page, "pipeline-agent-done")

	// A revision whose command hangs; web-2's agent is killed mid-step.
	register("slow")
	pidFile := filepath.Join(dirs["web-2"], "pid")
	deadline := time.Now().Add(conditionWait)
	for _, err := os.Stat(pidFile); err != nil; _, err = os.Stat(pidFile) {
		require.True(t, time.Now().Before(deadline), "web-2's command never started")
		time.Sleep(100 * time.Millisecond)
	}
	_, err = agents["web-2"].stop(syscall.SIGKILL, stopTimeout)
	require.NoError(t, err)
	t.Cleanup(func() { // the orphaned command
		if data, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	open(t, page, srv.URL+"/pipelines/site/revisions/slow", http.StatusOK)
	require.NoError(t, expect.Locator(row("web-2")).ToHaveAttribute("data-state", "running", wait))
	require.NoError(t, expect.Locator(row("web-2").GetByTestId("step-why")).ToContainText("running on host web-2's agent (instance agent-web-2)"))
	reload("slow", func() bool { return state("web-2") == "failed" })
	require.NoError(t, expect.Locator(page.GetByTestId("blocked-reason")).ToContainText("host web-2's agent (instance agent-web-2) stopped responding while running the step"))
	saveScreenshot(t, page, "pipeline-agent-killed")
}
