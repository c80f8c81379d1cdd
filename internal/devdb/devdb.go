// Package devdb runs a private PostgreSQL cluster for `gantry dev`, from the
// PostgreSQL binaries already on the machine. The cluster lives in a directory
// that is kept between runs and listens only on a Unix socket inside it.
package devdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a private PostgreSQL data directory and the server running on it.
type Cluster struct {
	Dir    string // data directory; also holds the socket
	binDir string
	cred   *syscall.Credential // set when we run as root: postgres refuses uid 0
	log    func(format string, args ...any)
}

// ErrNoBinaries is returned when no PostgreSQL server binaries can be found.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries (initdb, pg_ctl) found: install them with `apt-get install postgresql` (Debian/Ubuntu), `brew install postgresql@16` (macOS) or set DATABASE_URL to an existing server")

// New prepares a cluster in dir without touching it.
func New(dir string, logf func(format string, args ...any)) (*Cluster, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", dir, err)
	}
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: abs, binDir: bin, log: logf}
	if os.Geteuid() == 0 {
		cred, err := postgresCredential()
		if err != nil {
			return nil, err
		}
		c.cred = cred
	}
	return c, nil
}

// URL is the connection URL for the cluster's postgres database over the socket.
func (c *Cluster) URL(database string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/" + database}
	u.RawQuery = url.Values{"host": {c.Dir}, "sslmode": {"disable"}}.Encode()
	return u.String()
}

// Start initialises the cluster if needed and starts its server. A server
// left running by a previous process that was killed is adopted as it is; a
// stale postmaster.pid whose process is gone is removed first.
func (c *Cluster) Start(ctx context.Context) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", c.Dir, err)
	}
	if err := c.ensureOwner(); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		c.log("initialising a private PostgreSQL cluster in %s", c.Dir)
		if out, err := c.run(ctx, "initdb", "-D", c.Dir, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-instructions"); err != nil {
			return fmt.Errorf("initdb: %w\n%s", err, out)
		}
	}
	if c.running() {
		c.log("adopting the PostgreSQL server already running in %s", c.Dir)
		return nil
	}
	c.removeStalePID()
	opts := fmt.Sprintf("-k %s -c listen_addresses='' -c max_connections=200 -c fsync=on", c.Dir)
	logFile := filepath.Join(c.Dir, "server.log")
	if out, err := c.run(ctx, "pg_ctl", "-D", c.Dir, "-l", logFile, "-o", opts, "-w", "-t", "60", "start"); err != nil {
		tail, _ := os.ReadFile(logFile)
		return fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, lastLines(tail, 15))
	}
	return nil
}

// Stop shuts the server down, letting it finish its checkpoint.
func (c *Cluster) Stop(ctx context.Context) error {
	if !c.running() {
		return nil
	}
	if out, err := c.run(ctx, "pg_ctl", "-D", c.Dir, "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// running reports whether postmaster.pid names a live postgres process.
func (c *Cluster) running() bool {
	pid, ok := c.pid()
	if !ok {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		// No /proc (macOS): fall back to signalling it.
		return syscall.Kill(pid, 0) == nil
	}
	// The pid may have been reused by an unrelated process after a reboot.
	return bytes.Contains(cmdline, []byte("postgres"))
}

func (c *Cluster) pid() (int, bool) {
	b, err := os.ReadFile(filepath.Join(c.Dir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	return pid, err == nil && pid > 0
}

func (c *Cluster) removeStalePID() {
	path := filepath.Join(c.Dir, "postmaster.pid")
	if _, err := os.Stat(path); err == nil {
		c.log("removing stale %s left by a process that is gone", path)
		_ = os.Remove(path)
	}
}

func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, name), args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	// Own process group: Ctrl-C in the terminal reaches gantry, which then
	// stops the server in order, instead of reaching the server directly.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.cred != nil {
		cmd.SysProcAttr.Credential = c.cred
		cmd.Env = append(cmd.Env, "HOME="+c.Dir)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// ensureOwner hands the data directory to the postgres OS user when we are
// root, and checks that user can reach it through every parent directory.
func (c *Cluster) ensureOwner() error {
	if c.cred == nil {
		return nil
	}
	err := filepath.Walk(c.Dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(c.cred.Uid), int(c.cred.Gid))
	})
	if err != nil {
		return fmt.Errorf("handing %s to the postgres user: %w", c.Dir, err)
	}
	for dir := filepath.Dir(c.Dir); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("checking %s: %w", dir, err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm()&0o001 == 0 && st.Uid != c.cred.Uid {
			return fmt.Errorf("the postgres user cannot reach %s because %s is not searchable by others (mode %v); set GANTRY_DATA_DIR to a directory outside it, or run `chmod o+x %s`", c.Dir, dir, fi.Mode().Perm(), dir)
		}
		if dir == "/" {
			return nil
		}
	}
}

func postgresCredential() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, PostgreSQL must run as another user and there is no `postgres` user: install PostgreSQL from your distribution's packages or run gantry as an ordinary user")
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// findBinDir looks on PATH first, then in the usual package locations, and
// prefers the newest version found there.
func findBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	var candidates []string
	for _, pattern := range []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/opt/homebrew/opt/postgresql@*/bin", "/usr/local/opt/postgresql@*/bin"} {
		m, _ := filepath.Glob(pattern)
		candidates = append(candidates, m...)
	}
	sort.Slice(candidates, func(i, j int) bool { return versionOf(candidates[i]) > versionOf(candidates[j]) })
	for _, dir := range candidates {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

func versionOf(binDir string) int {
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, filepath.Base(filepath.Dir(binDir)))
	n, _ := strconv.Atoi(digits)
	return n
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// CreateDatabase creates database name in the cluster unless it exists.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connecting to the private database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("looking for database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("creating database %s: %w", name, err)
	}
	return nil
}
