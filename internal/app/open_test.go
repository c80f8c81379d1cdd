package app_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/app"
	"github.com/gantryhq/gantry/internal/config"
)

// TestOpenWithoutADatabaseIsAnError: a database that cannot be reached is
// an error that says so, not a crash while cleaning up.
func TestOpenWithoutADatabaseIsAnError(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load([]string{"DATABASE_URL=postgres://gantry@127.0.0.1:1/gantry?connect_timeout=2"}, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := app.Open(ctx, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }})
	require.Nil(t, a)
	require.ErrorContains(t, err, "connecting to PostgreSQL")
}
