package gantryfile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/gantryfile"
)

func env(vars ...string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, v := range vars {
			if v == name {
				return "set", true
			}
		}
		return "", false
	}
}

func TestEmptyFileIsEmptyConfiguration(t *testing.T) {
	t.Parallel()
	f, err := gantryfile.Parse("gantry.yaml", []byte("  \n"), nil)
	require.NoError(t, err)
	require.Empty(t, f.Pools)
}

func TestProblemsNameFileLineKeyAndReason(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src, want string
	}{
		{"unknown key", "pools:\n  - name: a\n    sesion: 3h\n", `gantry.yaml:3: pools[0].sesion: unknown field "sesion" (did you mean session?)`},
		{"unknown top-level key", "respositories: []\n", `unknown field "respositories" (did you mean repositories?)`},
		{"unknown key far from any", "pools:\n  - name: a\n    flavour_of_the_month: x\n", `unknown field "flavour_of_the_month"`},
		{"syntax error", "pools: [\n", "gantry.yaml:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gantryfile.Parse("gantry.yaml", []byte(tc.src), env("X"))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			if tc.name == "unknown key far from any" {
				require.NotContains(t, err.Error(), "did you mean", "no guess when nothing is close")
			}
		})
	}
}

// TestUnknownKeysAndBadValuesAtOnce: every unknown key (each with its
// line and a suggestion) and every bad value come in one answer, so one
// run of gantry config check shows everything to fix.
func TestUnknownKeysAndBadValuesAtOnce(t *testing.T) {
	t.Parallel()
	src := "pools:\n  - name: a\n    kind: slot\n    sesion: 3h\n    cleanup_timeout: soon\n  - name: b\n    kind: slot\n    notify: {emials: [x@example.com]}\nrepositorys: []\n"
	_, err := gantryfile.Parse("gantry.yaml", []byte(src), nil)
	require.Error(t, err)
	for _, want := range []string{
		`gantry.yaml:4: pools[0].sesion: unknown field "sesion" (did you mean session?)`,
		`gantry.yaml:8: pools[1].notify.emials: unknown field "emials" (did you mean emails?)`,
		`gantry.yaml:9: repositorys: unknown field "repositorys" (did you mean repositories?)`,
		`gantry.yaml:5: pools[0].cleanup_timeout: must be a positive duration`,
	} {
		require.Contains(t, err.Error(), want)
	}
}

func TestAllProblemsAtOnce(t *testing.T) {
	t.Parallel()
	_, err := gantryfile.Parse("gantry.yaml", []byte("pools:\n  - name: Bad Name\n    kind: gcp\n"), nil)
	var ge *gantryfile.Error
	require.ErrorAs(t, err, &ge)
	require.Len(t, ge.Problems, 2)
}

func TestLoadReadsTheFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "gantry.yaml")
	require.NoError(t, os.WriteFile(path, []byte(valid), 0o600))
	f, err := gantryfile.Load(path, env("POOL_PG_URL"))
	require.NoError(t, err)
	require.Len(t, f.Environments, 3)
	_, err = gantryfile.Load(filepath.Join(t.TempDir(), "missing.yaml"), nil)
	require.ErrorContains(t, err, "missing.yaml")
}
