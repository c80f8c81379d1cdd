package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// devFirstReadyTimeout allows for initdb on the first `gantry dev`.
const devFirstReadyTimeout = 60 * time.Second

// TestDevKilledAndRestarted: `gantry dev` without DATABASE_URL runs its own
// PostgreSQL in GANTRY_DATA_DIR. Killed outright, it loses nothing: started
// again on the same directory it carries on with the same data, and Ctrl-C
// then stops it and its database cleanly.
func TestDevKilledAndRestarted(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	// As root, PostgreSQL runs as the postgres user, who must be able to
	// reach the directory; t.TempDir's parent is private to us.
	for _, dir := range []string{filepath.Dir(dataDir), dataDir} {
		require.NoError(t, os.Chmod(dir, 0o755))
	}
	pgDir := filepath.Join(dataDir, "postgres")
	t.Cleanup(func() { stopPrivatePostgres(t, pgDir) }) // runs after the processes' cleanups

	addr := freeAddr(t)
	baseURL := "http://" + addr
	environ := processEnv("GANTRY_DATA_DIR="+dataDir, "GANTRY_ADDR="+addr, "GANTRY_BASE_URL="+baseURL)

	// First run: a new cluster, migrated, with a first admin whose password
	// is printed once.
	first := startProcess(t, "gantry-dev-1", environ, "dev")
	first.waitReady(t, baseURL, devFirstReadyTimeout)
	out := waitForOutput(t, first, "Gantry is running at "+baseURL)
	m := regexp.MustCompile(`(?m)^\s*email:\s*(\S+)\s*\n\s*password:\s*(\S+)\s*$`).FindStringSubmatch(out)
	require.NotNil(t, m, "the first run prints the first admin's email and password; stdout:\n%s", out)
	admin := user{Email: m[1], Name: "Admin", Password: m[2]}
	page := newPage(t)
	signIn(t, page, baseURL, admin)
	pid, running := postmaster(pgDir)
	require.True(t, running, "the private PostgreSQL runs while gantry dev does (postmaster.pid: %d)", pid)

	// Killed: it gets no chance to stop its database.
	code, err := first.stop(syscall.SIGKILL, stopTimeout)
	require.NoError(t, err)
	require.Equal(t, -1, code, "killed by a signal")
	pid, running = postmaster(pgDir)
	t.Logf("after SIGKILL: private PostgreSQL pid %d still running: %v", pid, running)

	// Second run on the same directory adopts (or restarts) the database.
	second := startProcess(t, "gantry-dev-2", environ, "dev")
	second.waitReady(t, baseURL, readyTimeout)
	out = waitForOutput(t, second, "Gantry is running at "+baseURL)
	require.NotContains(t, out, "password:", "no new admin password on a restart: the data was kept")
	require.NotContains(t, out, "First admin user created")
	for _, line := range strings.Split(second.stderr(), "\n") {
		if strings.Contains(line, "adopting") || strings.Contains(line, "stale") {
			t.Logf("second run: %s", line)
		}
	}

	// The session from before the kill is still valid, and the same
	// password still signs in.
	open(t, page, baseURL+"/", 200)
	require.NoError(t, expect.Locator(page.GetByTestId("current-user")).ToContainText(admin.Name), "the session survives the restart")
	signIn(t, newPage(t), baseURL, admin)

	// Ctrl-C stops gantry and, with it, the private database.
	code, err = second.stop(syscall.SIGINT, stopTimeout)
	require.NoError(t, err)
	require.Equal(t, 0, code, "gantry dev exits 0 on Ctrl-C")
	pid, running = postmaster(pgDir)
	require.False(t, running, "gantry dev left its PostgreSQL (pid %d) running after Ctrl-C", pid)
}

// waitForOutput waits until the process has printed want on stdout, and
// returns all of stdout.
func waitForOutput(t *testing.T, p *process, want string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		out := p.stdout.String()
		if strings.Contains(out, want) {
			return out
		}
		if time.Now().After(deadline) {
			p.logTail(t)
			t.Fatalf("%s did not print %q", p.name, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// postmaster reports the pid in dir/postmaster.pid and whether a postgres
// process with that pid is alive.
func postmaster(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return pid, err == nil && strings.Contains(string(cmdline), "postgres")
}

// stopPrivatePostgres stops a PostgreSQL still running in dir, whatever
// happened in the test, so that no server outlives it.
func stopPrivatePostgres(t *testing.T, dir string) {
	t.Helper()
	pid, running := postmaster(dir)
	if !running {
		return
	}
	pgCtl, err := findPgCtl()
	if err != nil {
		t.Errorf("PostgreSQL pid %d is still running in %s and cannot be stopped: %v", pid, dir, err)
		return
	}
	args := []string{pgCtl, "-D", dir, "stop", "-m", "immediate", "-w", "-t", "30"}
	if os.Geteuid() == 0 { // postgres refuses to be run by root
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Errorf("stopping the PostgreSQL left in %s: %s: %v\n%s", dir, strings.Join(args, " "), err, out)
		return
	}
	if t.Failed() {
		t.Logf("stopped the PostgreSQL (pid %d) left running in %s", pid, dir)
	}
}

// findPgCtl finds pg_ctl on PATH or in Debian's versioned directories,
// newest first.
func findPgCtl() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return p, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	slices.SortFunc(found, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(a))))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(b))))
		return vb - va
	})
	if len(found) == 0 {
		return "", fmt.Errorf("pg_ctl is neither on PATH nor in /usr/lib/postgresql/*/bin")
	}
	return found[0], nil
}
