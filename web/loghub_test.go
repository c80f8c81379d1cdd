package web

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/models"
)

// TestLogHubSlowStreamDoesNotBlock: a subscriber that never reads is closed
// once its buffer is full, while the hub goes on feeding the others.
func TestLogHubSlowStreamDoesNotBlock(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	h := newLogHub(db, slog.New(slog.NewTextHandler(io.Discard, nil)))
	appendOne := func() int64 {
		e := &models.LogEntry{TargetID: "p", Event: "x", Actor: "t"}
		require.NoError(t, models.AppendLog(ctx, db.Bun, e))
		return e.ID
	}
	first := appendOne()

	slow, start, unsubscribeSlow, err := h.subscribe(ctx)
	require.NoError(t, err)
	defer unsubscribeSlow()
	require.Equal(t, first, start, "batches start after the newest entry")
	fast, start2, unsubscribeFast, err := h.subscribe(ctx)
	require.NoError(t, err)
	defer unsubscribeFast()
	require.Equal(t, start, start2)

	next := start
	for i := range logSubBuffer + 1 {
		id := appendOne()
		h.poll(ctx) // never waits for a subscriber
		b := <-fast
		require.Equal(t, next, b.from, "batch %d follows the one before", i)
		require.Equal(t, id, b.to)
		require.Len(t, b.entries, 1)
		next = b.to
	}
	for range logSubBuffer {
		_, ok := <-slow
		require.True(t, ok, "the slow stream keeps what fitted in its buffer")
	}
	_, ok := <-slow
	require.False(t, ok, "then it is closed, so the browser reconnects with Last-Event-ID")

	// Once nobody listens, a new subscriber starts from the newest entry,
	// not from where the hub stopped.
	unsubscribeFast()
	unsubscribeSlow()
	id := appendOne()
	_, start3, unsubscribe, err := h.subscribe(ctx)
	require.NoError(t, err)
	defer unsubscribe()
	require.Equal(t, id, start3)
}
