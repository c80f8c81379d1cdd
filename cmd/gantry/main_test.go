package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/web"
)

// gantry runs the command in-process with exactly the given environment.
func gantry(t *testing.T, env []string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, env, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

func TestHelpEverywhere(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--help"}, {"dev", "--help"}, {"serve", "--help"}, {"worker", "--help"},
		{"migrate", "--help"}, {"migrate", "status", "--help"}, {"admin", "user", "create", "--help"}, {"admin", "token", "revoke", "--help"},
	} {
		out, _, err := gantry(t, nil, args...)
		require.NoError(t, err, args)
		require.Contains(t, out, "Usage:", args)
	}
}

// Every command's -o takes text or json (with formats of its own), and
// "table", which env, admin and migrate took before, still means text.
func TestOutputTakesTheSameWords(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"env", "pools"}, {"env", "acquire"}, {"env", "extend"}, {"infra", "runs"}, {"infra", "run"}, {"infra", "execution"},
		{"infra", "approvals"}, {"infra", "vote"}, {"infra", "graph"}, {"admin", "user", "list"}, {"admin", "token", "list"}, {"migrate", "status"},
	} {
		out, _, err := gantry(t, nil, append(args, "--help")...)
		require.NoError(t, err, args)
		require.Regexp(t, `-o, --output string\s+output format: text(,| or) `, out, args)
		require.NotRegexp(t, `output format:[^\n]*\btable\b`, out, args)
	}
	for _, args := range [][]string{{"env", "pools"}, {"env", "acquire", "--pool", "ci"}, {"infra", "runs"}, {"infra", "graph", "."}, {"admin", "user", "list"}} {
		_, _, err := gantry(t, []string{"GANTRY_SERVER=http://127.0.0.1:1"}, append(args, "-o", "yaml")...)
		require.Regexp(t, `^--output must be text(,| or) .*, not "yaml"$`, err.Error(), args)
		for _, word := range []string{"text", "table"} {
			_, _, err := gantry(t, []string{"GANTRY_SERVER=http://127.0.0.1:1"}, append(args, "-o", word)...)
			if err != nil {
				require.NotContains(t, err.Error(), "--output", args)
			}
		}
	}
}

// gantry env and gantry infra only talk to a server: their help offers no
// database or gantry.yaml; the commands that load the configuration do.
func TestOnlyConfiguredCommandsTakeConfigurationFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"env"}, {"env", "pools"}, {"env", "exec"}, {"infra"}, {"infra", "runs"}, {"infra", "graph"}} {
		out, _, err := gantry(t, nil, append(args, "--help")...)
		require.NoError(t, err, args)
		for _, flag := range []string{"--database-url", "--config", "--log-level"} {
			require.NotContains(t, out, flag, args)
		}
		_, _, err = gantry(t, nil, append(args, "--database-url", "postgres://x/y")...)
		require.ErrorContains(t, err, "unknown flag: --database-url", args)
	}
	for _, args := range [][]string{{"dev"}, {"serve"}, {"worker"}, {"migrate", "status"}, {"admin", "user", "create"}, {"config", "check"}} {
		out, _, err := gantry(t, nil, append(args, "--help")...)
		require.NoError(t, err, args)
		for _, flag := range []string{"--database-url", "--config", "--log-level"} {
			require.Contains(t, out, flag, args)
		}
	}
}

func TestBadConfigurationNamesTheVariable(t *testing.T) {
	t.Parallel()
	_, _, err := gantry(t, []string{"GANTRY_ADR=:8080"}, "serve")
	require.ErrorContains(t, err, "GANTRY_ADR: unknown variable (did you mean GANTRY_ADDR?)")
	_, _, err = gantry(t, []string{"GANTRY_WORKERS=lots"}, "worker")
	require.ErrorContains(t, err, "GANTRY_WORKERS")
	_, _, err = gantry(t, nil, "serve")
	require.ErrorContains(t, err, "DATABASE_URL")
	_, _, err = gantry(t, nil, "serve", "--no-web", "--no-workers", "--database-url", "postgres://x/y")
	require.ErrorContains(t, err, "nothing to run")
}

