// Package gitrepo keeps bare mirrors of git repositories in a cache directory
// and answers questions about them: merge bases, changed files, file contents
// at a commit, checkouts of a commit into a directory of their own.
//
// Everything is done by the git CLI through internal/runner: argument vectors,
// never a shell; a minimal environment with GIT_TERMINAL_PROMPT=0 and
// GIT_ALLOW_PROTOCOL=file:https:ssh:git; a timeout per command. Every URL,
// revision and path that reaches git is validated first, so that nothing a
// webhook or a configuration file carries can turn into a git option or a
// transport helper (ext::, fd::).
//
// The cache may be shared by goroutines and by processes on one machine: each
// mirror has a lock file (flock) that serialises what changes it (clone,
// fetch, adding and removing checkouts). Reads take no lock; git keeps them
// consistent while a fetch runs.
//
// Checkouts and ReadFileAt give the committed bytes: the mirror's
// info/attributes switches off smudge filters (Git LFS), end-of-line
// conversion, ident and export-subst. Submodules are not checked out.
package gitrepo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gantryhq/gantry/internal/runner"
)

// DefaultTimeout bounds one git command when Cache.Timeout is zero.
const DefaultTimeout = 10 * time.Minute

// EmptyTree is the id of git's empty tree (SHA-1 repositories). ChangedFiles
// from EmptyTree lists every file of head as added.
const EmptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

var (
	// ErrInvalidURL is wrapped by every error about a repository URL that is
	// refused.
	ErrInvalidURL = errors.New("invalid repository URL")
	// ErrInvalidRev is wrapped by every error about a revision (commit id or
	// ref name) that is refused.
	ErrInvalidRev = errors.New("invalid revision")
	// ErrInvalidPath is wrapped by every error about a path in a repository
	// or a checkout directory that is refused.
	ErrInvalidPath = errors.New("invalid path")
	// ErrNotFound is wrapped when a ref, commit or file does not exist.
	ErrNotFound = errors.New("not found")
	// ErrNoMergeBase is returned by MergeBase for unrelated histories.
	ErrNoMergeBase = errors.New("no merge base")
)

// Cache is a directory of bare mirrors, one per repository URL. The zero
// Timeout means DefaultTimeout. A Cache is safe for concurrent use, and
// several processes may share its Dir.
type Cache struct {
	// Dir holds the mirrors; it is created if missing.
	Dir string
	// Timeout bounds each git command.
	Timeout time.Duration
	// Env is added to every git command's environment, after Gantry's own
	// settings, so that it can override them: for example
	// GIT_SSH_COMMAND=ssh -i /run/secrets/deploy_key -o BatchMode=yes, or
	// GIT_CONFIG_GLOBAL=/dev/null to ignore the user's ~/.gitconfig.
	Env []string
}

// Mirror is the bare mirror of one repository in a Cache. Its methods are
// safe for concurrent use.
type Mirror struct {
	// URL is the repository URL with any password replaced by "xxxxx", fit
	// for logs and error messages.
	URL string
	// Dir is the bare repository's directory.
	Dir string

	rawURL   string
	lockPath string
	timeout  time.Duration
	env      []string
	secrets  []string
}

// Mirror returns the mirror of rawURL in the cache without touching the
// disk or the network; use Fetch to create or update it. Local paths are
// made absolute.
func (c *Cache) Mirror(rawURL string) (*Mirror, error) {
	if c.Dir == "" {
		return nil, errors.New("gitrepo: Cache.Dir is empty")
	}
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return nil, fmt.Errorf("resolving cache directory: %w", err)
	}
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(u.key))
	name := hex.EncodeToString(sum[:16])
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	env := []string{
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ALLOW_PROTOCOL=" + allowedProtocols,
		// Error messages are matched on nowhere, but read by people in
		// English whatever the server's locale.
		"LC_ALL=C",
		// ssh must not wait for a passphrase or a host key confirmation
		// on a terminal Gantry might have.
		"GIT_SSH_COMMAND=ssh -o BatchMode=yes",
	}
	env = append(env, c.Env...)
	var secrets []string
	if u.password != "" {
		secrets = append(secrets, u.password, url.QueryEscape(u.password))
	}
	return &Mirror{
		URL:      u.redacted,
		Dir:      filepath.Join(dir, name+".git"),
		rawURL:   u.git,
		lockPath: filepath.Join(dir, name+".lock"),
		timeout:  timeout,
		env:      env,
		secrets:  secrets,
	}, nil
}

