// Package app assembles Gantry from its areas. It is the one place where a
// process's parts are built (the database pool, the queue, mail, AWS, each
// area's service, jobs, routes and metrics), used alike by gantry
// serve/worker/dev and by every test harness, so that what runs in a test
// is what runs in production. The areas are listed once, in Areas.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/riverqueue/river"
	"golang.org/x/sync/errgroup"

	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/awsenv"
	"github.com/gantryhq/gantry/internal/config"
	"github.com/gantryhq/gantry/internal/demo"
	"github.com/gantryhq/gantry/internal/devmail"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/mail"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/migrations"
	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/web"
)

// Options are what differs between gantry serve, gantry dev and a test.
// Only Config, Logger and Getenv are needed; the rest replace what would be
// built from Config.
type Options struct {
	Config *config.Config
	Logger *slog.Logger
	Getenv func(string) string
	// DevMailbox keeps every email in the database for /dev/mailbox
	// (gantry dev).
	DevMailbox bool
	// Areas replaces Areas() (a test adds an area of its own).
	Areas []Area
	// DB is an open database (a test's); nil opens Config.DatabaseURL.
	DB *models.DB
	// Mail sends Gantry's emails; nil: SES or SMTP as Config says.
	Mail mail.Sender
	// AWS is the AWS client; nil: built from Config.
	AWS *awsenv.Provider
	// HTTPClient makes the calls to other services; nil: Go's default.
	HTTPClient *http.Client
	// WorkDir replaces Config.WorkDir; GitHubAPI replaces
	// Config.GitHubAPIURL.
	WorkDir   string
	GitHubAPI string
}

// App is one process's Gantry: built by Open, released by Close.
type App struct {
	Config   *config.Config
	Logger   *slog.Logger
	DB       *models.DB
	Migrator *migrations.Migrator
	Queue    *jobs.Queue
	Registry *prometheus.Registry
	AWS      *awsenv.Provider
	// Approvals is every area's voting: policies, votes, links, emails.
	Approvals *approvals.Service
	// Mailbox keeps every email under gantry dev; nil otherwise.
	Mailbox *devmail.Mailbox

	areas  []builtArea
	ownsDB bool
}

type builtArea struct {
	Area
	*Parts
}

// Open builds the application: it connects to the database but changes
// nothing in it (migrations and gantry.yaml are applied by their callers).
func Open(ctx context.Context, o Options) (*App, error) {
	a := &App{Config: o.Config, Logger: o.Logger, DB: o.DB, AWS: o.AWS, Registry: prometheus.NewRegistry()}
	if err := a.open(ctx, o); err != nil {
		a.Close() // what was opened before the failure
		return nil, err
	}
	return a, nil
}

func (a *App) open(ctx context.Context, o Options) (err error) {
	cfg := o.Config
	if a.DB == nil {
		if a.DB, err = models.Open(ctx, cfg.DatabaseURL, cfg.DBMaxConns); err != nil {
			return err
		}
		a.ownsDB = true
	}
	if a.Migrator, err = migrations.New(a.DB.Pool, a.DB.Bun); err != nil {
		return err
	}
	if a.Queue, err = jobs.NewQueue(a.DB.Bun); err != nil {
		return err
	}
	sender := o.Mail
	if sender == nil {
		if sender, err = newMailSender(ctx, cfg); err != nil {
			return err
		}
	}
	if o.DevMailbox {
		a.Mailbox = &devmail.Mailbox{DB: a.DB.Bun, Next: sender}
		sender = a.Mailbox
	}
	if a.AWS == nil {
		if a.AWS, err = awsenv.New(ctx, awsenv.Options{STSEndpoint: cfg.STSEndpoint, IAMEndpoint: cfg.IAMEndpoint, Region: cfg.AWSRegion}); err != nil {
			return err
		}
	}
	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), jobs.NewMetricsCollector(a.DB))

	a.Approvals = approvals.New(approvals.Options{
		Queue: a.Queue, Logger: o.Logger, BaseURL: cfg.BaseURL.String(), Mail: sender,
		Signer: approval.Signer{Key: cfg.SecretKey}, LinkLifetime: cfg.VoteLinkTTL,
	})
	d := &Deps{
		Config: cfg, Logger: o.Logger, DB: a.DB, Queue: a.Queue, Getenv: o.Getenv, Mail: sender, AWS: a.AWS,
		Approvals: a.Approvals, Registry: a.Registry, HTTPClient: o.HTTPClient,
		WorkDir: firstOf(o.WorkDir, cfg.WorkDir), GitHubAPI: firstOf(o.GitHubAPI, cfg.GitHubAPIURL),
	}
	areas := o.Areas
	if areas == nil {
		areas = Areas()
	}
	for _, area := range areas {
		parts, err := area.Build(ctx, d)
		if err != nil {
			return fmt.Errorf("building the %s area: %w", area.Name, err)
		}
		a.areas = append(a.areas, builtArea{area, parts})
	}
	return nil
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
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

