package config_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/config"
)

func TestDefaults(t *testing.T) {
	t.Parallel()
	c, err := config.Load(nil, nil)
	require.NoError(t, err)
	require.Equal(t, ":8080", c.Addr)
	require.Equal(t, "http://localhost:8080", c.BaseURL.String())
	require.Equal(t, 12*time.Hour, c.SessionTTL)
	require.False(t, c.SecureCookies())
	require.ErrorContains(t, c.RequireServerSettings(), "DATABASE_URL")
}

func TestFlagsOverrideEnvironment(t *testing.T) {
	t.Parallel()
	c, err := config.Load([]string{"GANTRY_ADDR=:9000", "GANTRY_BASE_URL=https://gantry.example.com/"}, map[string]string{"GANTRY_ADDR": "127.0.0.1:7000"})
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7000", c.Addr)
	require.Equal(t, "https://gantry.example.com", c.BaseURL.String())
	require.True(t, c.SecureCookies())
}

func TestInvalidValuesNameTheVariable(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"GANTRY_ADDR=8080":                      "GANTRY_ADDR",
		"GANTRY_BASE_URL=localhost":             "GANTRY_BASE_URL",
		"GANTRY_SECRET_KEY=short":               "GANTRY_SECRET_KEY",
		"GANTRY_LOG_LEVEL=loud":                 "GANTRY_LOG_LEVEL",
		"GANTRY_SESSION_TTL=forever":            "GANTRY_SESSION_TTL",
		"GANTRY_WORKERS=0":                      "GANTRY_WORKERS",
		"DATABASE_URL=mysql://x/y":              "DATABASE_URL",
		"GANTRY_CONFIG=/does/not/exist":         "GANTRY_CONFIG",
		"GANTRY_API_RATE=-1":                    "GANTRY_API_RATE",
		"GANTRY_DAEMONS_ECS_CLUSTERS=Fleet,web": "GANTRY_DAEMONS_ECS_CLUSTERS",
		"GANTRY_DAEMONS_ECS_ENDPOINT=ecs":       "GANTRY_DAEMONS_ECS_ENDPOINT",
	}
	for kv, name := range cases {
		t.Run(kv, func(t *testing.T) {
			_, err := config.Load([]string{kv}, nil)
			require.ErrorContains(t, err, name)
		})
	}
}

func TestDaemonsECSClusters(t *testing.T) {
	t.Parallel()
	c, err := config.Load([]string{"GANTRY_DAEMONS_ECS_CLUSTERS= fleet,gpu-a,,fleet ", "GANTRY_DAEMONS_ECS_REGION=eu-west-1"}, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"fleet", "gpu-a"}, c.DaemonsECSClusters)
	require.Equal(t, "eu-west-1", c.DaemonsECSRegion)
	c, err = config.Load(nil, nil)
	require.NoError(t, err)
	require.Empty(t, c.DaemonsECSClusters)
}

func TestUnknownVariableSuggestsTheKnownOne(t *testing.T) {
	t.Parallel()
	_, err := config.Load([]string{"GANTRY_ADR=:8080", "PATH=/bin", "GANTRY_TEST_DATABASE_URL=x"}, nil)
	require.ErrorContains(t, err, "GANTRY_ADR: unknown variable (did you mean GANTRY_ADDR?)")
}

func TestAllProblemsAreReportedAtOnce(t *testing.T) {
	t.Parallel()
	_, err := config.Load([]string{"GANTRY_ADDR=x", "GANTRY_WORKERS=none"}, nil)
	require.ErrorContains(t, err, "GANTRY_ADDR")
	require.ErrorContains(t, err, "GANTRY_WORKERS")
}

func TestDevSecretSurvivesRestarts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c1, err := config.Load([]string{"GANTRY_DATA_DIR=" + dir}, nil)
	require.NoError(t, err)
	require.NoError(t, c1.EnsureDevSecret())
	c2, err := config.Load([]string{"GANTRY_DATA_DIR=" + dir}, nil)
	require.NoError(t, err)
	require.NoError(t, c2.EnsureDevSecret())
	require.Equal(t, c1.SecretKey, c2.SecretKey)
	require.GreaterOrEqual(t, len(c1.SecretKey), 32)
	fi, err := os.Stat(filepath.Join(dir, "secret-key"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// TestEveryVariableIsDocumented keeps docs/configuration.md in step with
// Vars: an operator reads the table, not the code.
func TestEveryVariableIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	for _, v := range config.Vars {
		require.Contains(t, string(doc), "| `"+v.Name+"` |", "docs/configuration.md has no row for %s", v.Name)
	}
}

// TestWorkDirIsAbsolute: commands run in their unit's directory, so the
// work directory (where plan files go) is absolute even when it was given,
// or defaulted, relative to Gantry's working directory.
func TestWorkDirIsAbsolute(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	require.NoError(t, err)
	c, err := config.Load(nil, nil)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(wd, ".gantry", "work"), c.WorkDir)
	c, err = config.Load([]string{"GANTRY_WORK_DIR=scratch/work"}, nil)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(wd, "scratch", "work"), c.WorkDir)
}
