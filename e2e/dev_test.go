package e2e

import (
	"context"
	"errors"
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

// devFirstReadyTimeout allows for initdb on the first `gantry dev` (and, for
// --demo, loading the demo) on a busy machine.
const devFirstReadyTimeout = 3 * time.Minute

// outputWait bounds the wait for a line a process prints once it is ready.
const outputWait = time.Minute

// TestDevKilledAndRestarted: `gantry dev` without DATABASE_URL runs its own
// PostgreSQL in GANTRY_DATA_DIR. Killed outright, alone or together with its
// database, it loses nothing: started again on the same directory it carries
// on with the same data, and Ctrl-C then stops it and its database cleanly.
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
	startDev := func(t *testing.T, name string, timeout time.Duration) (*process, string) {
		t.Helper()
		p := startProcess(t, name, environ, "dev")
		p.waitReady(t, baseURL, timeout)
		return p, waitForOutput(t, p, "Gantry is running at "+baseURL)
	}
	kill := func(t *testing.T, p *process) {
		t.Helper()
		code, err := p.stop(syscall.SIGKILL, stopTimeout)
		require.NoError(t, err)
		require.Equal(t, -1, code, "killed by a signal")
	}

	// First run: a new cluster, migrated, with a first admin whose password
	// is printed once.
	first, out := startDev(t, "gantry-dev-1", devFirstReadyTimeout)
	m := regexp.MustCompile(`(?m)^\s*email:\s*(\S+)\s*\n\s*password:\s*(\S+)\s*$`).FindStringSubmatch(out)
	require.NotNil(t, m, "the first run prints the first admin's email and password; stdout:\n%s", out)
	admin := user{Email: m[1], Name: "Admin", Password: m[2]}
	page := newPage(t)
	signIn(t, page, baseURL, admin)
	pid, running := postmaster(pgDir)
	require.True(t, running, "the private PostgreSQL runs while gantry dev does (postmaster.pid: %d)", pid)

	// requireDataKept: a restart that printed out made no new admin, the
	// session from the first run is still valid, and the same password
	// still signs in.
	requireDataKept := func(t *testing.T, out string) {
		t.Helper()
		require.NotContains(t, out, "password:", "no new admin password on a restart: the data was kept")
		require.NotContains(t, out, "First admin user created")
		open(t, page, baseURL+"/", 200)
		require.NoError(t, expect.Locator(page.GetByTestId("current-user")).ToContainText(admin.Name), "the session survives the restart")
		signIn(t, newPage(t), baseURL, admin)
	}

	kill(t, first)
	ok := t.Run("gantry killed: the database it left running is adopted", func(t *testing.T) {
		pid, running := postmaster(pgDir)
		require.True(t, running, "killing gantry dev leaves its PostgreSQL running")
		second, out := startDev(t, "gantry-dev-2", readyTimeout)
		again, running := postmaster(pgDir)
		require.True(t, running)
		require.Equal(t, pid, again, "the running PostgreSQL is adopted, not replaced")
		requireDataKept(t, out)
		kill(t, second)
	})
	if !ok {
		return
	}

	t.Run("gantry and its database killed: the stale postmaster.pid is handled", func(t *testing.T) {
		// As after a power cut: the server dies without removing its pid file.
		pid, running := postmaster(pgDir)
		require.True(t, running)
		procs := append(childrenOf(pid), pid)
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		waitGone(t, procs)
		stale, running := postmaster(pgDir)
		require.Equal(t, pid, stale, "postmaster.pid is left behind")
		require.False(t, running)

		third, out := startDev(t, "gantry-dev-3", readyTimeout)
		fresh, running := postmaster(pgDir)
		require.True(t, running, "gantry dev starts its PostgreSQL again")
		require.NotEqual(t, pid, fresh)
		requireDataKept(t, out)

		// Ctrl-C stops gantry and, with it, the private database.
		code, err := third.stop(syscall.SIGINT, stopTimeout)
		require.NoError(t, err)
		require.Equal(t, 0, code, "gantry dev exits 0 on Ctrl-C")
		pid, running = postmaster(pgDir)
		require.False(t, running, "gantry dev left its PostgreSQL (pid %d) running after Ctrl-C", pid)
	})
}

// waitGone waits until the processes have exited and been reaped: a killed
// postmaster's backends notice and leave within moments, and PostgreSQL
// counts even a zombie as the owner of its socket lock file.
func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(stopTimeout)
	for {
		var left []int
		for _, pid := range pids {
			if exists(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v of the killed PostgreSQL did not exit within %v", left, stopTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exists reports whether there is a process pid, zombies included.
func exists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// childrenOf lists the live processes whose parent is pid (Linux only:
// elsewhere it finds none).
func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var children []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 2 || fields[0] == "Z" || fields[1] != strconv.Itoa(pid) {
			continue
		}
		if child, err := strconv.Atoi(filepath.Base(filepath.Dir(path))); err == nil {
			children = append(children, child)
		}
	}
	return children
}

// waitForOutput waits until the process has printed want on stdout, and
// returns all of stdout.
func waitForOutput(t *testing.T, p *process, want string) string {
	t.Helper()
	deadline := time.Now().Add(outputWait)
	for {
		out := p.stdout.String()
		if strings.Contains(out, want) {
			return out
		}
		if time.Now().After(deadline) {
			p.logTail(t)
			t.Fatalf("%s did not print %q within %v", p.name, want, outputWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// postmaster reports the pid in dir/postmaster.pid and whether a postgres
// process with that pid is alive (a zombie is not).
func postmaster(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 || !exists(pid) {
		return pid, false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if errors.Is(err, os.ErrNotExist) {
		_, procErr := os.Stat("/proc/self")
		return pid, procErr != nil // no /proc at all (macOS): trust kill(pid, 0)
	}
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
