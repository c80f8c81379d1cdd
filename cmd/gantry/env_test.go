package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/client"
	"github.com/gantryhq/gantry/internal/testdb"
)

// syncBuffer is a buffer written by one goroutine and read by another.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// gantryServer is `gantry serve` running in-process on a fresh database,
// with gantry.yaml registering postgres pools and the lease client "ci"
// (user ci@example.com), as an operator would run it.
type gantryServer struct {
	url    string
	token  string   // ci@example.com's, scopes read and write
	env    []string // a CI job's environment: GANTRY_SERVER, GANTRY_TOKEN, PATH
	client *client.Client
}

// startGantry serves pools of the given sizes until the test ends, then
// drops their databases.
func startGantry(t *testing.T, pools map[string]int) *gantryServer {
	t.Helper()
	dbURL := testdb.NewURL(t)
	suffix := strings.ToLower(rand.Text()[:8])
	var yaml, envs strings.Builder
	yaml.WriteString("clients:\n  - name: ci\n    users: [ci@example.com]\npools:\n")
	var dbs []string
	for name, size := range pools {
		fmt.Fprintf(&yaml, "  - name: %s\n    kind: postgres\n    postgres: {admin_url_env: POOL_PG_URL}\n", name)
		for i := range size {
			db := fmt.Sprintf("gtest_%s_%s_%d", suffix, name, i)
			dbs = append(dbs, db)
			fmt.Fprintf(&envs, "  - {pool: %s, database: %s}\n", name, db)
		}
	}
	yaml.WriteString("environments:\n" + envs.String())
	file := filepath.Join(t.TempDir(), "gantry.yaml")
	require.NoError(t, os.WriteFile(file, []byte(yaml.String()), 0o600))
	t.Cleanup(func() { dropDatabases(t, dbs) }) // after the server stopped

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	env := []string{"DATABASE_URL=" + dbURL, "GANTRY_SECRET_KEY=" + strings.Repeat("s", 32), "GANTRY_CONFIG=" + file,
		"GANTRY_ADDR=" + addr, "POOL_PG_URL=" + testdb.AdminURL(), "GANTRY_LOG_LEVEL=warn", "GANTRY_SHUTDOWN_GRACE=2s"}
	ctx, cancel := context.WithCancel(context.Background())
	var logs syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, env, &logs, &logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("gantry serve: %v\n%s", err, logs.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("gantry serve did not stop")
		}
	})
	base := "http://" + addr
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("gantry serve ended: %v\n%s", err, logs.String())
		default:
		}
		res, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "gantry serve never became ready")

	admin := []string{"DATABASE_URL=" + dbURL}
	_, _, err = gantry(t, admin, "admin", "user", "create", "--email", "ci@example.com")
	require.NoError(t, err)
	token, _, err := gantry(t, admin, "admin", "token", "create", "--user", "ci@example.com", "--name", "ci", "--scopes", "read,write")
	require.NoError(t, err)
	token = strings.TrimSpace(token)
	return &gantryServer{
		url: base, token: token,
		env:    []string{"GANTRY_SERVER=" + base, "GANTRY_TOKEN=" + token, "PATH=" + os.Getenv("PATH")},
		client: client.New(base, client.WithToken(token)),
	}
}

func dropDatabases(t *testing.T, dbs []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, testdb.AdminURL())
	if err != nil {
		t.Logf("dropping environment databases: %v", err)
		return
	}
	defer conn.Close(ctx)
	for _, db := range dbs {
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
	}
}

// leaseOf is the one lease requester ever held.
func (s *gantryServer) leaseOf(t *testing.T, requester string) client.Lease {
	t.Helper()
	leases, err := s.client.List(context.Background(), client.ListOptions{Requester: requester})
	require.NoError(t, err)
	require.Len(t, leases, 1, "requester %s", requester)
	return leases[0]
}

// activeLeases counts the leases still held in pool.
func (s *gantryServer) activeLeases(t *testing.T, pool string) int {
	t.Helper()
	leases, err := s.client.List(context.Background(), client.ListOptions{Pool: pool, ActiveOnly: true})
	require.NoError(t, err)
	return len(leases)
}

