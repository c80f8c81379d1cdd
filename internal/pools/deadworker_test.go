package pools_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

func TestMain(m *testing.M) {
	servertest.RunWorkerProcessIfAsked()
	os.Exit(m.Run())
}

// TestDeadWorkerCleanupRunsAgain: kill -9 of the worker process in the
// middle of a cleanup command. The command's processes die with it, the
// sweep notices from the quiet heartbeat (not River's rescue, hours later),
// and the cleanup runs again on a live worker, as a cleanup interrupted by
// a worker's stop does; the environment ends available, the log and the
// cleanup output say what happened.
func TestDeadWorkerCleanupRunsAgain(t *testing.T) {
	t.Parallel()
	s := servertest.NewWith(t, servertest.Options{NoWeb: true, Env: []string{"GANTRY_HEARTBEAT_INTERVAL=500ms"}})
	h := &harness{Server: s, db: s.DB, svc: s.Pools, webhook: s.Webhook, mail: s.Mail}

	// The first run of the cleanup starts a child that runs on, and waits.
	dir := t.TempDir()
	script := filepath.Join(dir, "cleanup.sh")
	require.NoError(t, os.WriteFile(script, []byte(fmt.Sprintf(`#!/bin/sh
echo run >> %[1]s/runs
if [ "$(wc -l < %[1]s/runs)" -eq 1 ]; then
  sh -c 'sleep 1000 & echo $! > %[1]s/child.tmp; mv %[1]s/child.tmp %[1]s/child; wait' &
  echo "dropping leftovers..."
  wait
fi
echo cleaned
`, dir)), 0o755))
	h.applyPools(t, pgPool{Name: "slow", Size: 1, Cleanup: "[" + script + "]"})
	worker := h.StartWorkerProcess(t)

	leases, err := h.lease("slow", "t", 1)
	require.NoError(t, err)
	key := leases[0].Environment.Key
	h.release(t, leases[0], "success")

	var child int
	servertest.WaitFor(t, func() (bool, string) {
		data, err := os.ReadFile(filepath.Join(dir, "child"))
		if err != nil {
			return false, "the cleanup has not started its child"
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(data)))
		require.NoError(t, err)
		return true, ""
	})
	require.NoError(t, worker.Process.Signal(syscall.SIGKILL))
	_ = worker.Wait()
	servertest.WaitFor(t, func() (bool, string) {
		return !processAlive(child), fmt.Sprintf("the cleanup's child %d outlived its worker", child)
	})
	env := h.WaitEnvironment(t, key, models.EnvCleaning)
	require.Contains(t, env.CleanupOutput, "dropping leftovers...")

	h.startWorkers(t)
	servertest.WaitFor(t, func() (bool, string) {
		require.NoError(t, h.svc.HandOnDeadCleanups(context.Background()))
		env, err := models.EnvironmentByID(context.Background(), h.db.Bun, env.ID)
		require.NoError(t, err)
		return env.Status == models.EnvAvailable, "environment is " + env.Status
	})
	runs, err := os.ReadFile(filepath.Join(dir, "runs"))
	require.NoError(t, err)
	require.Equal(t, "run\nrun\n", string(runs), "the cleanup ran again, once")
	require.Contains(t, h.events(t, "environment:"+key), pools.EventCleanupRequeued)
	after, err := models.EnvironmentByID(context.Background(), h.db.Bun, env.ID)
	require.NoError(t, err)
	require.Contains(t, after.CleanupOutput, "no heartbeat since")
	require.Contains(t, after.CleanupOutput, "cleaned")
}

// processAlive reports whether pid runs (a zombie does not).
func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}
