package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/testdb"
)

// The bounds below are for waits on conditions (a process answering, a
// process exiting, a command finishing, a job's effect appearing): each wait
// ends as soon as its condition holds, so the bounds only decide how long a
// broken test takes to fail. They are minutes, not seconds, so that a busy
// machine (every package at once, the binary built with -race, two cores)
// slows the tests down without failing them.
const (
	readyTimeout  = 2 * time.Minute // a process must answer /readyz within this
	stopTimeout   = time.Minute     // and exit within this after SIGTERM/SIGINT
	cliTimeout    = 2 * time.Minute // one `gantry admin ...` command
	apiTimeout    = time.Minute     // one API call
	conditionWait = 3 * time.Minute // work a test polls for: jobs, cleanups, runs
	secretKey     = "e2e-secret-key-0123456789abcdef-0123456789abcdef"
)

// process is one running gantry process. Its stdout is kept in memory (the
// CLI prints passwords and URLs there); its stderr, the log, goes to a file
// whose tail is logged when the test fails.
type process struct {
	name       string
	cmd        *exec.Cmd
	stdout     *lockedBuffer
	stderrPath string
	exited     chan struct{} // closed once the process has exited
	waitErr    error         // set before exited is closed
}

// startProcess runs the binary under test with args and exactly the
// environment environ. At cleanup a process still running gets SIGTERM and
// must exit cleanly (status 0) within stopTimeout.
func startProcess(t *testing.T, name string, environ []string, args ...string) *process {
	t.Helper()
	return startProcessIn(t, "", name, environ, args...)
}

// startProcessIn is startProcess in the working directory dir ("" for the
// test's own).
func startProcessIn(t *testing.T, dir, name string, environ []string, args ...string) *process {
	t.Helper()
	p := &process{name: name, stdout: &lockedBuffer{}, exited: make(chan struct{})}
	p.stderrPath = filepath.Join(t.TempDir(), name+".stderr.log")
	stderr, err := os.Create(p.stderrPath)
	require.NoError(t, err)
	defer stderr.Close() // the child has its own copy of the descriptor

	p.cmd = exec.Command(env.bin, args...)
	p.cmd.Dir = dir
	p.cmd.Env = environ
	p.cmd.Stdout = p.stdout
	p.cmd.Stderr = stderr
	p.cmd.WaitDelay = 5 * time.Second
	p.cmd.SysProcAttr = childProcAttr()
	require.NoError(t, p.cmd.Start(), "starting %s", name)
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()

	t.Cleanup(func() {
		if p.running() {
			if code, err := p.stop(syscall.SIGTERM, stopTimeout); err != nil {
				t.Errorf("%s: %v", name, err)
			} else if code != 0 {
				t.Errorf("%s exited with status %d after SIGTERM, want 0", name, code)
			}
		}
		if log := p.stderr(); strings.Contains(log, "WARNING: DATA RACE") {
			t.Errorf("%s: the race detector found a data race (see its log below)", name)
		}
		if t.Failed() {
			p.logTail(t)
		}
	})
	return p
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends sig and waits up to timeout for the process to exit, returning
// its exit status. A process that does not exit in time is killed and stop
// returns an error.
func (p *process) stop(sig syscall.Signal, timeout time.Duration) (int, error) {
	if p.running() {
		if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return -1, fmt.Errorf("sending %v: %w", sig, err)
		}
	}
	select {
	case <-p.exited:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return -1, fmt.Errorf("did not exit within %v of %v; killed it", timeout, sig)
	}
	return p.exitCode(), nil
}

// exitCode is the exit status of an exited process; -1 when a signal ended it.
func (p *process) exitCode() int {
	<-p.exited
	return p.cmd.ProcessState.ExitCode()
}

func (p *process) stderr() string {
	b, _ := os.ReadFile(p.stderrPath)
	return string(b)
}

func (p *process) logTail(t *testing.T) {
	t.Helper()
	if out := p.stdout.String(); out != "" {
		t.Logf("%s stdout:\n%s", p.name, lastLines(out, 40))
	}
	t.Logf("%s stderr (last 60 lines of %s):\n%s", p.name, p.stderrPath, lastLines(p.stderr(), 60))
}