func requireExitCode(t *testing.T, err error, code int) {
	t.Helper()
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, code, ee.ExitCode(), "error: %v", err)
}

func TestEnvHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"env", "--help"}, {"env", "acquire", "--help"}, {"env", "release", "--help"},
		{"env", "extend", "--help"}, {"env", "exec", "--help"}, {"env", "pools", "--help"}} {
		out, _, err := gantry(t, nil, args...)
		require.NoError(t, err, args)
		require.Contains(t, out, "Usage:", args)
	}
}

func TestEnvNeedsNoServerConfiguration(t *testing.T) {
	t.Parallel()
	ci := []string{"GANTRY_SERVER=http://127.0.0.1:1", "GANTRY_TOKEN=gty_x", "GANTRY_ALLOCATION_ID=a", "GANTRY_ALLOCATION_IDS=a b", "GANTRY_ENVIRONMENT=db",
		"GANTRY_ENV_COUNT=2", "GANTRY_ENV_1_DATABASE_URL=postgres://x"}
	_, _, err := gantry(t, ci, "config", "check")
	require.ErrorContains(t, err, "no configuration file", "a CI job's gantry variables are not refused as unknown")

	_, _, err = gantry(t, []string{"GANTRY_SERVER=http://127.0.0.1:1"}, "env", "pools")
	require.ErrorContains(t, err, "no API token: set GANTRY_TOKEN")
	_, _, err = gantry(t, []string{"GANTRY_SERVER=localhost:8080", "GANTRY_TOKEN=x"}, "env", "pools")
	require.ErrorContains(t, err, `GANTRY_SERVER="localhost:8080": must be an absolute http:// or https:// URL`)
	_, _, err = gantry(t, []string{"GANTRY_TOKEN=x", "GANTRY_SECRET_KEY=short"}, "env", "acquire", "--pool", "ci", "--capability", "size")
	require.ErrorContains(t, err, `--capability "size": want key=value`, "and no server settings are checked")
	_, _, err = gantry(t, []string{"GANTRY_TOKEN=x"}, "env", "acquire", "--pool", "ci", "-o", "yaml")
	require.ErrorContains(t, err, "--output must be text, json or env")
	_, _, err = gantry(t, []string{"GANTRY_TOKEN=x"}, "env", "exec", "--pool", "ci")
	require.ErrorContains(t, err, "requires at least 1 arg")
}

