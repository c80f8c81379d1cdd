package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantryhq/gantry/client"
	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/app"
	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/demo"
	"github.com/gantryhq/gantry/internal/devdb"
	"github.com/gantryhq/gantry/models"
)

const devDatabase = "gantry"

func (c *cli) devCommand() *cobra.Command {
	var loadDemo bool
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything on a laptop: database, migrations, web and workers",
		Long: `gantry dev runs the whole of Gantry in one process for local use.

Without DATABASE_URL it starts a private PostgreSQL cluster in
GANTRY_DATA_DIR/postgres (default .gantry/postgres), kept between runs and
listening only on a Unix socket in that directory, from the PostgreSQL
binaries installed on the machine. It applies migrations, creates a first
admin user (printing its password once), then serves the web UI and runs the
workers. Ctrl-C stops everything, the private database included.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.dev(cmd.Context(), loadDemo)
		},
	}
	cmd.Flags().BoolVar(&loadDemo, "demo", false, "load example data into every page (once; safe to repeat)")
	cmd.Flags().StringVar(c.flag("GANTRY_ADDR"), "addr", "", "listen address (env GANTRY_ADDR, default :8080)")
	cmd.Flags().StringVar(c.flag("GANTRY_DATA_DIR"), "data-dir", "", "directory for the private database (env GANTRY_DATA_DIR, default .gantry)")
	return cmd
}

func (c *cli) dev(ctx context.Context, loadDemo bool) error {
	cfg, err := c.config()
	if err != nil {
		return err
	}
	if err := c.checkConfigFile(cfg); err != nil {
		return err
	}
	if err := cfg.EnsureDevSecret(); err != nil {
		return err
	}
	if c.getenv("GANTRY_BASE_URL") == "" {
		// Links in emails (the dev mailbox's voting links) point where this
		// process listens, --addr included.
		cfg.BaseURL = devBaseURL(cfg.Addr)
	}
	logger := newLogger(cfg, c.stderr)

	privateURL := "" // the private cluster's, when this process runs one
	if cfg.DatabaseURL == "" {
		cluster, err := devdb.New(filepath.Join(cfg.DataDir, "postgres"), func(f string, a ...any) { logger.Info(fmt.Sprintf(f, a...)) })
		if err != nil {
			return err
		}
		if err := cluster.Start(ctx); err != nil {
			return err
		}
		defer func() {
			// Stop the database even though ctx is already cancelled.
			if err := cluster.Stop(context.Background()); err != nil {
				logger.Error("stopping the private database", "error", err)
			} else {
				logger.Info("private database stopped")
			}
		}()
		if err := cluster.CreateDatabase(ctx, devDatabase); err != nil {
			return err
		}
		cfg.DatabaseURL = cluster.URL(devDatabase)
		logger.Info("using the private database", "url", cfg.DatabaseURL)
		privateURL = cfg.DatabaseURL
	}

	a, err := c.openApp(ctx, cfg, logger, true)
	if err != nil {
		return err
	}
	defer a.Close()
	applied, err := a.Migrator.Up(ctx)
	if err != nil {
		return err
	}
	if len(applied) > 0 {
		logger.Info("migrations applied", "count", len(applied))
	}
	if err := c.ensureFirstAdmin(ctx, a); err != nil {
		return err
	}
	c.printf("%s", passwordResetHint(privateURL))
	if loadDemo {
		loaded, err := a.LoadDemo(ctx)
		if err != nil {
			return fmt.Errorf("loading demo data: %w", err)
		}
		if loaded {
			logger.Info("demo data loaded")
		}
		if err := c.startDemoAgents(ctx, a, cfg.BaseURL.String(), logger); err != nil {
			return fmt.Errorf("starting the demo's agents: %w", err)
		}
	}
	return a.Serve(ctx, app.RunOptions{Web: true, Workers: true, Getenv: c.getenv, Ready: func(addr string) {
		c.printf("Gantry is running at %s, listening on %s (Ctrl-C stops it)\n", cfg.BaseURL, addr)
	}})
}

// ensureFirstAdmin creates devAdmin when there are no users at all and prints
// its password, the only time it is ever shown (passwordResetHint says how
// to get a new one).
func (c *cli) ensureFirstAdmin(ctx context.Context, a *app.App) error {
	n, err := models.CountUsers(ctx, a.DB.Bun)
	if err != nil || n > 0 {
		return err
	}
	password, err := auth.NewPassword()
	if err != nil {
		return err
	}
	u, err := access.CreateUser(ctx, a.DB.Bun, access.NewUser{Email: devAdmin, Name: "Admin", Role: "admin", Password: password}, "gantry-dev")
	if err != nil {
		return err
	}
	c.printf("\nFirst admin user created. This password is shown only once:\n  email:    %s\n  password: %s\n", u.Email, password)
	return nil
}

// devAdmin is the first admin gantry dev creates.
const devAdmin = "admin@localhost.localdomain"

// passwordResetHint says, at every start, how to get a lost password back:
// the first admin's is printed once only. The command works while gantry dev
// runs (the private database runs with it); with DATABASE_URL set by the
// user, that URL is not repeated (it may hold a password).
func passwordResetHint(privateURL string) string {
	env := "DATABASE_URL=<the same DATABASE_URL>"
	if privateURL != "" {
		env = "DATABASE_URL=" + shellQuote(privateURL)
	}
	return fmt.Sprintf("\nLost a password? While gantry dev runs, in another terminal:\n  %s gantry admin user password %s\n\n", env, devAdmin)
}

// devBaseURL is the address a browser on this machine reaches addr at.
func devBaseURL(addr string) *url.URL {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return &url.URL{Scheme: "http", Host: "localhost:8080"}
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return &url.URL{Scheme: "http", Host: net.JoinHostPort(host, port)}
}

// startDemoAgents runs three local agents of the demo's daemon cluster in
// this process until ctx ends, as three machines running gantry agent
// would, with a token of scope agent (valid a day) of the demo operator.
// Their tasks are real child processes.
func (c *cli) startDemoAgents(ctx context.Context, a *app.App, server string, logger *slog.Logger) error {
	operator, err := models.UserByEmail(ctx, a.DB.Bun, demo.People[0].Email)
	if err != nil {
		return err
	}
	token, _, err := access.CreateToken(ctx, a.DB.Bun, operator, access.NewToken{Name: "gantry dev's agents", Scopes: []string{auth.ScopeAgent}, ExpiresIn: 24 * time.Hour}, "gantry-dev")
	if err != nil {
		return err
	}
	for i, zone := range []string{"a", "b", "c"} {
		ag := &agent{api: client.New(server, client.WithToken(token), client.WithUserAgent("gantry-dev-agent")), log: c.stderr, wait: 20 * time.Second,
			environ: c.environ, procs: map[string]*taskProc{}, reported: map[string]bool{},
			reg: client.AgentRegistration{ID: fmt.Sprintf("demo-%d", i+1), Cluster: app.DemoDaemonCluster, Hostname: "localhost",
				Attributes: map[string]string{"role": "web", "zone": zone}}}
		go func() {
			// Stopping gantry dev stops its web server too, so the agents'
			// leaving may find no one to tell: that is no news.
			if err := ag.run(ctx); err != nil && ctx.Err() == nil {
				logger.Warn("demo agent stopped", "instance", ag.reg.ID, "error", err)
			}
		}()
	}
	return nil
}
