package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
	require.NoError(t, expect.Locator(page.GetByTestId("field-apply-started")).ToContainText("UTC"))
	saveScreenshot(t, page, "infra-execution-interrupted")

	open(t, page, fmt.Sprintf("%s/infra/runs/%d", srv.URL, x.RunID), http.StatusOK)
	require.NoError(t, expect.Locator(page.GetByTestId("lock-why")).ToContainText("an operator chooses on its page"))
	saveScreenshot(t, page, "infra-run-interrupted")
}

// TestAllocationsSurviveAKill: kill -9 of `gantry serve` while CI clients
// lease and give back environments as fast as they can. Every lease a
// client was told of (200) is recorded, every release it was told of is
// recorded, nothing is half-done (an environment is in use exactly when an
// allocation holds it), and after the restart the clients carry on: what
// was leased is given back and the pool is whole again.
func TestAllocationsSurviveAKill(t *testing.T) {
	t.Parallel()
	var yaml strings.Builder
	yaml.WriteString("clients:\n  - name: ci\n    users: [ci@example.com]\npools:\n  - name: seats\n    kind: slot\nenvironments:\n")
	const seats = 12
	for i := range seats {
		fmt.Fprintf(&yaml, "  - {pool: seats, name: seat-%d}\n", i)
	}
	config := filepath.Join(t.TempDir(), "gantry.yaml")
	require.NoError(t, os.WriteFile(config, []byte(yaml.String()), 0o600))
	srv := startServer(t, "GANTRY_CONFIG="+config, "GANTRY_API_RATE=1000", "GANTRY_API_BURST=1000")
	srv.createUser(t, "CI", "ci@example.com", "viewer")
	token := srv.createToken(t, "ci@example.com", "e2e-ci", "read,write")

	// Clients lease and release until the server dies under them; each
	// keeps what it was told.
	var mu sync.Mutex
	leased, released := map[string]bool{}, map[string]bool{}
	call := func(ctx context.Context, method, url string, body any) (int, []byte, error) {
		b, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(b))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		return resp.StatusCode, out, err
	}
	ctx, stop := context.WithCancel(t.Context())
	var clients sync.WaitGroup
	for c := range 6 {
		clients.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				status, out, err := call(ctx, http.MethodPost, srv.URL+"/api/v1/allocations",
					map[string]string{"pool": "seats", "requester": fmt.Sprintf("suite-%d-%d", c, n)})
				if err != nil || status != http.StatusOK {
					time.Sleep(10 * time.Millisecond) // the pool is full, or the server is gone
					continue
				}
				var res struct {
					Allocations []lease `json:"allocations"`
				}
				if json.Unmarshal(out, &res) != nil || len(res.Allocations) != 1 {
					continue
				}
				id := res.Allocations[0].ID
				mu.Lock()
				leased[id] = true
				mu.Unlock()
				if status, _, err := call(ctx, http.MethodDelete, srv.URL+"/api/v1/allocations/"+id, map[string]string{"outcome": "success"}); err == nil && status == http.StatusOK {
					mu.Lock()
					released[id] = true
					mu.Unlock()
				}
			}
		})
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(conditionWait)
		for !cond() {
			require.True(t, time.Now().Before(deadline), "gave up waiting for %s", what)
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("some traffic", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(released) >= 30
	})
	srv.kill(t)
	stop()
	clients.Wait()

	db, err := pgx.Connect(t.Context(), srv.dbURL)
	require.NoError(t, err)
	defer db.Close(context.Background())
	rows, err := db.Query(t.Context(), "SELECT id::text, ended_at IS NOT NULL FROM allocations")
	require.NoError(t, err)
	ended := map[string]bool{}
	for rows.Next() {
		var id string
		var done bool
		require.NoError(t, rows.Scan(&id, &done))
		ended[id] = done
	}
	require.NoError(t, rows.Err())
	for id := range leased {
		_, ok := ended[id]
		require.True(t, ok, "allocation %s was answered 200 and is not recorded", id)
	}
	for id := range released {
		require.True(t, ended[id], "allocation %s was released (200) and is still open", id)
	}
	var mismatched int
	require.NoError(t, db.QueryRow(t.Context(), `SELECT count(*) FROM environments AS e
		WHERE (e.status = 'in_use') <> EXISTS (SELECT 1 FROM allocations AS a WHERE a.environment_id = e.id AND a.ended_at IS NULL)`).Scan(&mismatched))
	require.Zero(t, mismatched, "an environment is in use exactly when an open allocation holds it")

	// After the restart the open leases are given back, and the pool is whole.
	srv.start(t)
	for id, done := range ended {
		if !done {
			status, out := callAPI(t, http.MethodDelete, srv.URL+"/api/v1/allocations/"+id, token, map[string]string{"outcome": "success"})
			require.Equal(t, http.StatusOK, status, string(out))
		}
	}
	waitFor("every seat available", func() bool {
		var available int
		require.NoError(t, db.QueryRow(t.Context(), "SELECT count(*) FROM environments WHERE status = 'available'").Scan(&available))
		return available == seats
	})
	t.Logf("%d leases and %d releases answered before the kill; %d allocations recorded", len(leased), len(released), len(ended))
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
