package models_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/models"
)

// TestQuietJobs: a heartbeat is quiet once it has not beaten for the
// window, by the database's clock, and never counted from before
// PostgreSQL's own start (nobody could beat while it was down).
func TestQuietJobs(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	kinds := []string{"apply_execution"}

	require.NoError(t, models.StartHeartbeat(ctx, db.Bun, 1, "apply_execution", 1, "worker-1:10"))
	quiet, err := models.QuietJobs(ctx, db.Bun, kinds, time.Minute)
	require.NoError(t, err)
	require.Empty(t, quiet, "it just beat")

	// Its last beat an hour before PostgreSQL started.
	var started time.Time
	require.NoError(t, db.Bun.NewRaw("SELECT pg_postmaster_start_time()").Scan(ctx, &started))
	_, err = db.Bun.NewRaw("UPDATE job_heartbeats SET beat_at = ? WHERE job_id = 1", started.Add(-time.Hour)).Exec(ctx)
	require.NoError(t, err)
	sinceStart := time.Since(started)
	quiet, err = models.QuietJobs(ctx, db.Bun, kinds, sinceStart+time.Minute)
	require.NoError(t, err)
	require.Empty(t, quiet, "quiet counts from the database's start")
	claimed, err := models.ClaimQuietJob(ctx, db.Bun, 1, 1, sinceStart+time.Minute)
	require.NoError(t, err)
	require.False(t, claimed)

	quiet, err = models.QuietJobs(ctx, db.Bun, kinds, sinceStart-time.Second)
	require.NoError(t, err)
	require.Len(t, quiet, 1)
	require.Equal(t, "worker-1:10", quiet[0].Worker)
	require.False(t, quiet[0].Running, "River has no such job")
	claimed, err = models.ClaimQuietJob(ctx, db.Bun, 1, 2, sinceStart-time.Second)
	require.NoError(t, err)
	require.False(t, claimed, "another attempt's heartbeat is not this one's")
	claimed, err = models.ClaimQuietJob(ctx, db.Bun, 1, 1, sinceStart-time.Second)
	require.NoError(t, err)
	require.True(t, claimed)
	alive, err := models.Beat(ctx, db.Bun, 1, 1)
	require.NoError(t, err)
	require.False(t, alive, "its worker learns that the sweep took it")
}
