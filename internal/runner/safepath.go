package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrUnsafePath is wrapped by SafePath's errors for a path that is absolute
// or leads outside its root.
var ErrUnsafePath = errors.New("path leads outside the root")

// SafePath joins rel, a path relative to a checkout (a Terragrunt unit's
// directory, a module's plugin, …), to root and returns it with symlinks
// resolved. It refuses absolute paths, ".." escapes and symlinks that resolve
// outside root. A path that does not exist yet is allowed; its longest
// existing ancestor is what is checked. "." is root itself.
//
// The check is made on the file system as it is now: a checkout that an
// attacker can change between SafePath and the use of its result is not
// protected. Use the returned path, not the joined one, so what was checked
// is what is used.
func SafePath(root, rel string) (string, error) {
	switch {
	case rel == "":
		return "", fmt.Errorf("%w: empty path", ErrUnsafePath)
	case strings.ContainsRune(rel, 0):
		return "", fmt.Errorf("%w: %q contains a NUL byte", ErrUnsafePath, rel)
	case filepath.IsAbs(rel):
		return "", fmt.Errorf("%w: %q is absolute", ErrUnsafePath, rel)
	case !filepath.IsLocal(rel):
		return "", fmt.Errorf("%w: %q climbs out with ..", ErrUnsafePath, rel)
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("resolving root %s: %w", root, err)
	}
	realRoot, err := filepath.EvalSymlinks(absRoot)
	if err != nil {
		return "", fmt.Errorf("resolving root %s: %w", root, err)
	}

	// Resolve the longest existing prefix; keep the missing rest as it is.
	existing := filepath.Join(realRoot, filepath.Clean(rel))
	var missing []string
	var real string
	for {
		real, err = filepath.EvalSymlinks(existing)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || existing == realRoot {
			return "", fmt.Errorf("resolving %s: %w", rel, err)
		}
		// A dangling symlink is as bad as one that escapes: where it would
		// lead cannot be checked.
		if fi, lerr := os.Lstat(existing); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return "", fmt.Errorf("%w: %q passes through a dangling symlink", ErrUnsafePath, rel)
		}
		missing = append([]string{filepath.Base(existing)}, missing...)
		existing = filepath.Dir(existing)
	}
	if !within(realRoot, real) {
		return "", fmt.Errorf("%w: %q resolves to %s", ErrUnsafePath, rel, real)
	}
	return filepath.Join(append([]string{real}, missing...)...), nil
}

// within reports whether path is root or lies under it; both are clean and
// absolute.
func within(root, path string) bool {
	r, err := filepath.Rel(root, path)
	return err == nil && filepath.IsLocal(r)
}
