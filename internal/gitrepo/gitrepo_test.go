package gitrepo_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/gitrepo"
)

// hermetic keeps the host's git configuration out of every git command the
// tests run, the fixtures' and the Cache's alike.
var hermetic = []string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}

// git runs git in dir for a fixture and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), hermetic...)
	cmd.Env = append(cmd.Env,
		"GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com",
		"GIT_COMMITTER_NAME=Ada", "GIT_COMMITTER_EMAIL=ada@example.com",
	)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// file is a file of a commit in a fixture: content and whether it is
// executable.
type file struct {
	content string
	exec    bool
}

// repo is a fixture: a working repository (work) whose branches are pushed
// to a bare repository (remote), which is what Gantry fetches from.
type repo struct {
	t      *testing.T
	work   string
	remote string
}

func newRepo(t *testing.T) *repo {
	t.Helper()
	r := &repo{t: t, work: filepath.Join(t.TempDir(), "work"), remote: filepath.Join(t.TempDir(), "remote.git")}
	git(t, "", "init", "--quiet", "--initial-branch=main", r.work)
	git(t, "", "init", "--quiet", "--bare", r.remote)
	return r
}

// commit replaces the working tree's files with files (nil content deletes)
// and commits them on the current branch.
func (r *repo) commit(msg string, files map[string]*file) string {
	r.t.Helper()
	for name, f := range files {
		p := filepath.Join(r.work, filepath.FromSlash(name))
		if f == nil {
			require.NoError(r.t, os.Remove(p))
			continue
		}
		require.NoError(r.t, os.MkdirAll(filepath.Dir(p), 0o755))
		mode := os.FileMode(0o644)
		if f.exec {
			mode = 0o755
		}
		require.NoError(r.t, os.WriteFile(p, []byte(f.content), mode))
		require.NoError(r.t, os.Chmod(p, mode))
	}
	git(r.t, r.work, "add", "--all")
	git(r.t, r.work, "commit", "--quiet", "--allow-empty", "-m", msg)
	return git(r.t, r.work, "rev-parse", "HEAD")
}

// push pushes refspecs from work to remote.
func (r *repo) push(refspecs ...string) {
	r.t.Helper()
	git(r.t, r.work, append([]string{"push", "--quiet", "--force", r.remote}, refspecs...)...)
}

func newCache(t *testing.T) *gitrepo.Cache {
	return &gitrepo.Cache{Dir: filepath.Join(t.TempDir(), "cache"), Timeout: time.Minute, Env: hermetic}
}

// infraRepo builds the repository most tests use:
//
//	main: c1 ── c3            (c3 touches the README only)
//	        \
//	feat:    c2               (also refs/pull/1/head)
type infraRepo struct {
	*repo
	c1, c2, c3 string
	c1Files    map[string]*file
	c2Files    map[string]*file
}

func newInfraRepo(t *testing.T) *infraRepo {
	t.Helper()
	r := &infraRepo{repo: newRepo(t)}
	r.c1Files = map[string]*file{
		"README.md":                       {content: "# infra\n"},
		"live/dev/vpc/terragrunt.hcl":     {content: "inputs = { cidr = \"10.0.0.0/16\" }\n"},
		"live/dev/rds/terragrunt.hcl":     {content: "dependency \"vpc\" { config_path = \"../vpc\" }\n"},
		"modules/old name/main.tf":        {content: "resource \"null_resource\" \"this\" {}\n"},
		"scripts/plan.sh":                 {content: "#!/bin/sh\nterragrunt plan\n", exec: true},
		".gitattributes":                  {content: "*.txt text eol=crlf\nversion.tf export-subst\n"},
		"notes.txt":                       {content: "line one\nline two\n"},
		"version.tf":                      {content: "# $Format:%H$\n"},
		"live/prod/global/terragrunt.hcl": {content: "# prod\n"},
	}
	r.c1 = r.commit("c1", r.c1Files)

	git(t, r.work, "checkout", "--quiet", "-b", "feat")
	r.c2Files = map[string]*file{
		"live/dev/vpc/terragrunt.hcl":     {content: "inputs = { cidr = \"10.1.0.0/16\" }\n"},
		"live/dev/rds/terragrunt.hcl":     nil,
		"live/dev/ec2 web/terragrunt.hcl": {content: "# with a space\n"},
		"live/dev/odd\nname.hcl":          {content: "# with a newline\n"},
		"live/dev/ünïcode.hcl":            {content: "# non-ASCII\n"},
		"modules/old name/main.tf":        nil,
		"modules/new name/main.tf":        {content: "resource \"null_resource\" \"this\" {}\n"},
		"scripts/plan.sh":                 {content: "#!/bin/sh\nterragrunt plan\n"}, // loses its x bit
	}
	r.c2 = r.commit("c2", r.c2Files)

	git(t, r.work, "checkout", "--quiet", "main")
	r.c3 = r.commit("c3", map[string]*file{"README.md": {content: "# infra\n\nMore.\n"}})
	r.push("main", "feat", "feat:refs/pull/1/head")
	return r
}

