package runner_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/runner"
)

// checkout builds a repository checkout with units, and symlinks that stay
// inside it, leave it, or lead nowhere.
func checkout(t *testing.T) (root, outside string) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	root = filepath.Join(base, "repo")
	outside = filepath.Join(base, "outside")
	for _, dir := range []string{
		filepath.Join(root, "live", "prod", "vpc"),
		filepath.Join(root, "modules", "vpc"),
		outside,
	} {
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	links := map[string]string{
		filepath.Join(root, "live", "prod", "mods"): "../../modules",          // inside, relative
		filepath.Join(root, "escape"):               outside,                  // outside, absolute
		filepath.Join(root, "live", "sneaky"):       "../../outside",          // outside, relative
		filepath.Join(root, "etc"):                  "/etc",                   // outside, system
		filepath.Join(root, "dangling"):             filepath.Join(root, "x"), // nowhere
	}
	for link, target := range links {
		require.NoError(t, os.Symlink(target, link))
	}
	return root, outside
}

func TestSafePath(t *testing.T) {
	t.Parallel()

	root, _ := checkout(t)

	ok := []struct {
		rel, want string
	}{
		{"live/prod/vpc", "live/prod/vpc"},
		{".", ""},
		{"./live/prod/vpc/", "live/prod/vpc"},
		{"live/prod/../prod/vpc", "live/prod/vpc"},
		{"live/prod/mods/vpc", "modules/vpc"},
		{"live/staging/vpc", "live/staging/vpc"}, // not there yet
	}
	for _, tt := range ok {
		t.Run("allows "+tt.rel, func(t *testing.T) {
			t.Parallel()

			got, err := runner.SafePath(root, tt.rel)
			require.NoError(t, err)
			require.Equal(t, filepath.Join(root, tt.want), got)
		})
	}

	refused := []string{
		"",
		"/etc",
		"..",
		"../outside",
		"live/../../outside",
		"escape",
		"escape/file",
		"live/sneaky",
		"etc/passwd",
		"dangling",
		"dangling/more",
	}
	for _, rel := range refused {
		t.Run("refuses "+rel, func(t *testing.T) {
			t.Parallel()

			got, err := runner.SafePath(root, rel)
			require.ErrorIs(t, err, runner.ErrUnsafePath)
			require.Empty(t, got)
		})
	}
}

func TestSafePath_RootBehindSymlink(t *testing.T) {
	t.Parallel()

	root, _ := checkout(t)
	alias := filepath.Join(t.TempDir(), "current")
	require.NoError(t, os.Symlink(root, alias))

	got, err := runner.SafePath(alias, "live/prod/vpc")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "live/prod/vpc"), got)

	_, err = runner.SafePath(alias, "escape")
	require.ErrorIs(t, err, runner.ErrUnsafePath)
}