// Close releases the areas' connections and the database pool.
func (a *App) Close() {
	for _, ar := range a.areas {
		if ar.Close != nil {
			ar.Close()
		}
	}
	if a.ownsDB && a.DB != nil {
		a.DB.Close()
	}
}

// ServiceOf is the first area service of type T (the test harnesses reach
// an area's service this way); the zero T when no area has one.
func ServiceOf[T any](a *App) T {
	for _, ar := range a.areas {
		if s, ok := ar.Service.(T); ok {
			return s
		}
	}
	var zero T
	return zero
}

// Sections are the gantry.yaml sections that the areas read themselves.
func Sections(areas []Area) []gantryfile.Section {
	var out []gantryfile.Section
	for _, a := range areas {
		if a.Section != nil {
			out = append(out, *a.Section)
		}
	}
	return out
}

// LoadConfig reads and checks gantry.yaml at path with every area's
// section, without touching a database.
func LoadConfig(path string, getenv func(string) string, areas []Area) (*gantryfile.File, error) {
	return gantryfile.Load(path, lookupEnv(getenv), Sections(areas)...)
}

// ParseConfig checks src as gantry.yaml named name.
func (a *App) ParseConfig(name string, src []byte, lookup func(string) (string, bool)) (*gantryfile.File, error) {
	return gantryfile.Parse(name, src, lookup, Sections(a.areaList())...)
}

func lookupEnv(getenv func(string) string) func(string) (string, bool) {
	return func(name string) (string, bool) { v := getenv(name); return v, v != "" }
}

func (a *App) areaList() []Area {
	out := make([]Area, len(a.areas))
	for i, ar := range a.areas {
		out[i] = ar.Area
	}
	return out
}

// SyncConfig makes the database match f, area by area, and lists what
// changed.
func (a *App) SyncConfig(ctx context.Context, f *gantryfile.File, actor string) ([]string, error) {
	var changes []string
	for _, ar := range a.areas {
		if ar.Config == nil {
			continue
		}
		c, err := ar.Config.Sync(ctx, f, actor)
		changes = append(changes, c...)
		if err != nil {
			return changes, fmt.Errorf("%s: %w", ar.Name, err)
		}
	}
	return changes, nil
}

// ApplyConfig syncs gantry.yaml (GANTRY_CONFIG) into the database; without
// one there is nothing to apply (nil, nil).
func (a *App) ApplyConfig(ctx context.Context, getenv func(string) string) ([]string, error) {
	if a.Config.ConfigFile == "" {
		return nil, nil
	}
	f, err := LoadConfig(a.Config.ConfigFile, getenv, a.areaList())
	if err != nil {
		return nil, err
	}
	changes, err := a.SyncConfig(ctx, f, "gantry:config")
	if err != nil {
		return changes, fmt.Errorf("applying %s: %w", a.Config.ConfigFile, err)
	}
	return changes, nil
}

// RequireMigrated refuses to start on a schema that is behind the binary.
func (a *App) RequireMigrated(ctx context.Context) error {
	n, err := a.Migrator.Pending(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%d migrations are pending: run `gantry migrate up` first", n)
	}
	return nil
}

// LoadDemo adds the example data of gantry dev --demo (each part once) and
// reports whether it added anything.
func (a *App) LoadDemo(ctx context.Context) (bool, error) {
	loaded, err := demo.Base(ctx, a.DB.Bun)
	if err != nil {
		return false, err
	}
	for _, ar := range a.areas {
		if ar.Demo == nil {
			continue
		}
		l, err := ar.Demo(ctx)
		if err != nil {
			return false, fmt.Errorf("the %s demo: %w", ar.Name, err)
		}
		loaded = loaded || l
	}
	return loaded, nil
}