// filesAtC2 is what a checkout of c2 must hold.
func (r *infraRepo) filesAtC2() map[string]*file {
	want := map[string]*file{}
	for k, v := range r.c1Files {
		want[k] = v
	}
	for k, v := range r.c2Files {
		if v == nil {
			delete(want, k)
		} else {
			want[k] = v
		}
	}
	return want
}

func TestFetch(t *testing.T) {
	t.Parallel()

	t.Run("clones, then fetches new commits and prunes deleted branches", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		r := newInfraRepo(t)
		cache := newCache(t)

		m, err := cache.Fetch(ctx, r.remote)
		require.NoError(t, err)
		require.DirExists(t, m.Dir)
		require.Equal(t, filepath.Dir(m.Dir), cache.Dir)
		for ref, want := range map[string]string{"main": r.c3, "refs/heads/feat": r.c2, "refs/pull/1/head": r.c2} {
			got, err := m.ResolveRef(ctx, ref)
			require.NoError(t, err, ref)
			require.Equal(t, want, got, ref)
		}

		c4 := r.commit("c4", map[string]*file{"live/dev/vpc/extra.hcl": {content: "# new\n"}})
		r.push("main")
		git(t, r.remote, "branch", "-D", "feat")

		again, err := cache.Fetch(ctx, r.remote)
		require.NoError(t, err)
		require.Equal(t, m.Dir, again.Dir)
		got, err := again.ResolveRef(ctx, "main")
		require.NoError(t, err)
		require.Equal(t, c4, got)
		_, err = again.ResolveRef(ctx, "feat")
		require.ErrorIs(t, err, gitrepo.ErrNotFound)
	})

	t.Run("fetches a pull request ref and a commit on no ref", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		r := newInfraRepo(t)
		cache := newCache(t)
		_, err := cache.Fetch(ctx, r.remote)
		require.NoError(t, err)

		// A pull request opened after the mirror was made, and a commit no
		// ref points to any more (as GitHub still serves a head that was
		// force-pushed away).
		git(t, r.work, "checkout", "--quiet", "-b", "pr2", r.c1)
		pr2 := r.commit("pr2", map[string]*file{"live/prod/global/terragrunt.hcl": {content: "# prod 2\n"}})
		orphan := r.commit("orphan", map[string]*file{"x.tf": {content: "#\n"}})
		r.push(pr2+":refs/pull/2/head", orphan+":refs/tmp/orphan")
		git(t, r.remote, "update-ref", "-d", "refs/tmp/orphan")

		m, err := cache.Fetch(ctx, r.remote, "refs/pull/2/head", orphan)
		require.NoError(t, err)
		got, err := m.ResolveRef(ctx, "refs/pull/2/head")
		require.NoError(t, err)
		require.Equal(t, pr2, got)
		got, err = m.ResolveRef(ctx, orphan)
		require.NoError(t, err)
		require.Equal(t, orphan, got)

		_, err = cache.Fetch(ctx, r.remote, "refs/pull/9/head")
		require.ErrorIs(t, err, gitrepo.ErrNotFound)
		require.ErrorContains(t, err, "refs/pull/9/head")
		_, err = cache.Fetch(ctx, r.remote, strings.Repeat("ab", 20))
		require.ErrorIs(t, err, gitrepo.ErrNotFound)
	})

	t.Run("known commits need no network", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		r := newInfraRepo(t)
		cache := newCache(t)
		_, err := cache.Fetch(ctx, r.remote)
		require.NoError(t, err)

		require.NoError(t, os.RemoveAll(r.remote))
		m, err := cache.Fetch(ctx, r.remote, r.c1, r.c2)
		require.NoError(t, err, "every commit is in the mirror already")
		_, err = m.ResolveRef(ctx, r.c2)
		require.NoError(t, err)

		_, err = cache.Fetch(ctx, r.remote)
		require.Error(t, err, "a fetch of refs goes to the remote")
		require.ErrorContains(t, err, "git fetch")
		_, err = cache.Fetch(ctx, r.remote, "refs/heads/main")
		require.Error(t, err)
	})

	t.Run("concurrent callers share one mirror", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		r := newInfraRepo(t)
		dir := filepath.Join(t.TempDir(), "cache")
		// Two Cache values over one directory stand for two processes:
		// the flock is per open file, so goroutines contend like processes.
		caches := []*gitrepo.Cache{
			{Dir: dir, Timeout: time.Minute, Env: hermetic},
			{Dir: dir, Timeout: time.Minute, Env: hermetic},
		}
		const n = 8
		var wg sync.WaitGroup
		dirs := make([]string, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				m, err := caches[i%2].Fetch(ctx, r.remote, "refs/pull/1/head")
				if err != nil {
					errs[i] = err
					return
				}
				dirs[i] = m.Dir
				sha, err := m.ResolveRef(ctx, "refs/pull/1/head")
				if err == nil && sha != r.c2 {
					err = os.ErrInvalid
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i := range n {
			require.NoError(t, errs[i], "caller %d", i)
			require.Equal(t, dirs[0], dirs[i])
		}
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		require.Len(t, names, 2, "one mirror and its lock file, no leftover clone: %v", names)
	})

	t.Run("times out", func(t *testing.T) {
		t.Parallel()
		r := newInfraRepo(t)
		cache := &gitrepo.Cache{Dir: t.TempDir(), Timeout: time.Nanosecond, Env: hermetic}
		_, err := cache.Fetch(t.Context(), r.remote)
		require.ErrorContains(t, err, "timed out")
	})

	t.Run("honours cancellation while waiting for the lock", func(t *testing.T) {
		t.Parallel()
		r := newInfraRepo(t)
		cache := newCache(t)
		m, err := cache.Fetch(t.Context(), r.remote)
		require.NoError(t, err)
		// Hold the mirror's lock as another process would.
		unlock := holdLock(t, m.Dir)
		defer unlock()
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err = cache.Fetch(ctx, r.remote)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestMirrorNaming(t *testing.T) {
	t.Parallel()
	cache := &gitrepo.Cache{Dir: "/var/cache/gantry"}

	a, err := cache.Mirror("https://x-access-token:old-token@github.com/acme/infra.git")
	require.NoError(t, err)
	b, err := cache.Mirror("https://x-access-token:new-token@GitHub.com/acme/infra.git")
	require.NoError(t, err)
	require.Equal(t, a.Dir, b.Dir, "a rotated token keeps the mirror")
	require.NotContains(t, a.URL, "old-token")
	require.Equal(t, "/var/cache/gantry", filepath.Dir(a.Dir))

	c, err := cache.Mirror("https://github.com/acme/other.git")
	require.NoError(t, err)
	require.NotEqual(t, a.Dir, c.Dir)

	wd, err := os.Getwd()
	require.NoError(t, err)
	rel, err := cache.Mirror("testdata/../some/repo")
	require.NoError(t, err)
	abs, err := cache.Mirror(filepath.Join(wd, "some/repo"))
	require.NoError(t, err)
	require.Equal(t, abs.Dir, rel.Dir, "a relative path names the same mirror as the absolute one")
}

func TestMergeBase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newInfraRepo(t)
	m, err := newCache(t).Fetch(ctx, r.remote)
	require.NoError(t, err)

	base, err := m.MergeBase(ctx, "main", "refs/pull/1/head")
	require.NoError(t, err)
	require.Equal(t, r.c1, base)
	base, err = m.MergeBase(ctx, r.c3, r.c2)
	require.NoError(t, err)
	require.Equal(t, r.c1, base)

	git(t, r.work, "checkout", "--quiet", "--orphan", "unrelated")
	git(t, r.work, "rm", "-r", "-f", "--quiet", ".")
	r.commit("unrelated", map[string]*file{"other.txt": {content: "other\n"}})
	r.push("unrelated")
	m, err = newCache(t).Fetch(ctx, r.remote)
	require.NoError(t, err)
	_, err = m.MergeBase(ctx, "main", "unrelated")
	require.ErrorIs(t, err, gitrepo.ErrNoMergeBase)

	_, err = m.MergeBase(ctx, "main", "nope")
	require.Error(t, err)
	require.NotErrorIs(t, err, gitrepo.ErrNoMergeBase)
}

func TestChangedFiles(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newInfraRepo(t)
	m, err := newCache(t).Fetch(ctx, r.remote, "refs/pull/1/head")
	require.NoError(t, err)

	base, err := m.MergeBase(ctx, "main", "refs/pull/1/head")
	require.NoError(t, err)
	ch, err := m.ChangedFiles(ctx, base, "refs/pull/1/head")
	require.NoError(t, err)
	require.Equal(t, gitrepo.Changes{
		Modified: []string{"live/dev/vpc/terragrunt.hcl", "scripts/plan.sh"},
		Added:    []string{"live/dev/ec2 web/terragrunt.hcl", "live/dev/odd\nname.hcl", "live/dev/ünïcode.hcl"},
		Deleted:  []string{"live/dev/rds/terragrunt.hcl"},
		Renamed:  []gitrepo.Rename{{Old: "modules/old name/main.tf", New: "modules/new name/main.tf"}},
	}, ch)
	require.Equal(t, []string{
		"live/dev/ec2 web/terragrunt.hcl",
		"live/dev/odd\nname.hcl",
		"live/dev/rds/terragrunt.hcl",
		"live/dev/vpc/terragrunt.hcl",
		"live/dev/ünïcode.hcl",
		"modules/new name/main.tf",
		"modules/old name/main.tf",
		"scripts/plan.sh",
	}, ch.Paths())

	t.Run("the merge base keeps trunk's own changes out", func(t *testing.T) {
		ch, err := m.ChangedFiles(ctx, "main", r.c2)
		require.NoError(t, err)
		require.Contains(t, ch.Modified, "README.md", "main..head has c3's change reversed")
	})

	t.Run("nothing between a commit and itself", func(t *testing.T) {
		ch, err := m.ChangedFiles(ctx, r.c2, r.c2)
		require.NoError(t, err)
		require.Empty(t, ch.Paths())
	})

	t.Run("from the empty tree everything is added", func(t *testing.T) {
		ch, err := m.ChangedFiles(ctx, gitrepo.EmptyTree, r.c1)
		require.NoError(t, err)
		require.Len(t, ch.Added, len(r.c1Files))
		require.Empty(t, ch.Modified)
	})
}

// holdLock takes the lock of the mirror in mirrorDir as another process
// would, until the returned function is called.
func holdLock(t *testing.T, mirrorDir string) func() {
	t.Helper()
	f, err := os.OpenFile(strings.TrimSuffix(mirrorDir, ".git")+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	return func() { f.Close() }
}

// tree reads a checkout into files, skipping its .git file.
func tree(t *testing.T, dir string) map[string]*file {
	t.Helper()
	got := map[string]*file{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == ".git" {
			return nil
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		got[filepath.ToSlash(rel)] = &file{content: string(b), exec: info.Mode()&0o111 != 0}
		return nil
	})
	require.NoError(t, err)
	return got
}

func TestCheckout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newInfraRepo(t)
	m, err := newCache(t).Fetch(ctx, r.remote, "refs/pull/1/head")
	require.NoError(t, err)

	t.Run("holds exactly the commit", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "plans", "unit-1")
		require.NoError(t, m.Checkout(ctx, r.c2, dir))
		require.Equal(t, r.filesAtC2(), tree(t, dir),
			"the committed bytes: no CRLF from eol=crlf, no export-subst, x bits as committed")
		require.Equal(t, r.c2, git(t, dir, "rev-parse", "HEAD"), "git works inside the checkout")
		require.Empty(t, git(t, dir, "status", "--porcelain"))

		require.NoError(t, os.WriteFile(filepath.Join(dir, "tfplan"), []byte("plan"), 0o644))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, ".terraform", "providers"), 0o755))
		require.NoError(t, m.RemoveCheckout(ctx, dir))
		require.NoDirExists(t, dir)
		require.NotContains(t, git(t, m.Dir, "worktree", "list"), dir)
		require.NoError(t, m.RemoveCheckout(ctx, dir), "removing twice is fine")
	})

	t.Run("several at once, of different commits, into an existing empty directory", func(t *testing.T) {
		t.Parallel()
		var wg sync.WaitGroup
		commits := []string{r.c1, r.c2, r.c3, "main", "refs/pull/1/head", r.c1}
		dirs := make([]string, len(commits))
		errs := make([]error, len(commits))
		for i, c := range commits {
			dirs[i] = t.TempDir()
			wg.Go(func() { errs[i] = m.Checkout(ctx, c, dirs[i]) })
		}
		wg.Wait()
		for i, c := range commits {
			require.NoError(t, errs[i])
			want, err := m.ResolveRef(ctx, c)
			require.NoError(t, err)
			require.Equal(t, want, git(t, dirs[i], "rev-parse", "HEAD"))
		}
		require.Equal(t, r.c1Files, tree(t, dirs[0]))
		for _, d := range dirs {
			require.NoError(t, m.RemoveCheckout(ctx, d))
		}
	})

	t.Run("refuses a directory that is not empty", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o644))
		err := m.Checkout(ctx, r.c2, dir)
		require.ErrorIs(t, err, gitrepo.ErrInvalidPath)
		require.FileExists(t, filepath.Join(dir, "precious"))
	})

	t.Run("refuses to remove what it did not check out", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o644))
		require.Error(t, m.RemoveCheckout(ctx, dir))
		require.FileExists(t, filepath.Join(dir, "precious"))
	})

	t.Run("a commit the mirror lacks", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "x")
		err := m.Checkout(ctx, strings.Repeat("0", 40), dir)
		require.ErrorIs(t, err, gitrepo.ErrNotFound)
		require.NoDirExists(t, dir)
	})

	t.Run("a checkout directory deleted by hand does not block the path", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "again")
		require.NoError(t, m.Checkout(ctx, r.c1, dir))
		require.NoError(t, os.RemoveAll(dir))
		require.NoError(t, m.Checkout(ctx, r.c2, dir))
		require.Equal(t, r.c2, git(t, dir, "rev-parse", "HEAD"))
		require.NoError(t, m.RemoveCheckout(ctx, dir))
	})
}