func TestMigrateCommands(t *testing.T) {
	t.Parallel()
	env := []string{"DATABASE_URL=" + testdb.NewURL(t), "GANTRY_SECRET_KEY=" + strings.Repeat("s", 32)}

	out, _, err := gantry(t, env, "migrate", "status")
	require.NoError(t, err)
	require.Contains(t, out, "SOURCE")
	require.Contains(t, out, "river")
	require.Contains(t, out, "foundation")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		require.Contains(t, line, " applied ", "every migration is applied: %s", line)
	}

	out, _, err = gantry(t, env, "migrate", "down")
	require.NoError(t, err)
	require.Contains(t, out, "rolled back gantry 20261122000001_foundation", "the template applied every migration as one group")
	rolledBack := strings.Count(out, "rolled back")

	out, _, err = gantry(t, env, "migrate", "status", "-o", "json")
	require.NoError(t, err)
	var status []struct {
		Source  string
		Name    string
		Applied bool
	}
	require.NoError(t, json.Unmarshal([]byte(out), &status))
	pending := 0
	for _, s := range status {
		if !s.Applied {
			pending++
			require.Equal(t, "gantry", s.Source, "River's schema is kept on down")
		}
	}
	require.Equal(t, rolledBack, pending)

	_, _, err = gantry(t, env, "serve", "--addr", "127.0.0.1:0")
	require.ErrorContains(t, err, "pending: run `gantry migrate up` first")

	out, _, err = gantry(t, env, "migrate", "up")
	require.NoError(t, err)
	require.Contains(t, out, "applied gantry 20261122000001_foundation")
	out, _, err = gantry(t, env, "migrate", "up")
	require.NoError(t, err)
	require.Contains(t, out, "Nothing to apply")

	_, _, err = gantry(t, env, "migrate", "status", "-o", "yaml")
	require.ErrorContains(t, err, "--output")
}

func TestMigrateCreate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, _, err := gantry(t, nil, "migrate", "create", "add_pools", "--dir", dir)
	require.NoError(t, err)
	require.Contains(t, out, "_add_pools.tx.up.sql")
	files, err := filepath.Glob(filepath.Join(dir, "*_add_pools.tx.*.sql"))
	require.NoError(t, err)
	require.Len(t, files, 2)
	_, _, err = gantry(t, nil, "migrate", "create", "Add Pools", "--dir", dir)
	require.ErrorContains(t, err, "lower-case")
}