// JobAreas are the areas' background work.
func (a *App) JobAreas() []jobs.Area {
	var out []jobs.Area
	for _, ar := range a.areas {
		if ar.Jobs != nil {
			out = append(out, *ar.Jobs)
		}
	}
	return out
}

// StaleJob asks the areas why running a job again would do nothing ("":
// it would do work).
func (a *App) StaleJob(ctx context.Context, kind string, args []byte) (string, error) {
	for _, ar := range a.JobAreas() {
		if ar.Stale == nil {
			continue
		}
		if why, err := ar.Stale(ctx, kind, args); why != "" || err != nil {
			return why, err
		}
	}
	return "", nil
}

// RiverClient builds the River client with every area's jobs.
func (a *App) RiverClient(opts jobs.ClientOptions) (*river.Client[pgx.Tx], error) {
	if opts.Logger == nil {
		opts.Logger = a.Logger
	}
	return jobs.NewClient(jobs.SharedDeps{DB: a.DB, Logger: a.Logger, Approvals: a.Approvals, HeartbeatInterval: a.Config.HeartbeatInterval}, a.JobAreas(), opts)
}

// WebServer builds the web server with every area's pages and API.
func (a *App) WebServer(riverClient *river.Client[pgx.Tx]) *web.Server {
	areas := make([]web.Area, len(a.areas))
	for i, ar := range a.areas {
		areas[i] = ar.Web
	}
	return web.New(web.Deps{
		Config: a.Config, DB: a.DB, Queue: a.Queue, River: riverClient, Migrator: a.Migrator, Logger: a.Logger,
		Registry: a.Registry, AWSIdentity: a.AWS, Mailbox: a.Mailbox, Areas: areas, Approvals: a.Approvals,
		StaleJob: a.StaleJob,
	})
}

// RunOptions says which halves of Gantry this process runs.
type RunOptions struct {
	Web     bool
	Workers bool
	Getenv  func(string) string // for gantry.yaml's variables
	Ready   func(addr string)   // called once the web server listens
}

// Serve applies gantry.yaml, then runs the web server and/or the workers
// until ctx ends, then stops them in order: the web server stops taking
// requests, running jobs get the grace period to finish, and jobs still
// running after it are cancelled and retried later by whichever worker is
// alive.
func (a *App) Serve(ctx context.Context, opts RunOptions) error {
	riverClient, err := a.RiverClient(jobs.ClientOptions{Work: opts.Workers, Concurrency: a.Config.WorkerCount})
	if err != nil {
		return err
	}
	if changes, err := a.ApplyConfig(ctx, opts.Getenv); err != nil {
		return err
	} else if a.Config.ConfigFile != "" {
		a.Logger.Info("configuration applied", "file", a.Config.ConfigFile, "changes", len(changes))
		for _, c := range changes {
			a.Logger.Info("configuration: " + c)
		}
	}

	g, gctx := errgroup.WithContext(ctx)
	if opts.Workers {
		if err := riverClient.Start(gctx); err != nil {
			return fmt.Errorf("starting workers: %w", err)
		}
		a.Logger.Info("workers started", "queues", jobs.QueueNames(a.JobAreas()), "per_queue", a.Config.WorkerCount)
		g.Go(func() error {
			<-gctx.Done()
			return a.stopWorkers(riverClient)
		})
	}
	if opts.Web {
		ln, err := net.Listen("tcp", a.Config.Addr)
		if err != nil {
			return fmt.Errorf("GANTRY_ADDR=%s: %w", a.Config.Addr, err)
		}
		srv := a.WebServer(riverClient)
		if opts.Ready != nil {
			opts.Ready(ln.Addr().String())
		}
		g.Go(func() error { return srv.Serve(gctx, ln) })
	}
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (a *App) stopWorkers(client *river.Client[pgx.Tx]) error {
	ctx, cancel := context.WithTimeout(context.Background(), a.Config.ShutdownGrace)
	defer cancel()
	a.Logger.Info("stopping workers: letting running jobs finish", "grace", a.Config.ShutdownGrace)
	if err := client.Stop(ctx); err == nil {
		return nil
	}
	a.Logger.Warn("jobs still running after the grace period: cancelling them; they will be retried")
	hard, cancelHard := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelHard()
	return client.StopAndCancel(hard)
}
