package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/riverqueue/river"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/awsenv"
	"github.com/gantryhq/gantry/internal/config"
	"github.com/gantryhq/gantry/internal/devmail"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/gitrepo"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/mail"
	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/migrations"
	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/web"
)

// app is one process's wiring: the one pool, the two River clients, the
// migrator. Built by open, released by close.
type app struct {
	cfg      *config.Config
	logger   *slog.Logger
	db       *models.DB
	migrator *migrations.Migrator
	getenv   func(string) string
	queue    *jobs.Queue
	pools    *pools.Service
	postgres *pools.PostgresKind
	aws      *awsenv.Provider
	infra    *infra.Service
	mailbox  *devmail.Mailbox // gantry dev only: every email sent, shown at /dev/mailbox
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// appOptions are the differences between gantry dev and the other commands.
type appOptions struct {
	devMailbox bool // keep every email in the database for the dev mailbox page
}

func openApp(ctx context.Context, cfg *config.Config, logger *slog.Logger, getenv func(string) string, opts ...appOptions) (*app, error) {
	var o appOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	db, err := models.Open(ctx, cfg.DatabaseURL, cfg.DBMaxConns)
	if err != nil {
		return nil, err
	}
	m, err := migrations.New(db.Pool, db.Bun)
	if err != nil {
		db.Close()
		return nil, err
	}
	queue, err := jobs.NewQueue(db.Bun)
	if err != nil {
		db.Close()
		return nil, err
	}
	sender, err := newMailSender(ctx, cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	var mailbox *devmail.Mailbox
	if o.devMailbox {
		mailbox = &devmail.Mailbox{DB: db.Bun, Next: sender}
		sender = mailbox
	}
	notifier := &pools.DirtyNotifier{BaseURL: cfg.BaseURL.String()}
	if sender != nil {
		notifier.SendMail = func(ctx context.Context, to []string, subject, body string) error {
			return sender.Send(ctx, mail.Message{To: to, Subject: subject, Text: body})
		}
	}
	aws, err := awsenv.New(ctx, awsenv.Options{STSEndpoint: cfg.STSEndpoint, IAMEndpoint: cfg.IAMEndpoint, Region: cfg.AWSRegion})
	if err != nil {
		db.Close()
		return nil, err
	}
	a := &app{cfg: cfg, logger: logger, db: db, migrator: m, getenv: getenv, queue: queue, postgres: &pools.PostgresKind{Getenv: getenv}, aws: aws, mailbox: mailbox}
	a.pools = &pools.Service{
		Queue: queue, Logger: logger, Retention: cfg.Retention, Notify: notifier,
		Admission: semaphore.NewWeighted(int64(cfg.AllocationConcurrency)),
		Kinds: map[string]pools.Kind{
			gantryfile.KindPostgres: a.postgres,
			gantryfile.KindSlot:     pools.SlotKind{},
			gantryfile.KindAWS:      pools.AWSKind{Provider: aws},
		},
	}
	a.infra = &infra.Service{
		Queue: queue, Logger: logger,
		Git:     &gitrepo.Cache{Dir: filepath.Join(cfg.WorkDir, "git")},
		WorkDir: filepath.Join(cfg.WorkDir, "jobs"),
		Getenv:  getenv, GitHubAPI: cfg.GitHubAPIURL, BaseURL: cfg.BaseURL.String(),
		Roles: aws, CommandTimeout: cfg.CommandTimeout, Env: passedEnv(cfg.CommandEnv, getenv),
	}
	a.infra.Approvals = approvals.New(approvals.Options{Queue: queue, Logger: logger, BaseURL: cfg.BaseURL.String(), Mail: sender,
		Signer: approval.Signer{Key: cfg.SecretKey}, LinkLifetime: cfg.VoteLinkTTL, Kinds: []approvals.Kind{a.infra.ApprovalKind()}})
	return a, nil
}

// newMailSender is SES when GANTRY_SES_REGION is set, SMTP when
// GANTRY_SMTP_URL is, and nil (no mail) otherwise.
func newMailSender(ctx context.Context, cfg *config.Config) (mail.Sender, error) {
	switch {
	case cfg.SESRegion != "":
		s, err := mail.NewSES(ctx, mail.SESOptions{Region: cfg.SESRegion, Endpoint: cfg.SESEndpoint, From: cfg.MailFrom})
		if err != nil {
			return nil, fmt.Errorf("GANTRY_SES_REGION: %w", err)
		}
		return s, nil
	case cfg.SMTPURL != "":
		s, err := mail.ParseURL(cfg.SMTPURL, cfg.MailFrom)
		if err != nil {
			return nil, fmt.Errorf("GANTRY_SMTP_URL: %w", err)
		}
		return s, nil
	}
	return nil, nil
}

// passedEnv is the NAME=value of each named variable that is set.
func passedEnv(names []string, getenv func(string) string) []string {
	var env []string
	for _, n := range names {
		if v := getenv(n); v != "" {
			env = append(env, n+"="+v)
		}
	}
	return env
}

func (a *app) close() {
	a.postgres.Close()
	a.db.Close()
}

// configResult is what applying gantry.yaml changed.
type configResult struct {
	pools.SyncResult
	Repositories infra.SyncResult
}

// checkConfigFile reads and checks gantry.yaml (GANTRY_CONFIG), if any,
// before anything starts: a mistake in it must not surface only after a
// database was set up and a one-time password printed.
func checkConfigFile(cfg *config.Config, getenv func(string) string) error {
	if cfg.ConfigFile == "" {
		return nil
	}
	_, err := gantryfile.Load(cfg.ConfigFile, func(name string) (string, bool) { v := getenv(name); return v, v != "" })
	return err
}

// applyConfig syncs gantry.yaml (GANTRY_CONFIG) into the database; without
// one there is nothing to apply.
func (a *app) applyConfig(ctx context.Context) (*configResult, error) {
	if a.cfg.ConfigFile == "" {
		return nil, nil
	}
	f, err := gantryfile.Load(a.cfg.ConfigFile, func(name string) (string, bool) { v := a.getenv(name); return v, v != "" })
	if err != nil {
		return nil, err
	}
	res, err := a.pools.Sync(ctx, f, "gantry:config")
	if err != nil {
		return nil, fmt.Errorf("applying %s: %w", a.cfg.ConfigFile, err)
	}
	repos, err := a.infra.Sync(ctx, f, "gantry:config")
	if err != nil {
		return nil, fmt.Errorf("applying %s: %w", a.cfg.ConfigFile, err)
	}
	return &configResult{SyncResult: res, Repositories: repos}, nil
}

// requireMigrated refuses to start on a schema that is behind the binary.
func (a *app) requireMigrated(ctx context.Context) error {
	n, err := a.migrator.Pending(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%d migrations are pending: run `gantry migrate up` first", n)
	}
	return nil
}

// runOptions says which halves of Gantry this process runs.
type runOptions struct {
	web     bool
	workers bool
	ready   func(addr string) // called once the web server listens
}

// serve runs the web server and/or the workers until ctx ends, then stops
// them in order: the web server stops taking requests, running jobs get
// the grace period to finish, and jobs still running after it are cancelled
// and retried later by whichever worker is alive.
func (a *app) serve(ctx context.Context, opts runOptions) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), jobs.NewMetricsCollector(a.db))
	a.pools.Metrics = pools.NewMetrics(reg, a.db)
	a.infra.Metrics = infra.NewMetrics(reg, a.db)

	riverClient, err := jobs.NewClient(jobs.Deps{DB: a.db, Logger: a.logger, Pools: a.pools, Infra: a.infra}, jobs.ClientOptions{Work: opts.workers, Concurrency: a.cfg.WorkerCount, Logger: a.logger})
	if err != nil {
		return err
	}
	if res, err := a.applyConfig(ctx); err != nil {
		return err
	} else if res != nil {
		a.logger.Info("configuration applied", "file", a.cfg.ConfigFile, "registered", len(res.Registered), "deregistering", len(res.Deregistering), "deregistered", len(res.Deregistered), "repositories", len(res.Repositories.Registered))
	}

	g, gctx := errgroup.WithContext(ctx)
	if opts.workers {
		if err := riverClient.Start(gctx); err != nil {
			return fmt.Errorf("starting workers: %w", err)
		}
		a.logger.Info("workers started", "queues", jobs.AllQueues, "per_queue", a.cfg.WorkerCount)
		g.Go(func() error {
			<-gctx.Done()
			return a.stopWorkers(riverClient)
		})
	}
	if opts.web {
		ln, err := net.Listen("tcp", a.cfg.Addr)
		if err != nil {
			return fmt.Errorf("GANTRY_ADDR=%s: %w", a.cfg.Addr, err)
		}
		srv := web.New(web.Deps{Config: a.cfg, DB: a.db, Queue: a.queue, River: riverClient, Migrator: a.migrator, Logger: a.logger, Registry: reg, Pools: a.pools, AWSIdentity: a.aws, Infra: a.infra, Approvals: a.infra.Approvals, Mailbox: a.mailbox})
		if opts.ready != nil {
			opts.ready(ln.Addr().String())
		}
		g.Go(func() error { return srv.Serve(gctx, ln) })
	}
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (a *app) stopWorkers(client *river.Client[pgx.Tx]) error {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownGrace)
	defer cancel()
	a.logger.Info("stopping workers: letting running jobs finish", "grace", a.cfg.ShutdownGrace)
	if err := client.Stop(ctx); err == nil {
		return nil
	}
	a.logger.Warn("jobs still running after the grace period: cancelling them; they will be retried")
	hard, cancelHard := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelHard()
	return client.StopAndCancel(hard)
}
