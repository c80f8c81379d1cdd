package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDevBaseURL: under gantry dev, emailed links point where it listens.
func TestDevBaseURL(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		":8080":          "http://localhost:8080",
		"127.0.0.1:9000": "http://127.0.0.1:9000",
		"0.0.0.0:8081":   "http://localhost:8081",
		"[::1]:8082":     "http://[::1]:8082",
		"not an address": "http://localhost:8080",
	} {
		require.Equal(t, want, devBaseURL(addr).String(), addr)
	}
}

func TestDevChecksGantryYAMLBeforeSettingUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "gantry.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("pools:\n  - name: a\n    kind: nope\n"), 0o600))
	data := filepath.Join(dir, "data")

	_, _, err := gantry(t, []string{"GANTRY_CONFIG=" + bad, "GANTRY_DATA_DIR=" + data}, "dev", "--addr", "127.0.0.1:0")
	require.ErrorContains(t, err, "pools[0].kind")
	_, statErr := os.Stat(data)
	require.True(t, os.IsNotExist(statErr), "nothing was set up: no database, no secret, no first admin whose one-time password would be lost")

	_, _, err = gantry(t, []string{"GANTRY_CONFIG=" + bad, "DATABASE_URL=postgres://127.0.0.1:1/none", "GANTRY_SECRET_KEY=" + strings.Repeat("s", 32)}, "serve")
	require.ErrorContains(t, err, "pools[0].kind", "serve too checks the file before connecting")
}