// Fetch brings the mirror of rawURL up to date and returns it: a
// `git clone --mirror` the first time, `git fetch --prune origin` after that,
// so every ref of the repository (branches, tags, GitHub's refs/pull/N/head)
// is there as the remote has it.
//
// refs names what the caller needs: full ref names (refs/pull/7/head) and
// commit ids. A ref that the general fetch did not bring is fetched by name
// and a commit that is missing by id (GitHub and git's protocol v2 serve any
// commit of the repository); Fetch fails with ErrNotFound if one is still
// missing. When refs are all commit ids that the mirror already has, Fetch
// does not touch the network: commits do not change.
//
// Concurrent calls for the same repository, from goroutines or processes
// sharing the cache directory, wait for each other.
func (c *Cache) Fetch(ctx context.Context, rawURL string, refs ...string) (*Mirror, error) {
	m, err := c.Mirror(rawURL)
	if err != nil {
		return nil, err
	}
	onlyCommits := len(refs) > 0
	for _, r := range refs {
		switch {
		case isCommitID(r):
		case strings.HasPrefix(r, "refs/") && validRefName(r) == nil:
			onlyCommits = false
		default:
			return nil, fmt.Errorf("%w: %q: Fetch wants a full ref name (refs/…) or a commit id", ErrInvalidRev, r)
		}
	}
	if err := os.MkdirAll(filepath.Dir(m.Dir), 0o700); err != nil {
		return nil, fmt.Errorf("creating git cache directory: %w", err)
	}
	unlock, err := lockFile(ctx, m.lockPath)
	if err != nil {
		return nil, fmt.Errorf("locking mirror of %s: %w", m.URL, err)
	}
	defer unlock()

	exists, err := isDir(m.Dir)
	if err != nil {
		return nil, err
	}
	switch {
	case !exists:
		if err := m.clone(ctx); err != nil {
			return nil, err
		}
	case onlyCommits && m.haveAll(ctx, refs):
		return m, nil
	default:
		if err := m.update(ctx); err != nil {
			return nil, err
		}
	}
	for _, r := range refs {
		if m.have(ctx, r) {
			continue
		}
		// A commit fetched by id is stored but gets no ref: a ref of ours
		// would be deleted by the next fetch --prune of a mirror anyway.
		refspec := r
		if !isCommitID(r) {
			refspec = "+" + r + ":" + r
		}
		_, ferr := m.git(ctx, "", "fetch", "--quiet", "--no-write-fetch-head", "origin", refspec)
		if !m.have(ctx, r) {
			if ferr != nil {
				return nil, fmt.Errorf("fetching %s from %s: %w: %w", r, m.URL, ErrNotFound, ferr)
			}
			return nil, fmt.Errorf("fetching %s from %s: %w", r, m.URL, ErrNotFound)
		}
	}
	return m, nil
}