func TestAdminCommands(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	env := []string{"DATABASE_URL=" + url}
	ctx := context.Background()

	out, _, err := gantry(t, env, "admin", "user", "create", "--email", "ada@example.com", "--name", "Ada", "--role", "operator")
	require.NoError(t, err)
	require.Contains(t, out, "created user 1 ada@example.com (operator)")
	require.Contains(t, out, "password (shown only once): ")

	_, _, err = gantry(t, env, "admin", "user", "create", "--email", "ada@example.com")
	require.ErrorContains(t, err, "already exists")
	_, _, err = gantry(t, env, "admin", "user", "create", "--email", "bob@example.com", "--role", "root")
	require.EqualError(t, err, `--role: unknown role "root": use viewer, approver, operator or admin`, "once, naming the flag")
	_, _, err = gantry(t, env, "admin", "user", "create", "--email", "bob", "--password", "short")
	require.ErrorContains(t, err, "--email: must be an email address such as ada@example.com; --password: ")
	require.NotContains(t, err.Error(), "the request has invalid fields")

	out, _, err = gantry(t, env, "admin", "user", "list", "-o", "json")
	require.NoError(t, err)
	var users []web.UserJSON
	require.NoError(t, json.Unmarshal([]byte(out), &users))
	require.Len(t, users, 1)
	require.Equal(t, "ada@example.com", users[0].Email, "the API's shape")
	require.NotContains(t, out, "argon2id", "password hashes are never printed")

	secret, stderr, err := gantry(t, env, "admin", "token", "create", "--user", "ada@example.com", "--name", "ci", "--scopes", "read,write")
	require.NoError(t, err)
	secret = strings.TrimSpace(secret)
	require.True(t, strings.HasPrefix(secret, auth.TokenPrefix))
	require.Contains(t, stderr, "shown only once")
	_, _, err = gantry(t, env, "admin", "token", "create", "--user", "ada@example.com", "--name", "x", "--scopes", "admin")
	require.EqualError(t, err, "--scopes: only admins can hold the admin scope")
	_, _, err = gantry(t, env, "admin", "token", "create", "--user", "ada@example.com", "--name", "x", "--expires", "-1h")
	require.EqualError(t, err, "--expires: must not be negative")

	out, _, err = gantry(t, env, "admin", "token", "list")
	require.NoError(t, err)
	require.Contains(t, out, "ci")
	tableOut, _, err := gantry(t, env, "admin", "token", "list", "-o", "table")
	require.NoError(t, err, "table, the old word for text, still works")
	require.Equal(t, out, tableOut)
	require.Contains(t, out, "active")
	require.NotContains(t, out, secret)

	_, _, err = gantry(t, env, "admin", "token", "revoke", "1")
	require.NoError(t, err)
	out, _, err = gantry(t, env, "admin", "token", "list", "--user", "ada@example.com")
	require.NoError(t, err)
	require.Contains(t, out, "revoked")
	_, _, err = gantry(t, env, "admin", "token", "revoke", "99")
	require.ErrorContains(t, err, "No token with id 99")

	_, _, err = gantry(t, env, "admin", "user", "role", "ada@example.com", "superuser")
	require.EqualError(t, err, `ROLE: unknown role "superuser": use viewer, approver, operator or admin`, "once, naming the argument")
	_, _, err = gantry(t, env, "admin", "user", "role", "ada@example.com", "admin")
	require.NoError(t, err)
	out, _, err = gantry(t, env, "admin", "user", "password", "ada@example.com")
	require.NoError(t, err)
	require.Contains(t, out, "new password for ada@example.com")
	_, _, err = gantry(t, env, "admin", "user", "disable", "ada@example.com")
	require.NoError(t, err)
	_, _, err = gantry(t, env, "admin", "user", "disable", "nobody@example.com")
	require.ErrorContains(t, err, "no user with email nobody@example.com")

	db, err := models.Open(ctx, url, 2)
	require.NoError(t, err)
	defer db.Close()
	entries, err := models.ListLog(ctx, db.Bun, models.LogFilter{Limit: 100})
	require.NoError(t, err)
	var events []string
	for _, e := range entries {
		require.True(t, strings.HasPrefix(e.Actor, "cli"), e.Actor)
		events = append(events, e.Event)
	}
	require.Equal(t, []string{"user-disabled", "user-password-changed", "user-role-changed", "token-revoked", "token-created", "user-created"}, events)
}

// A worker process runs the periodic sweeps (River's elected leader enqueues
// them) and stops cleanly when told to.
func TestWorkerRunsPeriodicJobsAndStopsCleanly(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	env := []string{"DATABASE_URL=" + url, "GANTRY_SECRET_KEY=" + strings.Repeat("s", 32), "GANTRY_LOG_LEVEL=warn"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		var out bytes.Buffer
		done <- run(ctx, []string{"worker"}, env, &out, &out)
	}()

	db, err := models.Open(context.Background(), url, 2)
	require.NoError(t, err)
	defer db.Close()
	require.Eventually(t, func() bool {
		var state string
		err := db.Pool.QueryRow(context.Background(), "SELECT state FROM river_job WHERE kind = 'prune_sessions'").Scan(&state)
		return err == nil && state == "completed"
	}, 30*time.Second, 100*time.Millisecond, "the session sweep ran on start")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(40 * time.Second):
		t.Fatal("the worker did not stop")
	}
}

func TestDevAndServeBothTakeAddr(t *testing.T) {
	t.Parallel()
	// A bad value proves the flag reaches the configuration (and stops dev
	// before it starts a database).
	for _, cmd := range []string{"dev", "serve"} {
		_, _, err := gantry(t, []string{"GANTRY_DATA_DIR=" + t.TempDir()}, cmd, "--addr", "no-port")
		require.ErrorContains(t, err, `GANTRY_ADDR="no-port"`, cmd)
	}
}
