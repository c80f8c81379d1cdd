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

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/github/githubtest"
	"github.com/gantryhq/gantry/internal/infra/infratest"
)

// TestInfraApplyKilledMidway is the crash the hardening issue found: kill -9
// of `gantry serve` (web and workers in one process) while an apply runs,
// the apply having started a local-exec style child. The child dies with
// the process; a new process notices from the quiet heartbeat that the
// apply's worker is gone and interrupts the execution instead of applying
// it again; the execution and run pages say so, the merge lock is held and
// says why, and the apply's side effect happened once.
func TestInfraApplyKilledMidway(t *testing.T) {
	t.Parallel()
	repo, _ := infratest.Standard(t)
	dir := t.TempDir()
	effect, child := filepath.Join(dir, "effect"), filepath.Join(dir, "child")
	config := filepath.Join(t.TempDir(), "gantry.yaml")
	yaml := strings.Replace(repo.YAML("live", "INFRA_WEBHOOK_SECRET", "INFRA_GITHUB_TOKEN", []string{"ada@example.com"}, 1, 1),
		"runner: terraform\n", fmt.Sprintf(`runner: custom
    commands:
      plan: ["sh", "-c", "echo 'terraform_data.zone will be created'; touch \"$1\"", "plan", "{plan_file}"]
      apply: ["sh", "-c", "echo applied >> %[1]s; echo 'terraform_data.zone: Creating...'; sh -c 'sleep 1000 & echo $! > %[2]s.tmp; mv %[2]s.tmp %[2]s; wait' & wait", "apply", "{plan_file}"]
      destroy: ["true"]
`, effect, child), 1)
	require.NoError(t, os.WriteFile(config, []byte(yaml), 0o600))
	srv := startServer(t, "GANTRY_CONFIG="+config, "INFRA_WEBHOOK_SECRET="+webhookSecret, "INFRA_GITHUB_TOKEN=unused",
		"GANTRY_WORK_DIR="+t.TempDir(), "GANTRY_HEARTBEAT_INTERVAL=500ms", "GANTRY_API_RATE=200", "GANTRY_API_BURST=200")
	srv.createUser(t, "Ada Lovelace", "ada@example.com", "approver")
	olivia := srv.createUser(t, "Olivia Operator", "olivia@example.com", "operator")
	token := srv.createToken(t, "ada@example.com", "ada-cli", "read,vote")

	p := repo.OpenPR(5, map[string]string{infratest.DNS + "/main.tf": repo.Resource(infratest.DNS, "zone", `"dns-v5"`)})
	sha := repo.Merge(p.Branch)
	res, err := githubtest.Deliver(t.Context(), http.DefaultClient, srv.URL+"/webhooks/github", webhookSecret, "pull_request", "e2e-crash", repo.Event(p, "closed", sha))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusAccepted, res.StatusCode)

	type execution struct {
		ExecutionID string `json:"execution_id"`
		RunID       int64  `json:"run_id"`
		Status      string `json:"status"`
		Step        string `json:"step"`
		ApplyOutput string `json:"apply_output"`
	}
	var runID int64
	waitExecution := func(what string, cond func(execution) bool) execution {
		t.Helper()
		deadline := time.Now().Add(conditionWait)
		for {
			if runID == 0 {
				status, body := callAPI(t, http.MethodGet, srv.URL+"/api/v1/infra/runs?repository=live", token, nil)
				require.Equal(t, http.StatusOK, status, string(body))
				runs := decode[struct {
					Runs []struct {
						ID int64 `json:"id"`
					} `json:"runs"`
				}](t, body).Runs
				if len(runs) == 1 {
					runID = runs[0].ID
				}
			}
			if runID != 0 {
				status, body := callAPI(t, http.MethodGet, fmt.Sprintf("%s/api/v1/infra/runs/%d", srv.URL, runID), token, nil)
				require.Equal(t, http.StatusOK, status, string(body))
				xs := decode[struct {
					Executions []execution `json:"executions"`
				}](t, body).Executions
				if len(xs) == 1 {
					status, body = callAPI(t, http.MethodGet, srv.URL+"/api/v1/infra/executions/"+xs[0].ExecutionID, token, nil)
					require.Equal(t, http.StatusOK, status, string(body))
					if x := decode[execution](t, body); cond(x) {
						return x
					}
				}
			}
			require.True(t, time.Now().Before(deadline), "gave up waiting for %s", what)
			time.Sleep(200 * time.Millisecond)
		}
	}
	x := waitExecution("the vote", func(x execution) bool { return x.Step == "voting" })
	status, body := callAPI(t, http.MethodPost, srv.URL+"/api/v1/infra/executions/"+x.ExecutionID+"/votes", token, map[string]string{"decision": "approve"})
	require.Equal(t, http.StatusOK, status, string(body))

	// The apply runs: its side effect is done and its child runs on.
	var childPID int
	deadline := time.Now().Add(conditionWait)
	for {
		if data, err := os.ReadFile(child); err == nil {
			childPID, err = strconv.Atoi(strings.TrimSpace(string(data)))
			require.NoError(t, err)
			break
		}
		require.True(t, time.Now().Before(deadline), "the apply did not start its child")
		time.Sleep(50 * time.Millisecond)
	}

	srv.kill(t)
	deadline = time.Now().Add(conditionWait)
	for processRuns(childPID) {
		require.True(t, time.Now().Before(deadline), "the apply's child %d outlived gantry's kill -9", childPID)
		time.Sleep(50 * time.Millisecond)
	}
	srv.start(t)

	x = waitExecution("the interruption", func(x execution) bool { return x.Step == "interrupted" })
	require.Equal(t, "running", x.Status, "neither failed nor succeeded: the run waits")
	require.Contains(t, x.ApplyOutput, "terraform_data.zone: Creating...", "the partial output is kept")
	data, err := os.ReadFile(effect)
	require.NoError(t, err)
	require.Equal(t, "applied\n", string(data), "the apply ran once")

	page := newPage(t)
	signIn(t, page, srv.URL, olivia)
	open(t, page, srv.URL+"/infra/executions/"+x.ExecutionID, http.StatusOK)
	require.NoError(t, expect.Locator(page.GetByTestId("interrupted-explanation")).ToContainText("will not apply it again on its own"))
	require.NoError(t, expect.Locator(page.GetByTestId("interrupted-form")).ToBeVisible())
	saveScreenshot(t, page, "infra-execution-interrupted")

	open(t, page, fmt.Sprintf("%s/infra/runs/%d", srv.URL, x.RunID), http.StatusOK)
	require.NoError(t, expect.Locator(page.GetByTestId("lock-why")).ToContainText("an operator chooses on its page"))
	saveScreenshot(t, page, "infra-run-interrupted")
}

// processRuns reports whether pid runs (a zombie does not).
func processRuns(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// kill ends the server with kill -9: no grace, no cleanup.
func (s *server) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, s.proc.cmd.Process.Signal(syscall.SIGKILL))
	<-s.proc.exited
}

// start starts a new process on the server's database, address and
// settings, after kill.
func (s *server) start(t *testing.T) {
	t.Helper()
	s.proc = startProcess(t, "gantry-serve-after-kill", s.environ, "serve")
	s.proc.waitReady(t, s.URL, readyTimeout)
}