func TestReadFileAt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newInfraRepo(t)
	cache := newCache(t)
	m, err := cache.Fetch(ctx, r.remote)
	require.NoError(t, err)

	for _, tc := range []struct{ commit, path, want string }{
		{r.c1, "live/dev/vpc/terragrunt.hcl", "inputs = { cidr = \"10.0.0.0/16\" }\n"},
		{"feat", "live/dev/vpc/terragrunt.hcl", "inputs = { cidr = \"10.1.0.0/16\" }\n"},
		{"feat", "live/dev/odd\nname.hcl", "# with a newline\n"},
		{"main", "version.tf", "# $Format:%H$\n"},     // export-subst not applied
		{"main", "notes.txt", "line one\nline two\n"}, // eol=crlf not applied
	} {
		got, err := m.ReadFileAt(ctx, tc.commit, tc.path)
		require.NoError(t, err, tc.path)
		require.Equal(t, tc.want, string(got), tc.path)
	}

	binary := "\x00\xff\xfe PK\x03\x04 \x00"
	git(t, r.work, "checkout", "--quiet", "main")
	c := r.commit("binary", map[string]*file{"bin/state.bin": {content: binary}})
	r.push("main")
	_, err = cache.Fetch(ctx, r.remote)
	require.NoError(t, err)
	got, err := m.ReadFileAt(ctx, c, "bin/state.bin")
	require.NoError(t, err)
	require.Equal(t, []byte(binary), got, "bytes as committed, NULs and all")

	_, err = m.ReadFileAt(ctx, r.c2, "live/dev/rds/terragrunt.hcl")
	require.ErrorIs(t, err, gitrepo.ErrNotFound, "deleted in c2")
	_, err = m.ReadFileAt(ctx, r.c1, "live/dev")
	require.ErrorContains(t, err, "directory")
	require.NotErrorIs(t, err, gitrepo.ErrNotFound)
}