// waitReady polls url/readyz until it answers 200. It fails the test at once
// if the process exits, and after timeout otherwise.
func (p *process) waitReady(t *testing.T, baseURL string, timeout time.Duration) {
	t.Helper()
	// Each try may take a while on a busy machine: a short per-request
	// timeout would give up on every slow answer and never see the 200.
	client := &http.Client{Timeout: 15 * time.Second}
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for {
		if !p.running() {
			p.logTail(t)
			t.Fatalf("%s exited (status %d, %v) before %s/readyz answered 200", p.name, p.exitCode(), p.waitErr, baseURL)
		}
		resp, err := client.Get(baseURL + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			p.logTail(t)
			t.Fatalf("%s: %s/readyz did not answer 200 within %v; last: %s", p.name, baseURL, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// server is one `gantry serve` on its own database and port.
type server struct {
	URL     string // http://127.0.0.1:<port>, no trailing slash
	dbURL   string
	proc    *process
	environ []string
}

// startServer starts `gantry serve` on a fresh migrated database and waits
// until it is ready. extraEnv holds KEY=VALUE settings such as
// GANTRY_LOGIN_ATTEMPTS=3. It is stopped with SIGTERM at cleanup.
func startServer(t *testing.T, extraEnv ...string) *server {
	t.Helper()
	dbURL := testdb.NewURL(t)
	addr := freeAddr(t)
	s := &server{URL: "http://" + addr, dbURL: dbURL}
	environ := processEnv(append([]string{
		"DATABASE_URL=" + dbURL,
		"GANTRY_SECRET_KEY=" + secretKey,
		"GANTRY_ADDR=" + addr,
		"GANTRY_BASE_URL=" + s.URL,
	}, extraEnv...)...)
	s.environ = environ
	s.proc = startProcess(t, "gantry-serve", environ, "serve")
	s.proc.waitReady(t, s.URL, readyTimeout)
	return s
}

// restart stops the server with SIGTERM, as a deploy does, and starts a new
// process on the same database, address and settings.
func (s *server) restart(t *testing.T) {
	t.Helper()
	code, err := s.proc.stop(syscall.SIGTERM, stopTimeout)
	require.NoError(t, err)
	require.Equal(t, 0, code, "gantry serve exits cleanly on SIGTERM")
	s.proc = startProcess(t, "gantry-serve-restarted", s.environ, "serve")
	s.proc.waitReady(t, s.URL, readyTimeout)
}

// gantry runs a CLI command against the server's database and returns its
// stdout; a failing command fails the test with its stderr.
func (s *server) gantry(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.bin, args...)
	cmd.Env = processEnv("DATABASE_URL=" + s.dbURL)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("gantry %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// user is someone who can sign in.
type user struct {
	Email    string
	Name     string
	Password string
}

// createUser creates a user with the CLI, the way an operator makes the
// first admin.
func (s *server) createUser(t *testing.T, name, email, role string) user {
	t.Helper()
	u := user{Email: email, Name: name, Password: "e2e-password-" + role + "-long-enough"}
	out := s.gantry(t, "admin", "user", "create", "--email", u.Email, "--name", u.Name, "--role", role, "--password", u.Password)
	require.Contains(t, out, "created user", "gantry admin user create printed %q", out)
	return u
}

// createToken creates an API token with the CLI and returns its secret,
// which the CLI prints alone on stdout.
func (s *server) createToken(t *testing.T, email, name, scopes string) string {
	t.Helper()
	out := strings.TrimSpace(s.gantry(t, "admin", "token", "create", "--user", email, "--name", name, "--scopes", scopes))
	require.NotEmpty(t, out, "gantry admin token create printed no secret")
	require.NotContains(t, out, "\n", "gantry admin token create should print only the secret on stdout, got %q", out)
	return out
}

// callAPI makes one JSON API call with a bearer token and returns the status
// and the body. body, when not nil, is sent as JSON.
func callAPI(t *testing.T, method, url, token string, body any) (int, []byte) {
	t.Helper()
	var reader io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		reader = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, reader)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "%s %s", method, url)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, resp.Header.Get("Content-Type"), "application/json", "%s %s answered %d with a body that is not JSON: %s", method, url, resp.StatusCode, out)
	return resp.StatusCode, out
}

// decode unmarshals an API response body, failing the test on bad JSON.
func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(body, &v), "body: %s", body)
	return v
}

// apiErrorBody is the one shape of every API error.
type apiErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// processEnv is this process's environment without any Gantry setting (a
// developer's GANTRY_* or DATABASE_URL must not leak into the process under
// test: unknown GANTRY_* names are even refused), plus settings.
//
// The server's own request deadline (GANTRY_REQUEST_TIMEOUT, 30 s by
// default) is raised to the browser's, browserWait: on a loaded machine a
// sign-in (argon2 under -race) once took 45 s and was answered 503 while the
// browser was still willing to wait. A test may set its own; the last value
// of a name wins.
func processEnv(settings ...string) []string {
	var environ []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "DATABASE_URL" || strings.HasPrefix(name, "GANTRY_") {
			continue
		}
		environ = append(environ, kv)
	}
	environ = append(environ, "GANTRY_REQUEST_TIMEOUT="+browserWait.String())
	return append(environ, settings...)
}

// freeAddr finds a TCP port on the loopback interface that nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lockedBuffer is a bytes.Buffer safe to write from the process's output
// copier while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