// clone creates the mirror: cloned next to its final place and renamed into
// it, so that a clone cut short leaves no half mirror behind.
func (m *Mirror) clone(ctx context.Context) error {
	stale, _ := filepath.Glob(m.Dir + ".tmp-*")
	for _, s := range stale {
		if err := os.RemoveAll(s); err != nil {
			return fmt.Errorf("removing an unfinished clone: %w", err)
		}
	}
	tmp, err := os.MkdirTemp(filepath.Dir(m.Dir), filepath.Base(m.Dir)+".tmp-*")
	if err != nil {
		return fmt.Errorf("creating clone directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	if _, err := m.run(ctx, "", "clone", "--mirror", "--quiet", "--", m.rawURL, tmp); err != nil {
		return fmt.Errorf("cloning %s: %w", m.URL, err)
	}
	if err := os.MkdirAll(filepath.Join(tmp, "info"), 0o755); err != nil {
		return fmt.Errorf("preparing mirror: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "info", "attributes"), []byte(mirrorAttributes), 0o644); err != nil {
		return fmt.Errorf("preparing mirror: %w", err)
	}
	if err := os.Rename(tmp, m.Dir); err != nil {
		return fmt.Errorf("moving clone into place: %w", err)
	}
	return nil
}

// mirrorAttributes make checkouts and archives give the committed bytes.
const mirrorAttributes = "# Written by Gantry: checkouts get the bytes as committed.\n" +
	"* -text -eol -filter -ident -working-tree-encoding -export-subst -export-ignore\n"

// update fetches every ref of the remote and forgets checkouts whose
// directories are gone.
func (m *Mirror) update(ctx context.Context) error {
	// A token in the URL may have been rotated since the clone: the mirror
	// is found by the URL without its password, and fetches with the new one.
	current, err := m.git(ctx, "", "config", "--get", "remote.origin.url")
	if err != nil || strings.TrimSpace(current) != m.rawURL {
		if _, err := m.git(ctx, "", "config", "remote.origin.url", m.rawURL); err != nil {
			return fmt.Errorf("setting the URL of %s: %w", m.URL, err)
		}
	}
	if _, err := m.git(ctx, "", "fetch", "--prune", "--quiet", "origin"); err != nil {
		return fmt.Errorf("fetching %s: %w", m.URL, err)
	}
	if _, err := m.git(ctx, "", "worktree", "prune"); err != nil {
		return fmt.Errorf("pruning checkouts of %s: %w", m.URL, err)
	}
	return nil
}

// have reports whether the mirror has ref (a full ref name) or commit.
func (m *Mirror) have(ctx context.Context, ref string) bool {
	_, err := m.ResolveRef(ctx, ref)
	return err == nil
}

func (m *Mirror) haveAll(ctx context.Context, refs []string) bool {
	for _, r := range refs {
		if !m.have(ctx, r) {
			return false
		}
	}
	return true
}

// ResolveRef returns the commit id that ref (a branch, tag or full ref name,
// or a commit id) points to, peeling tags. A ref or commit the mirror does
// not have is ErrNotFound.
func (m *Mirror) ResolveRef(ctx context.Context, ref string) (string, error) {
	if err := ValidRev(ref); err != nil {
		return "", err
	}
	out, err := m.git(ctx, "", "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	var ee *exitError
	if errors.As(err, &ee) && ee.code == 1 {
		return "", fmt.Errorf("resolving %s in %s: %w", ref, m.URL, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("resolving %s in %s: %w", ref, m.URL, err)
	}
	sha := strings.TrimSpace(out)
	if !isCommitID(sha) {
		return "", fmt.Errorf("resolving %s in %s: git answered %q", ref, m.URL, sha)
	}
	return sha, nil
}

// Parents returns the parents of commit (a ref or commit id): none for a
// root commit, two for a merge.
func (m *Mirror) Parents(ctx context.Context, commit string) ([]string, error) {
	if err := ValidRev(commit); err != nil {
		return nil, err
	}
	out, err := m.git(ctx, "", "rev-list", "--parents", "-n", "1", "--end-of-options", commit)
	if err != nil {
		return nil, fmt.Errorf("parents of %s: %w", commit, err)
	}
	fields := strings.Fields(out)
	if len(fields) == 0 || !isCommitID(fields[0]) {
		return nil, fmt.Errorf("parents of %s: git answered %q", commit, out)
	}
	return fields[1:], nil
}

// MergeBase returns the best common ancestor of a and b (refs or commit
// ids), or ErrNoMergeBase when their histories are unrelated.
func (m *Mirror) MergeBase(ctx context.Context, a, b string) (string, error) {
	for _, r := range []string{a, b} {
		if err := ValidRev(r); err != nil {
			return "", err
		}
	}
	out, err := m.git(ctx, "", "merge-base", "--end-of-options", a, b)
	var ee *exitError
	if errors.As(err, &ee) && ee.code == 1 && strings.TrimSpace(ee.stderr) == "" {
		return "", fmt.Errorf("merge base of %s and %s: %w", a, b, ErrNoMergeBase)
	}
	if err != nil {
		return "", fmt.Errorf("merge base of %s and %s: %w", a, b, err)
	}
	sha := strings.TrimSpace(out)
	if !isCommitID(sha) {
		return "", fmt.Errorf("merge base of %s and %s: git answered %q", a, b, sha)
	}
	return sha, nil
}

// isDir reports whether path is an existing directory.
func isDir(path string) (bool, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	}
	return fi.IsDir(), nil
}

// gitConfig is passed to every git command: hooks never run (not even one a
// user's global core.hooksPath names), and automatic gc runs in the
// foreground, under the mirror's lock and the command's timeout, instead of
// detaching into a process nobody supervises.
var gitConfig = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "gc.autoDetach=false",
	"-c", "maintenance.autoDetach=false",
	"-c", "advice.detachedHead=false",
}

// git runs a git command against the mirror (with --git-dir) in dir.
func (m *Mirror) git(ctx context.Context, dir string, args ...string) (string, error) {
	return m.run(ctx, dir, append([]string{"--git-dir=" + m.Dir}, args...)...)
}

// run runs git with args in dir and returns its standard output.
func (m *Mirror) run(ctx context.Context, dir string, args ...string) (string, error) {
	argv := append([]string{"git"}, gitConfig...)
	argv = append(argv, args...)
	var stdout, stderr strings.Builder
	sink := runner.SinkFunc(func(_ context.Context, c runner.Chunk) error {
		if c.Stream == runner.StreamStdout {
			stdout.WriteString(c.Text)
		} else if stderr.Len() < maxStderr {
			stderr.WriteString(c.Text)
		}
		return nil
	})
	cmd := runner.Command{Argv: argv, Dir: dir, Env: m.env, Timeout: m.timeout, Secrets: m.secrets}
	res, err := runner.Run(ctx, cmd, sink)
	sub := subcommand(args)
	if err != nil {
		return "", fmt.Errorf("git %s: %w", sub, err)
	}
	if res.TimedOut {
		return "", fmt.Errorf("git %s: timed out after %s", sub, m.timeout)
	}
	if !res.Success() {
		return stdout.String(), &exitError{sub: sub, code: res.ExitCode, signal: res.Signal, stderr: stderr.String()}
	}
	return stdout.String(), nil
}

// maxStderr caps the standard error kept for an error message.
const maxStderr = 8 << 10

// exitError is a git command that ran and failed.
type exitError struct {
	sub    string
	code   int
	signal string
	stderr string
}

func (e *exitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if len(msg) > 2000 {
		msg = "…" + msg[len(msg)-2000:]
	}
	status := fmt.Sprintf("exit status %d", e.code)
	if e.signal != "" {
		status = "killed by signal " + e.signal
	}
	if msg == "" {
		return fmt.Sprintf("git %s: %s", e.sub, status)
	}
	return fmt.Sprintf("git %s: %s (%s)", e.sub, msg, status)
}

// subcommand names the git subcommand in args, for messages.
func subcommand(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return "?"
}
