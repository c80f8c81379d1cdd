// Package web is Gantry's HTTP face: the browser pages, the JSON API under
// /api/v1, probes and metrics. routes.go lists every URL; handlers live in one
// file per area and stay thin: bind, validate, call the domain, render.
package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"golang.org/x/time/rate"

	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/config"
	"github.com/gantryhq/gantry/internal/devmail"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/migrations"
	"github.com/gantryhq/gantry/models"
)

// Deps is everything the web layer uses, built once by the command.
type Deps struct {
	Config   *config.Config
	DB       *models.DB
	Queue    *jobs.Queue
	River    *river.Client[pgx.Tx]
	Migrator *migrations.Migrator
	Logger   *slog.Logger
	Registry *prometheus.Registry
	// AWSIdentity verifies IAM-signed callers of the allocation API; nil
	// turns IAM authentication off.
	AWSIdentity AWSIdentityVerifier
	// Approvals are the votes of every area: /approvals and voting links.
	Approvals *approvals.Service
	// Mailbox, under gantry dev, keeps every email for /dev/mailbox; nil
	// leaves that page out.
	Mailbox *devmail.Mailbox
	// Areas are the areas' pages and API, in the navigation's order.
	Areas []Area
	// StaleJob says why retrying a job would do nothing (the areas'
	// jobs.Area.Stale); nil: never.
	StaleJob func(ctx context.Context, kind string, args []byte) (string, error)
}

// AWSIdentityVerifier checks a signed sts:GetCallerIdentity request and
// returns the caller's AWS account.
type AWSIdentityVerifier interface {
	VerifyAccount(ctx context.Context, token string) (string, error)
}

// Server is the HTTP server.
type Server struct {
	Deps
	echo           *echo.Echo
	metrics        *httpMetrics
	hub            *logHub
	riverUIHandler http.Handler // nil until Serve starts it
	clientLimits   *clientLimits
	votePages      map[string]VotePageFunc // by kind of subject, from the areas
	voterHelp      []VoterHelpFunc         // the areas' words on an empty /approvals
	machine        map[string]machineRoute // the areas' routes for programs, by route path
	authCache      *authCache
	loginGate      *access.HashGate // bounds the passwords this process hashes at once
}

// New builds the server and its routes.
func New(d Deps) *Server {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	s := &Server{Deps: d, echo: e, hub: newLogHub(d.DB, d.Logger),
		clientLimits: &clientLimits{limiters: map[string]*rate.Limiter{}, def: d.Config.APIRate},
		loginGate:    access.NewHashGate(d.Config.LoginConcurrency),
		authCache:    newAuthCache(AuthCacheTTL), votePages: map[string]VotePageFunc{}, machine: map[string]machineRoute{}}
	s.metrics = newHTTPMetrics(d.Registry)
	e.HTTPErrorHandler = s.handleError
	s.routes()
	return s
}

// Handler is the server as an http.Handler, for tests.
func (s *Server) Handler() http.Handler { return s.echo }

// Serve answers on ln until ctx ends, then lets requests in flight finish.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hubCtx, stopHub := context.WithCancel(ctx)
	defer stopHub()
	if err := s.Start(hubCtx); err != nil {
		return err
	}

	srv := &http.Server{
		Handler:           s.echo,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return hubCtx },
		ErrorLog:          slog.NewLogLogger(s.Logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.Logger.Info("web server listening", "addr", ln.Addr().String(), "url", s.Config.BaseURL.String())
	select {
	case err := <-errc:
		return fmt.Errorf("web server: %w", err)
	case <-ctx.Done():
	}
	// Live streams end with the hub; ordinary requests get a grace period.
	stopHub()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("stopping web server: %w", err)
	}
	return nil
}

// Start starts the server's background work until ctx ends: the live log
// poller and River UI's services (until then /admin/river answers 404).
// Serve calls it; tests that use Handler call it themselves.
func (s *Server) Start(ctx context.Context) error {
	go s.hub.run(ctx)
	h, err := s.newRiverUI(ctx)
	if err != nil {
		return err
	}
	s.riverUIHandler = h
	return nil
}

// Routes lists every registered route, for tests that check all of them.
func (s *Server) Routes() []*echo.Route { return s.echo.Routes() }
