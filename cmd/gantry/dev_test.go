package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/models"
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

// TestDevSaysHowToResetThePassword: the first admin's password is printed
// once; every start says how to get a new one, and the command it prints
// works against the private database while gantry dev runs.
func TestDevSaysHowToResetThePassword(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	// As root, PostgreSQL runs as the postgres user, who must be able to
	// reach the directory.
	for _, dir := range []string{filepath.Dir(data), data} {
		require.NoError(t, os.Chmod(dir, 0o755))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--addr", "127.0.0.1:0"}, []string{"GANTRY_DATA_DIR=" + data, "GANTRY_LOG_LEVEL=warn"}, &stdout, &stderr)
	}()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-done
		}
	}()
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			stopped = true
			require.FailNow(t, "gantry dev ended", "%v\n%s\n%s", err, stdout.String(), stderr.String())
		default:
		}
		return strings.Contains(stdout.String(), "Gantry is running")
	}, 2*time.Minute, 50*time.Millisecond)

	out := stdout.String()
	first := regexp.MustCompile(`(?m)^\s*password:\s*(\S+)\s*$`).FindStringSubmatch(out)
	require.NotNil(t, first, out)
	hint := regexp.MustCompile(`(?m)^\s*DATABASE_URL='([^']+)' gantry admin user password (\S+)$`).FindStringSubmatch(out)
	require.NotNil(t, hint, "the reset command is printed:\n%s", out)
	require.Equal(t, devAdmin, hint[2])

	reset, _, err := gantry(t, []string{"DATABASE_URL=" + hint[1]}, "admin", "user", "password", hint[2])
	require.NoError(t, err)
	m := regexp.MustCompile(`new password for \S+ \(shown only once\): (\S+)`).FindStringSubmatch(reset)
	require.NotNil(t, m, reset)
	db, err := models.Open(ctx, hint[1], 2)
	require.NoError(t, err)
	defer db.Close()
	u, err := models.UserByEmail(ctx, db.Bun, devAdmin)
	require.NoError(t, err)
	require.True(t, auth.CheckPassword(u.PasswordHash, m[1]), "the new password signs in")
	require.False(t, auth.CheckPassword(u.PasswordHash, first[1]), "the lost one no longer does")

	db.Close()
	cancel()
	select {
	case err := <-done:
		stopped = true
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("gantry dev did not stop")
	}
}
