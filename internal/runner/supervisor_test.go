package runner_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/runner"
)

// helperEnv makes the test binary a stand-in for a Gantry worker: it runs
// the script in the variable through Run and waits (TestMain).
const helperEnv = "GANTRY_RUNNER_TEST_WORKER"

func TestMain(m *testing.M) {
	if script := os.Getenv(helperEnv); script != "" {
		_, err := runner.Run(context.Background(), runner.Command{Argv: sh(script), Timeout: time.Hour}, nil)
		fmt.Fprintln(os.Stderr, "the command ended:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// treeScript starts a process tree and writes its pids to file, one a line,
// once all are running: the shell itself, a grandchild in the command's
// process group (`sh -c 'sleep & wait'`, as terraform's local-exec), and a
// grandchild that left the group with setsid.
func treeScript(file string) string {
	return fmt.Sprintf(`
sh -c 'sleep 1000 & echo $! > %[1]s.a; wait' &
setsid sleep 1000 & echo $! > %[1]s.b
until [ -s %[1]s.a ]; do sleep 0.01; done
{ echo $$; cat %[1]s.a %[1]s.b; } > %[1]s.tmp && mv %[1]s.tmp %[1]s
wait`, file)
}

// waitForPIDs waits for treeScript's pid file and returns its pids.
func waitForPIDs(t *testing.T, file string) []int {
	t.Helper()
	var pids []int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		pids = nil
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			require.NoError(t, err)
			pids = append(pids, pid)
		}
		return true
	}, time.Minute, 20*time.Millisecond, "the process tree did not start")
	require.Len(t, pids, 3)
	for _, pid := range pids {
		require.True(t, alive(pid), "process %d is not running", pid)
	}
	return pids
}

// requireAllDead waits, generously, until none of pids runs.
func requireAllDead(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		require.Eventually(t, func() bool { return !alive(pid) }, time.Minute, 20*time.Millisecond,
			"process %d outlived its command", pid)
	}
}

func TestRun_CancelStopsTheWholeTree(t *testing.T) {
	t.Parallel()

	file := filepath.Join(t.TempDir(), "pids")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := runner.Run(ctx, runner.Command{Argv: sh(treeScript(file)), Timeout: time.Hour}, nil)
		done <- err
	}()
	pids := waitForPIDs(t, file)
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after the cancel")
	}
	// Run returns once the tree is gone, the setsid one included.
	for _, pid := range pids {
		require.False(t, alive(pid), "process %d outlived Run", pid)
	}
}

func TestRun_StopsWhatLeftTheGroupAfterExit(t *testing.T) {
	t.Parallel()

	// The shell exits once its grandchild has left the group (setsid);
	// that one holds stdout open.
	file := filepath.Join(t.TempDir(), "pid")
	res, _, err := run(t, t.Context(), runner.Command{Argv: sh(fmt.Sprintf(
		`setsid sh -c 'echo $$ > %[1]s.tmp; mv %[1]s.tmp %[1]s; exec sleep 1000' & until [ -s %[1]s ]; do sleep 0.01; done; cat %[1]s`, file))})
	require.NoError(t, err)
	require.True(t, res.Success())
	require.Less(t, res.Duration, 8*time.Second)
	require.False(t, alive(firstPID(t, res.Output)), "a process that left the group outlived Run")
}

// The worker dies (kill -9) while its command runs: the supervisor notices
// and stops every process of the command's tree, which would otherwise run
// on as orphans.
func TestRun_WorkerKilledStopsTheWholeTree(t *testing.T) {
	t.Parallel()

	file := filepath.Join(t.TempDir(), "pids")
	worker := exec.Command(os.Args[0], "-test.run=^$")
	worker.Env = append(os.Environ(), helperEnv+"="+treeScript(file))
	worker.Stderr = os.Stderr
	require.NoError(t, worker.Start())
	t.Cleanup(func() { _ = worker.Process.Kill() })

	pids := waitForPIDs(t, file)
	supervisor := parentOf(t, pids[0])
	require.NotEqual(t, worker.Process.Pid, supervisor, "the command runs under a supervisor, not the worker")

	require.NoError(t, worker.Process.Signal(syscall.SIGKILL))
	_ = worker.Wait()
	requireAllDead(t, append(pids, supervisor))
}

// parentOf reads a process's parent pid from /proc.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	ppid, err := strconv.Atoi(fields[1])
	require.NoError(t, err)
	return ppid
}

// BenchmarkRun_true is what running a command costs, the supervisor's
// start included; BenchmarkExec_true is the floor: os/exec alone.
func BenchmarkRun_true(b *testing.B) {
	for b.Loop() {
		if _, err := runner.Run(b.Context(), runner.Command{Argv: []string{"true"}, Timeout: time.Minute}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExec_true(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