func TestEnvAcquireAndRelease(t *testing.T) {
	t.Parallel()
	s := startGantry(t, map[string]int{"ci": 1})

	out, _, err := gantry(t, s.env, "env", "pools")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^ci\s+postgres\s+1\s+0\s+0\s+0\s+1\s+3h0m0s$`, out)

	exports, _, err := gantry(t, s.env, "env", "acquire", "--pool", "ci", "--requester", "acquire-test", "-o", "env")
	require.NoError(t, err)
	require.Contains(t, exports, "export DATABASE_URL='postgres://")
	require.Contains(t, exports, "export GANTRY_ENV_COUNT='1'\n")
	// The exports are sh: a job evaluates them.
	sh, err := exec.Command("sh", "-c", `eval "$1"; echo "$GANTRY_ALLOCATION_ID $PGDATABASE"`, "sh", exports).Output()
	require.NoError(t, err)
	lease := s.leaseOf(t, "acquire-test")
	require.Equal(t, lease.ID+" "+lease.Database+"\n", string(sh))

	out, _, err = gantry(t, s.env, "env", "pools", "-o", "json")
	require.NoError(t, err)
	var pools []client.Pool
	require.NoError(t, json.Unmarshal([]byte(out), &pools))
	require.Equal(t, 1, pools[0].Capacity.InUse)

	out, _, err = gantry(t, s.env, "env", "extend", lease.ID, "--by", "1h")
	require.NoError(t, err)
	require.Contains(t, out, lease.ID)
	require.Contains(t, out, lease.ExpiresAt.Add(time.Hour).UTC().Format(time.RFC3339))

	out, _, err = gantry(t, s.env, "env", "release", lease.ID, "--outcome", "success")
	require.NoError(t, err)
	require.Equal(t, "released "+lease.ID+" ("+lease.Environment+")\n", out)
	lease = s.leaseOf(t, "acquire-test")
	require.Equal(t, "success", lease.Outcome)
	require.Equal(t, "client", lease.EndedBy)

	_, _, err = gantry(t, s.env, "env", "acquire", "--pool", "nope", "--requester", "t")
	require.ErrorContains(t, err, "pool")
	require.ErrorContains(t, err, "[HTTP 400 invalid]")
	_, _, err = gantry(t, []string{"GANTRY_SERVER=" + s.url, "GANTRY_TOKEN=gty_wrong"}, "env", "pools")
	require.ErrorContains(t, err, "[HTTP 401 unauthorized]")
}

func TestEnvAcquireJSONAndWaiting(t *testing.T) {
	t.Parallel()
	s := startGantry(t, map[string]int{"pair": 2})
	out, _, err := gantry(t, s.env, "env", "acquire", "--pool", "pair", "--requester", "json-test", "--count", "2", "-o", "json")
	require.NoError(t, err)
	var a client.Allocation
	require.NoError(t, json.Unmarshal([]byte(out), &a))
	require.Len(t, a.Leases, 2)
	require.NotEmpty(t, a.Leases[1].Credentials.URL)

	// Nothing is free: one try (--wait 0), then a short wait, both refused.
	_, _, err = gantry(t, s.env, "env", "acquire", "--pool", "pair", "--requester", "t", "--wait", "0")
	require.ErrorContains(t, err, "no environment from pool pair after waiting")
	require.ErrorContains(t, err, "(1 try)")
	require.ErrorContains(t, err, "[HTTP 423 locked]")

	out, _, err = gantry(t, s.env, append([]string{"env", "release", "--outcome", "success"}, a.IDs()...)...)
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(out, "released "))
}

func TestEnvExecSucceeds(t *testing.T) {
	t.Parallel()
	s := startGantry(t, map[string]int{"ci": 1})
	stdout, stderr, err := gantry(t, s.env, "env", "exec", "--pool", "ci", "--requester", "exec-ok", "--",
		"sh", "-c", `test -n "$DATABASE_URL" && test -n "$PGPASSWORD" && echo ok`)
	require.NoError(t, err, stderr)
	require.Equal(t, "ok\n", stdout, "the command's output passes through, and nothing else")
	require.Contains(t, stderr, "gantry: leased postgres:")
	require.Contains(t, stderr, `with outcome "success"`)
	lease := s.leaseOf(t, "exec-ok")
	require.False(t, lease.Active())
	require.Equal(t, "success", lease.Outcome)
	require.Equal(t, "client", lease.EndedBy)
}

func TestEnvExecFailsWithTheCommandsStatus(t *testing.T) {
	t.Parallel()
	s := startGantry(t, map[string]int{"ci": 3}) // one for each run, none waits for a cleanup
	_, _, err := gantry(t, s.env, "env", "exec", "--pool", "ci", "--requester", "exec-3", "--", "sh", "-c", "exit 3")
	requireExitCode(t, err, 3)
	require.EqualError(t, err, "sh exited with status 3")
	require.Equal(t, "failure: exit 3", s.leaseOf(t, "exec-3").Outcome)

	// Flags after the command are the command's, even without --.
	stdout, _, err := gantry(t, s.env, "env", "exec", "--pool", "ci", "--requester", "exec-flags", "sh", "-c", `echo "$0" "$@"`, "x", "--pool", "y")
	require.NoError(t, err)
	require.Equal(t, "x --pool y\n", stdout)

	_, _, err = gantry(t, s.env, "env", "exec", "--pool", "ci", "--requester", "exec-missing", "--", "gantry-no-such-command")
	requireExitCode(t, err, 127)
	require.ErrorContains(t, err, "cannot start gantry-no-such-command")
	lease := s.leaseOf(t, "exec-missing")
	require.False(t, lease.Active(), "released although the command never started")
	require.True(t, strings.HasPrefix(lease.Outcome, "failure: cannot start: "), lease.Outcome)
	require.Zero(t, s.activeLeases(t, "ci"))
}

var pidLine = regexp.MustCompile(`pid=(\d+)`)

// waitPID waits for the command's "pid=N" line.
func waitPID(t *testing.T, out func() string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		m := pidLine.FindStringSubmatch(out())
		if m != nil {
			pid, _ = strconv.Atoi(m[1])
		}
		return m != nil
	}, 30*time.Second, 20*time.Millisecond, "the command never started")
	return pid
}

// Ctrl-C reaches exec as the cancellation of its context (main turns SIGINT
// into it).
func TestEnvExecCtrlC(t *testing.T) {
	t.Parallel()
	s := startGantry(t, map[string]int{"ci": 1, "busy": 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"env", "exec", "--pool", "ci", "--requester", "exec-ctrl-c", "--", "sh", "-c", "echo pid=$$; exec sleep 30"}, s.env, &stdout, &stderr)
	}()
	pid := waitPID(t, stdout.String)
	require.NoError(t, syscall.Kill(pid, 0), "the command runs")
	start := time.Now()
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("exec did not return after Ctrl-C")
	}
	requireExitCode(t, err, 130)
	require.Less(t, time.Since(start), 5*time.Second, "sleep was stopped, not waited for")
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the command is gone")
	lease := s.leaseOf(t, "exec-ctrl-c")
	require.False(t, lease.Active())
	require.Equal(t, "interrupted", lease.Outcome)
	require.Contains(t, stderr.String(), `with outcome "interrupted"`)

	t.Run("while waiting for an environment", func(t *testing.T) {
		held, err := s.client.Allocate(context.Background(), client.AllocateRequest{Pool: "busy", Requester: "holder"})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		var stderr syncBuffer
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"env", "exec", "--pool", "busy", "--requester", "exec-waiting", "--", "true"}, s.env, &stderr, &stderr)
		}()
		require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "nothing free; trying again") }, 10*time.Second, 20*time.Millisecond)
		cancel()
		requireExitCode(t, <-done, 130)
		require.Equal(t, 1, s.activeLeases(t, "busy"), "only the holder's")
		_, err = s.client.Release(context.Background(), held.Leases[0].ID, "")
		require.NoError(t, err)
	})
}

// A real gantry process gets real signals.
func TestEnvExecSignalsToTheProcess(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "gantry")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	s := startGantry(t, map[string]int{"ci": 2})

	for _, tc := range []struct {
		signal syscall.Signal
		code   int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(tc.signal.String(), func(t *testing.T) {
			requester := "exec-" + strconv.Itoa(int(tc.signal))
			cmd := exec.Command(bin, "env", "exec", "--pool", "ci", "--requester", requester, "--", "sh", "-c", "echo pid=$$; exec sleep 30")
			cmd.Env = s.env
			var stdout, stderr syncBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Start())
			pid := waitPID(t, stdout.String)

			require.NoError(t, cmd.Process.Signal(tc.signal))
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			select {
			case <-waited:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("gantry did not exit after %s\n%s", tc.signal, stderr.String())
			}
			require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the command is gone")
			lease := s.leaseOf(t, requester)
			require.False(t, lease.Active())
			require.Equal(t, "interrupted", lease.Outcome)
			require.Equal(t, tc.code, cmd.ProcessState.ExitCode(),
				"main must exit with the status of an error that has ExitCode() (exitError)\n%s", stderr.String())
		})
	}
}

func TestShellQuoteRoundTrips(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"", "plain", "it's", `a"b`, "$HOME `id` $(id)", "two\nlines", "back\\slash", "'"} {
		out, err := exec.Command("sh", "-c", `eval "X=$1"; printf %s "$X"`, "sh", shellQuote(v)).Output()
		require.NoError(t, err, v)
		require.Equal(t, v, string(out))
	}
}
