package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/models"
)

// TestHeartbeats: a job of a beating kind has its row while it runs,
// touched every interval; a sweep taking the row cancels the work with
// ErrWorkerTakenForDead (so a worker that was only slow records nothing);
// the row is gone once the work returns; other kinds keep no row.
func TestHeartbeats(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	h := newHeartbeats(db, nil, 50*time.Millisecond, map[string]bool{"apply_execution": true})
	job := &rivertype.JobRow{ID: 42, Kind: "apply_execution", Attempt: 1}
	count := func() int64 {
		n, err := db.Bun.NewSelect().Table("job_heartbeats").Where("job_id = 42").Count(ctx)
		require.NoError(t, err)
		return int64(n)
	}

	workErr := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		workErr <- h.Work(ctx, job, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return context.Cause(ctx)
		})
	}()
	<-started
	require.EqualValues(t, 1, count(), "the running attempt has its row")
	var first time.Time
	require.NoError(t, db.Bun.NewRaw("SELECT beat_at FROM job_heartbeats WHERE job_id = 42").Scan(ctx, &first))
	require.Eventually(t, func() bool {
		var now time.Time
		require.NoError(t, db.Bun.NewRaw("SELECT beat_at FROM job_heartbeats WHERE job_id = 42").Scan(ctx, &now))
		return now.After(first)
	}, time.Minute, 20*time.Millisecond, "the row is touched")

	// A sweep takes it.
	claimed, err := models.ClaimQuietJob(ctx, db.Bun, 42, 1, 0)
	require.NoError(t, err)
	require.True(t, claimed)
	select {
	case err := <-workErr:
		require.True(t, errors.Is(err, ErrWorkerTakenForDead), "got %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the work was not cancelled when its heartbeat was taken")
	}
	require.Zero(t, count())

	// A kind that runs no command keeps no row.
	other := &rivertype.JobRow{ID: 43, Kind: "post_status", Attempt: 1}
	require.NoError(t, h.Work(ctx, other, func(context.Context) error {
		n, err := db.Bun.NewSelect().Table("job_heartbeats").Count(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
		return nil
	}))
}
