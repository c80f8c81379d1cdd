package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRiverLoggerDropsShutdownNoise: River's records at warn and above
// reach the log, except those whose error is a context cancellation, which
// River's services log when the process stops (issue 12).
func TestRiverLoggerDropsShutdownNoise(t *testing.T) {
	var buf bytes.Buffer
	l := riverLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	stopped, cancel := context.WithCancel(t.Context())
	cancel()

	l.ErrorContext(stopped, "maintenance.PeriodicJobEnqueuer: Error starting transaction", "error", context.Canceled.Error())
	l.Error("producer: Error fetching jobs", "error", fmt.Errorf("fetch: %w", context.Canceled))
	l.With("service", "elector").Error("Error attempting to elect", slog.String("error", "begin tx: context canceled"))
	require.Empty(t, buf.String(), "shutdown noise is dropped")

	l.Info("producer: Job fetched", "n", 1)
	require.Empty(t, buf.String(), "routine events are below the floor")

	l.Error("maintenance.PeriodicJobEnqueuer: Error starting transaction", "error", "connection refused")
	l.Warn("producer: Slow fetch", "error", errors.New("timeout: context deadline exceeded"))
	l.With("service", "elector").Error("Error attempting to elect", "detail", "context canceled")
	out := buf.String()
	require.Contains(t, out, `level=ERROR msg="maintenance.PeriodicJobEnqueuer: Error starting transaction" error="connection refused"`)
	require.Contains(t, out, `level=WARN msg="producer: Slow fetch" error="timeout: context deadline exceeded"`)
	require.Contains(t, out, `service=elector detail="context canceled"`, "only an error attribute counts")
	require.NotContains(t, out, "Job fetched")
}
