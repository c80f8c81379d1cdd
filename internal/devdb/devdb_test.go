package devdb_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/devdb"
)

// A postmaster.pid left by a machine that went down (its process gone) must
// not stop the next start.
func TestStartRecoversFromStalePIDFile(t *testing.T) {
	t.Parallel()
	// Not t.TempDir: its parent is private, and when the tests run as root
	// the server runs as the postgres user, who must reach the directory.
	root, err := os.MkdirTemp("", "gantry-devdb-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	require.NoError(t, os.Chmod(root, 0o755))
	c, err := devdb.New(filepath.Join(root, "postgres"), t.Logf)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	require.NoError(t, c.Stop(ctx))

	stale := "999999\n" + c.Dir + "\n1700000000\n5432\n" + c.Dir + "\n\n  5432001  0\nready\n"
	require.NoError(t, os.WriteFile(filepath.Join(c.Dir, "postmaster.pid"), []byte(stale), 0o600))

	require.NoError(t, c.Start(ctx))
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err)
	var one int
	require.NoError(t, conn.QueryRow(ctx, "SELECT 1").Scan(&one))
	require.NoError(t, conn.Close(ctx))

	// Starting again while it runs adopts the running server.
	require.NoError(t, c.Start(ctx))
	require.NoError(t, c.Stop(ctx))
	_, err = os.Stat(filepath.Join(c.Dir, "postmaster.pid"))
	require.ErrorIs(t, err, os.ErrNotExist, "stopped cleanly")
}
