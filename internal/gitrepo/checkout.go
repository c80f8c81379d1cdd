package gitrepo

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Checkout puts commit (a ref or a commit id, resolved first) into dir as a
// detached worktree of the mirror: the commit's files exactly, and a .git
// file, so that git (and Terragrunt's get_repo_root()) work inside. dir must
// not exist or be empty; its parents are created. Remove it with
// RemoveCheckout, which also unregisters it from the mirror.
func (m *Mirror) Checkout(ctx context.Context, commit, dir string) error {
	sha, err := m.ResolveRef(ctx, commit)
	if err != nil {
		return fmt.Errorf("checking out %s: %w", commit, err)
	}
	abs, err := checkoutDir(dir)
	if err != nil {
		return err
	}
	if entries, err := os.ReadDir(abs); err == nil && len(entries) > 0 {
		return fmt.Errorf("%w: checkout directory %s is not empty", ErrInvalidPath, abs)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("checking out %s: %w", commit, err)
	}

	unlock, err := lockFile(ctx, m.lockPath)
	if err != nil {
		return fmt.Errorf("locking mirror of %s: %w", m.URL, err)
	}
	defer unlock()
	// A checkout directory deleted without RemoveCheckout leaves a
	// registration that would make a new one at the same path fail.
	if _, err := m.git(ctx, "", "worktree", "prune"); err != nil {
		return fmt.Errorf("pruning checkouts of %s: %w", m.URL, err)
	}
	if _, err := m.git(ctx, "", "worktree", "add", "--detach", "--", abs, sha); err != nil {
		_ = m.removeWorktree(context.WithoutCancel(ctx), abs)
		return fmt.Errorf("checking out %s into %s: %w", commit, abs, err)
	}
	return nil
}

// RemoveCheckout deletes a directory made by Checkout, with whatever was
// written into it since, and unregisters it from the mirror. A directory
// that is already gone is not an error; one that is not a checkout of this
// mirror is refused and left alone.
func (m *Mirror) RemoveCheckout(ctx context.Context, dir string) error {
	abs, err := checkoutDir(dir)
	if err != nil {
		return err
	}
	unlock, err := lockFile(ctx, m.lockPath)
	if err != nil {
		return fmt.Errorf("locking mirror of %s: %w", m.URL, err)
	}
	defer unlock()
	return m.removeWorktree(ctx, abs)
}

// removeWorktree does RemoveCheckout's work under the mirror's lock.
func (m *Mirror) removeWorktree(ctx context.Context, abs string) error {
	_, rmErr := m.git(ctx, "", "worktree", "remove", "--force", "--force", "--", abs)
	exists, err := isDir(abs)
	if err != nil {
		return fmt.Errorf("removing checkout %s: %w", abs, err)
	}
	if exists {
		if rmErr == nil {
			rmErr = errors.New("the directory is still there")
		}
		return fmt.Errorf("removing checkout %s: %w", abs, rmErr)
	}
	if _, err := m.git(ctx, "", "worktree", "prune"); err != nil {
		return fmt.Errorf("pruning checkouts of %s: %w", m.URL, err)
	}
	return nil
}

// checkoutDir validates and absolutises a checkout directory.
func checkoutDir(dir string) (string, error) {
	switch {
	case dir == "":
		return "", fmt.Errorf("%w: empty checkout directory", ErrInvalidPath)
	case strings.ContainsRune(dir, 0) || strings.IndexFunc(dir, isControl) >= 0:
		return "", fmt.Errorf("%w: checkout directory %q contains a control character", ErrInvalidPath, dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidPath, err)
	}
	if abs == "/" {
		return "", fmt.Errorf("%w: checkout directory is /", ErrInvalidPath)
	}
	return abs, nil
}

// MaxFileSize bounds what ReadFileAt reads.
const MaxFileSize = 64 << 20

// ReadFileAt returns the content of the file at path (relative to the
// repository root, slash-separated) in commit (a ref or a commit id), byte
// for byte as committed. A path that does not exist there is ErrNotFound; a
// directory, symlink or submodule is an error.
func (m *Mirror) ReadFileAt(ctx context.Context, commit, path string) ([]byte, error) {
	if err := ValidRev(commit); err != nil {
		return nil, err
	}
	if err := validPath(path); err != nil {
		return nil, err
	}
	if _, err := m.git(ctx, "", "rev-parse", "--verify", "--quiet", "--end-of-options", commit+":"+path); err != nil {
		var ee *exitError
		if errors.As(err, &ee) && ee.code == 1 {
			return nil, fmt.Errorf("reading %s at %s: %w", path, commit, ErrNotFound)
		}
		return nil, fmt.Errorf("reading %s at %s: %w", path, commit, err)
	}
	// git archive, because the runner's output stream is text: it carries
	// no NUL bytes and no invalid UTF-8, and a file may hold both.
	tmp, err := os.MkdirTemp("", "gantry-read-*")
	if err != nil {
		return nil, fmt.Errorf("creating temporary directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	archive := filepath.Join(tmp, "file.tar")
	if _, err := m.run(ctx, "", "--git-dir="+m.Dir, "--literal-pathspecs", "archive", "--format=tar",
		"--output="+archive, "--end-of-options", commit, path); err != nil {
		return nil, fmt.Errorf("reading %s at %s: %w", path, commit, err)
	}
	f, err := os.Open(archive)
	if err != nil {
		return nil, fmt.Errorf("reading %s at %s: %w", path, commit, err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading %s at %s: not a file (a directory or a submodule)", path, commit)
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s at %s: %w", path, commit, err)
		}
		if strings.TrimSuffix(h.Name, "/") != path {
			continue
		}
		switch h.Typeflag {
		case tar.TypeReg:
		case tar.TypeSymlink:
			return nil, fmt.Errorf("reading %s at %s: a symbolic link (to %s)", path, commit, h.Linkname)
		case tar.TypeDir:
			return nil, fmt.Errorf("reading %s at %s: a directory", path, commit)
		default:
			return nil, fmt.Errorf("reading %s at %s: not a regular file", path, commit)
		}
		if h.Size > MaxFileSize {
			return nil, fmt.Errorf("reading %s at %s: %d bytes, more than %d", path, commit, h.Size, MaxFileSize)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("reading %s at %s: %w", path, commit, err)
		}
		return data, nil
	}
}
