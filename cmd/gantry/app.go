package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/gantryhq/gantry/internal/app"
	"github.com/gantryhq/gantry/internal/config"
)

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// openApp builds the application (internal/app) for a command.
func (c *cli) openApp(ctx context.Context, cfg *config.Config, logger *slog.Logger, devMailbox bool) (*app.App, error) {
	return app.Open(ctx, app.Options{Config: cfg, Logger: logger, Getenv: c.getenv, DevMailbox: devMailbox})
}

// checkConfigFile reads and checks gantry.yaml (GANTRY_CONFIG), if any,
// before anything starts: a mistake in it must not surface only after a
// database was set up and a one-time password printed.
func (c *cli) checkConfigFile(cfg *config.Config) error {
	if cfg.ConfigFile == "" {
		return nil
	}
	_, err := app.LoadConfig(cfg.ConfigFile, c.getenv, app.Areas())
	return err
}
