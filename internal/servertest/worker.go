package servertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/app"
	"github.com/gantryhq/gantry/internal/config"
	"github.com/gantryhq/gantry/jobs"
)

// A worker process is the test binary started again as `gantry worker`
// over a test's database, so that a test can kill it (kill -9) where a
// worker inside the test process could only be stopped politely. The
// variables carry what the process needs; they are not GANTRY_… because
// config.Load refuses variables it does not know.
const (
	workerDatabaseEnv = "SERVERTEST_WORKER_DATABASE_URL"
	workerConfigEnv   = "SERVERTEST_WORKER_CONFIG" // the test's extra GANTRY_… variables, one a line
	workerDirEnv      = "SERVERTEST_WORKER_DIR"
)

// RunWorkerProcessIfAsked makes this process a worker process when it was
// started as one (StartWorkerProcess): it works jobs until killed, and
// never returns. A test package that starts worker processes calls it
// first in its TestMain.
func RunWorkerProcessIfAsked() {
	url := os.Getenv(workerDatabaseEnv)
	if url == "" {
		return
	}
	err := runWorkerProcess(url)
	fmt.Fprintln(os.Stderr, "worker process:", err)
	os.Exit(1)
}

func runWorkerProcess(url string) error {
	ctx := context.Background()
	env := append([]string{"DATABASE_URL=" + url, "GANTRY_WORK_DIR=" + os.Getenv(workerDirEnv)}, baseConfig...)
	if extra := os.Getenv(workerConfigEnv); extra != "" {
		env = append(env, strings.Split(extra, "\n")...)
	}
	cfg, err := config.Load(env, nil)
	if err != nil {
		return err
	}
	a, err := app.Open(ctx, app.Options{Config: cfg, Logger: testLogger(), Getenv: testGetenv})
	if err != nil {
		return err
	}
	client, err := a.RiverClient(jobs.ClientOptions{Work: true, Concurrency: 4, SkipPeriodic: true, FetchPollInterval: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	select {}
}

// StartWorkerProcess starts a worker process on s's database, with s's
// configuration, working every area's jobs (not the sweeps: tests call
// them) until the test ends or the test kills it. env overrides variables
// of the process's environment (PATH, to put a command in the way).
func (s *Server) StartWorkerProcess(t testing.TB, env ...string) *exec.Cmd {
	t.Helper()
	w := exec.Command(os.Args[0], "-test.run=^$")
	w.Env = append(os.Environ(), workerDatabaseEnv+"="+s.DB.Pool.Config().ConnString(),
		workerConfigEnv+"="+strings.Join(s.env, "\n"), workerDirEnv+"="+t.TempDir())
	w.Env = append(w.Env, env...) // the last of duplicates counts
	w.Stderr = os.Stderr
	require.NoError(t, w.Start())
	t.Cleanup(func() {
		_ = w.Process.Kill()
		_ = w.Wait()
	})
	return w
}
