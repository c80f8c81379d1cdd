// Package servertest runs a real Gantry inside a test, assembled by the
// application's own internal/app from its list of areas: the web server on
// a fresh migrated database, the environment pools with their postgres,
// slot and aws kinds (aws against an in-test STS/IAM), GitHub's API, a real
// SMTP server and a webhook receiver for notifications, and, on request,
// River workers for every area's jobs. The web, client and command tests
// share it so that they test the wiring gantry serve runs.
package servertest

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/app"
	"github.com/gantryhq/gantry/internal/awsenv"
	"github.com/gantryhq/gantry/internal/awsenv/awstest"
	"github.com/gantryhq/gantry/internal/config"
	"github.com/gantryhq/gantry/internal/github/githubtest"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/mail"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/web"
)

// PoolAdminEnv names the variable postgres pools in tests use for the admin
// URL of the test PostgreSQL.
const PoolAdminEnv = "POOL_PG_URL"

// The variables repositories in tests name for their webhook secret and
// status token, and the secret (GitHub's documented test secret).
const (
	WebhookSecretEnv = "INFRA_WEBHOOK_SECRET"
	WebhookSecret    = "It's a Secret to Everybody"
	StatusTokenEnv   = "INFRA_GITHUB_TOKEN"
	// GitHubRepo is the repository deliveries come from.
	GitHubRepo = infratest.GitHubRepo
	// BaseURL is Gantry's address in links it sends.
	BaseURL = "http://gantry.test"
)

// Server is a running in-test Gantry.
type Server struct {
	URL        string
	HTTP       *httptest.Server
	App        *app.App
	Web        *web.Server
	DB         *models.DB
	Queue      *jobs.Queue
	Pools      *pools.Service
	Infra      *infra.Service
	GitHub     *githubtest.Server // receives the commit statuses
	Logger     *slog.Logger
	AWS        *awstest.Server     // the fake STS and IAM the aws kind talks to
	Mail       *mailtest.Server    // receives the notification emails
	Webhook    chan map[string]any // dirty-environment webhook bodies received
	WebhookURL string

	stopWorkers func()
	env         []string // Options.Env, for worker processes
}

// Options change what New builds.
type Options struct {
	// Env are extra configuration variables (GANTRY_…=…).
	Env []string
	// Areas replaces the application's list of areas (app.Areas()).
	Areas []app.Area
	// NoWeb leaves the web server out: area behaviour tests call the
	// services (Services).
	NoWeb bool
	// Logger receives the server's log (default: discarded, see testLogger).
	Logger *slog.Logger
}

// Services is the light harness for an area's behaviour: the application's
// services on a fresh database with the in-test GitHub, SMTP and STS/IAM,
// workers on request (StartWorkers), and no web server.
func Services(t testing.TB) *Server {
	t.Helper()
	return NewWith(t, Options{NoWeb: true})
}

// New serves Gantry on a fresh database; env are extra configuration
// variables (GANTRY_…=…).
func New(t testing.TB, env ...string) *Server {
	t.Helper()
	return NewWith(t, Options{Env: env})
}

// NewWith serves Gantry, built by the application's own assembly
// (internal/app), on a fresh database.
func NewWith(t testing.TB, o Options) *Server {
	t.Helper()
	ctx := context.Background()
	cfg, err := config.Load(append(slices.Clone(baseConfig), o.Env...), nil)
	require.NoError(t, err)
	db, err := models.Open(ctx, testdb.NewURL(t), cfg.DBMaxConns)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	logger := o.Logger
	if logger == nil {
		logger = testLogger()
	}
	s := &Server{DB: db, Logger: logger, Webhook: make(chan map[string]any, 64), env: o.Env}
	getenv := testGetenv
	hook := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		select {
		case s.Webhook <- body:
		default: // nobody is reading: a test that does not look at notifications
		}
	}))
	t.Cleanup(hook.Close)
	s.WebhookURL = hook.URL
	s.AWS = awstest.New(t)
	awsProvider, err := awsenv.New(ctx, awsenv.Options{STSEndpoint: s.AWS.URL, IAMEndpoint: s.AWS.URL,
		Region: awstest.Region, Credentials: awstest.Provider(s.AWS.AddUser("999999999999", "gantry"))})
	require.NoError(t, err)
	s.Mail = mailtest.New(t)
	sender, err := mail.ParseURL(s.Mail.URL(), "gantry@example.com")
	require.NoError(t, err)
	s.GitHub = githubtest.New(t, githubtest.Options{Repos: []string{GitHubRepo}})

	s.App, err = app.Open(ctx, app.Options{
		Config: cfg, Logger: s.Logger, Getenv: getenv, Areas: o.Areas, DB: db, Mail: sender, AWS: awsProvider,
		HTTPClient: s.GitHub.HTTP.Client(), WorkDir: t.TempDir(), GitHubAPI: s.GitHub.URL,
	})
	require.NoError(t, err)
	t.Cleanup(s.App.Close)
	s.Queue = s.App.Queue
	s.Pools = app.ServiceOf[*pools.Service](s.App)
	s.Infra = app.ServiceOf[*infra.Service](s.App)

	if o.NoWeb {
		return s
	}
	riverClient, err := s.App.RiverClient(jobs.ClientOptions{})
	require.NoError(t, err)
	s.Web = s.App.WebServer(riverClient)
	bgCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	require.NoError(t, s.Web.Start(bgCtx))
	s.HTTP = httptest.NewServer(s.Web.Handler())
	t.Cleanup(s.HTTP.Close)
	s.URL = s.HTTP.URL
	return s
}

// StartWorkers works the jobs of every area, as gantry worker does, until
// the test ends. The sweeps (periodic jobs) are left to the tests that call
// them, so that none changes a test's rows behind its back.
func (s *Server) StartWorkers(t testing.TB) {
	t.Helper()
	client, err := s.App.RiverClient(jobs.ClientOptions{Work: true, Concurrency: 8, SkipPeriodic: true, FetchPollInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	s.stopWorkers = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(ctx)
	}
	t.Cleanup(s.stopWorkers)
}

// Sync applies yaml as gantry.yaml; every variable it names counts as set.
func (s *Server) Sync(t testing.TB, yaml string) {
	t.Helper()
	f, err := s.App.ParseConfig("gantry.yaml", []byte(yaml), func(string) (string, bool) { return "x", true })
	require.NoError(t, err, yaml)
	_, err = s.App.SyncConfig(context.Background(), f, "test")
	require.NoError(t, err)
}

// baseConfig is the configuration of every in-test Gantry, before a test's
// own variables.
var baseConfig = []string{"GANTRY_SECRET_KEY=" + strings.Repeat("k", 32), "GANTRY_BASE_URL=" + BaseURL,
	"GANTRY_COMMAND_TIMEOUT=5m", "GANTRY_ALLOCATION_RETENTION=24h"}

// testGetenv is what gantry.yaml's variables are in tests.
func testGetenv(name string) string {
	switch name {
	case PoolAdminEnv:
		return testdb.AdminURL()
	case WebhookSecretEnv:
		return WebhookSecret
	case StatusTokenEnv:
		return githubtest.Token
	}
	return ""
}

// testLogger discards the server's log unless GANTRY_TEST_LOG is set (to
// debug a failing test: GANTRY_TEST_LOG=1 go test -run X ./...).
func testLogger() *slog.Logger {
	if os.Getenv("GANTRY_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