func TestRefusesBadInput(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newInfraRepo(t)
	cache := newCache(t)
	m, err := cache.Fetch(ctx, r.remote)
	require.NoError(t, err)
	marker := filepath.Join(t.TempDir(), "pwned")

	t.Run("URLs", func(t *testing.T) {
		for _, u := range []string{
			"",
			"ext::sh -c touch% " + marker,
			"EXT::sh -c touch% " + marker,
			"fd::17",
			"-u" + marker,
			"--upload-pack=touch " + marker,
			"http://github.com/acme/infra.git",
			"ftp://example.com/repo.git",
			"https://",
			"https:///acme/infra.git",
			"https://github.com",
			"ssh://-oProxyCommand=touch%20" + marker + "/repo",
			"ssh://-oProxyCommand@host/repo",
			"-oProxyCommand=x:repo",
			"git@-oProxyCommand=x:repo",
			"git@host:",
			":repo",
			"file://otherhost/srv/repo.git",
			"/srv/repo\n--upload-pack=x",
		} {
			_, err := cache.Fetch(ctx, u)
			require.ErrorIs(t, err, gitrepo.ErrInvalidURL, "%q", u)
		}
		require.NoFileExists(t, marker)
	})

	t.Run("accepted URLs", func(t *testing.T) {
		for _, u := range []string{
			"https://github.com/acme/infra.git",
			"https://x-access-token:secret@github.com/acme/infra.git",
			"ssh://git@github.com:22/acme/infra.git",
			"git+ssh://git@github.com/acme/infra.git",
			"git://example.com/infra.git",
			"git@github.com:acme/infra.git",
			"github.com:acme/infra.git",
			"file:///srv/git/infra.git",
			"/srv/git/infra.git",
			"./relative/infra",
			"relative/with:colon",
		} {
			_, err := cache.Mirror(u)
			require.NoError(t, err, "%q", u)
		}
	})

	t.Run("revisions", func(t *testing.T) {
		for _, rev := range []string{
			"", "-x", "--output=" + marker, "main..feat", "main...feat", "HEAD~1", "main^",
			"main^{tree}", "a b", "x:y", "@", "@{-1}", "main@{1}", "/refs/heads/main", "refs/heads/",
			"refs//heads", ".hidden", "refs/heads/.x", "refs/heads/x.lock", "x.", "a?b", "a*b", "a[b",
			"a\\b", "a\nb", "a\x7fb", strings.Repeat("a", 2000),
		} {
			require.ErrorIs(t, gitrepo.ValidRev(rev), gitrepo.ErrInvalidRev, "%q", rev)
			_, err := m.ResolveRef(ctx, rev)
			require.ErrorIs(t, err, gitrepo.ErrInvalidRev, "%q", rev)
			_, err = m.ChangedFiles(ctx, "main", rev)
			require.ErrorIs(t, err, gitrepo.ErrInvalidRev, "%q", rev)
			_, err = m.MergeBase(ctx, rev, "main")
			require.ErrorIs(t, err, gitrepo.ErrInvalidRev, "%q", rev)
			_, err = m.ReadFileAt(ctx, rev, "README.md")
			require.ErrorIs(t, err, gitrepo.ErrInvalidRev, "%q", rev)
			require.ErrorIs(t, m.Checkout(ctx, rev, filepath.Join(t.TempDir(), "x")), gitrepo.ErrInvalidRev, "%q", rev)
		}
		for _, rev := range []string{"main", "refs/heads/main", "refs/pull/1/head", "v1.2.3", "feature/x-y_z", r.c1} {
			require.NoError(t, gitrepo.ValidRev(rev), rev)
		}
		require.NoFileExists(t, marker)
	})

	t.Run("Fetch wants full ref names", func(t *testing.T) {
		for _, ref := range []string{"main", "pull/1/head", "refs/heads/a..b", "-x"} {
			_, err := cache.Fetch(ctx, r.remote, ref)
			require.ErrorIs(t, err, gitrepo.ErrInvalidRev, "%q", ref)
		}
	})

	t.Run("paths", func(t *testing.T) {
		for _, p := range []string{"", ".", "/etc/passwd", "../x", "live/../../x", "live/./x", "live//x", "live/", "a\x00b"} {
			_, err := m.ReadFileAt(ctx, "main", p)
			require.ErrorIs(t, err, gitrepo.ErrInvalidPath, "%q", p)
		}
		require.ErrorIs(t, m.Checkout(ctx, "main", ""), gitrepo.ErrInvalidPath)
		require.ErrorIs(t, m.RemoveCheckout(ctx, "/"), gitrepo.ErrInvalidPath)
	})
}

func TestParents(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newInfraRepo(t)
	git(t, r.work, "checkout", "--quiet", "main")
	git(t, r.work, "-c", "user.name=Ada", "-c", "user.email=ada@example.com", "merge", "--quiet", "--no-ff", "-m", "merge", r.c2)
	merge := git(t, r.work, "rev-parse", "HEAD")
	r.push("main")
	m, err := newCache(t).Fetch(ctx, r.remote)
	require.NoError(t, err)

	parents, err := m.Parents(ctx, merge)
	require.NoError(t, err)
	require.Equal(t, []string{r.c3, r.c2}, parents)
	parents, err = m.Parents(ctx, r.c1)
	require.NoError(t, err)
	require.Empty(t, parents)
	_, err = m.Parents(ctx, "main^1")
	require.ErrorIs(t, err, gitrepo.ErrInvalidRev)
}
