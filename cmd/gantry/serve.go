package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/gantryhq/gantry/internal/app"
)

func (c *cli) serveCommand() *cobra.Command {
	var noWeb, noWorkers bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the web server and the workers (production)",
		Long: `gantry serve runs the web UI, the JSON API and the background workers against
DATABASE_URL. Run as many as you like on as many machines: they share the
database, River spreads the jobs and elects one leader for periodic sweeps.
The schema must be current (gantry migrate up, e.g. as a release command).

Use --no-workers for web-only processes and --no-web (or gantry worker) for
worker-only ones.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if noWeb && noWorkers {
				return errors.New("--no-web and --no-workers together leave nothing to run")
			}
			return c.serve(cmd.Context(), app.RunOptions{Web: !noWeb, Workers: !noWorkers})
		},
	}
	cmd.Flags().BoolVar(&noWeb, "no-web", false, "do not serve HTTP; only work jobs")
	cmd.Flags().BoolVar(&noWorkers, "no-workers", false, "do not work jobs; only serve HTTP")
	cmd.Flags().StringVar(c.flag("GANTRY_ADDR"), "addr", "", "listen address (env GANTRY_ADDR, default :8080)")
	return cmd
}

func (c *cli) workerCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Work background jobs only (same as serve --no-web)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.serve(cmd.Context(), app.RunOptions{Workers: true})
		},
	}
}

func (c *cli) serve(ctx context.Context, opts app.RunOptions) error {
	cfg, err := c.config()
	if err != nil {
		return err
	}
	if err := cfg.RequireServerSettings(); err != nil {
		return err
	}
	if err := c.checkConfigFile(cfg); err != nil {
		return err
	}
	a, err := c.openApp(ctx, cfg, newLogger(cfg, c.stderr), false)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.RequireMigrated(ctx); err != nil {
		return err
	}
	opts.Getenv = c.getenv
	return a.Serve(ctx, opts)
}
