// Package servertest runs a real Gantry inside a test: the web server on a
// fresh migrated database, the environment pools with their postgres, slot
// and aws kinds (aws against an in-test STS/IAM), a real SMTP server and a
// webhook receiver for notifications, and, on request, River workers. The
// web, client and command tests share it so that they test the same wiring.
package servertest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/semaphore"

	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/awsenv"
	"github.com/gantryhq/gantry/internal/awsenv/awstest"
	"github.com/gantryhq/gantry/internal/config"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/github/githubtest"
	"github.com/gantryhq/gantry/internal/gitrepo"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/mail"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/migrations"
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
}

// New serves Gantry on a fresh database; env are extra configuration
// variables (GANTRY_…=…).
func New(t testing.TB, env ...string) *Server {
	t.Helper()
	ctx := context.Background()
	cfg, err := config.Load(append([]string{"GANTRY_SECRET_KEY=" + strings.Repeat("k", 32)}, env...), nil)
	require.NoError(t, err)
	db, err := models.Open(ctx, testdb.NewURL(t), cfg.DBMaxConns)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	s := &Server{DB: db, Logger: testLogger(), Webhook: make(chan map[string]any, 64)}

	riverClient, err := jobs.NewClient(jobs.Deps{DB: db, Logger: s.Logger}, jobs.ClientOptions{Logger: s.Logger})
	require.NoError(t, err)
	s.Queue, err = jobs.NewQueue(db.Bun)
	require.NoError(t, err)
	mig, err := migrations.New(db.Pool, db.Bun)
	require.NoError(t, err)

	getenv := func(name string) string {
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
	pg := &pools.PostgresKind{Getenv: getenv}
	t.Cleanup(pg.Close)
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
	s.Pools = &pools.Service{Queue: s.Queue, Logger: s.Logger, Retention: 24 * time.Hour,
		Admission: semaphore.NewWeighted(int64(cfg.AllocationConcurrency)),
		Kinds: map[string]pools.Kind{
			gantryfile.KindPostgres: pg, gantryfile.KindSlot: pools.SlotKind{}, gantryfile.KindAWS: pools.AWSKind{Provider: awsProvider},
		},
		Notify: &pools.DirtyNotifier{BaseURL: "http://gantry.test", HTTP: hook.Client(),
			SendMail: func(ctx context.Context, to []string, subject, body string) error {
				return sender.Send(ctx, mail.Message{To: to, Subject: subject, Text: body})
			}},
	}
	s.GitHub = githubtest.New(t, githubtest.Options{Repos: []string{GitHubRepo}})
	s.Infra = &infra.Service{
		Queue: s.Queue, Logger: s.Logger, Git: &gitrepo.Cache{Dir: t.TempDir()}, WorkDir: t.TempDir(),
		Getenv: getenv, GitHubAPI: s.GitHub.URL, HTTPClient: s.GitHub.HTTP.Client(), BaseURL: BaseURL,
		CommandTimeout: 5 * time.Minute, Roles: awsProvider,
	}
	s.Infra.Approvals = approvals.New(approvals.Options{Queue: s.Queue, Logger: s.Logger, BaseURL: BaseURL, Mail: sender,
		Signer: approval.Signer{Key: cfg.SecretKey}, Kinds: []approvals.Kind{s.Infra.ApprovalKind()}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(jobs.NewMetricsCollector(db))
	s.Pools.Metrics = pools.NewMetrics(reg, db)
	s.Infra.Metrics = infra.NewMetrics(reg, db)

	s.Web = web.New(web.Deps{Config: cfg, DB: db, Queue: s.Queue, River: riverClient, Migrator: mig, Logger: s.Logger,
		Registry: reg, Pools: s.Pools, AWSIdentity: awsProvider, Infra: s.Infra, Approvals: s.Infra.Approvals})
	bgCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	require.NoError(t, s.Web.Start(bgCtx))
	s.HTTP = httptest.NewServer(s.Web.Handler())
	t.Cleanup(s.HTTP.Close)
	s.URL = s.HTTP.URL
	return s
}

// StartWorkers works the jobs of this server's database, as gantry worker
// does, until the test ends.
func (s *Server) StartWorkers(t testing.TB) {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(s.DB.Pool), &river.Config{
		Workers: jobs.NewWorkers(jobs.Deps{DB: s.DB, Logger: s.Logger, Pools: s.Pools, Infra: s.Infra}),
		Queues: map[string]river.QueueConfig{
			jobs.QueueEnvironments: {MaxWorkers: 5}, jobs.QueueMaintenance: {MaxWorkers: 1}, river.QueueDefault: {MaxWorkers: 1},
			jobs.QueueInfra: {MaxWorkers: 8},
		},
		Logger: s.Logger, FetchPollInterval: 100 * time.Millisecond, FetchCooldown: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	s.stopWorkers = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(ctx)
	}
	t.Cleanup(s.stopWorkers)
}

// Pool describes one postgres pool of fresh databases for a test.
type Pool struct {
	Name           string
	Size           int
	Session        string
	MaxSession     string
	CleanupTimeout string
	Cleanup        string             // YAML flow sequence: the cleanup command
	Caps           func(i int) string // YAML flow map of environment i's capabilities
}

// ApplyPools registers the pools (and a client "ci" whose user is
// ci@example.com) through the real gantry.yaml path, with notifications to
// ops@example.com and the webhook receiver, and returns each pool's database
// names. Everything is released and dropped when the test ends.
func (s *Server) ApplyPools(t testing.TB, specs ...Pool) map[string][]string {
	t.Helper()
	var yaml, envs strings.Builder
	yaml.WriteString("clients:\n  - name: ci\n    users: [ci@example.com]\npools:\n")
	dbs := map[string][]string{}
	suffix := strings.ToLower(rand.Text()[:8])
	for _, p := range specs {
		fmt.Fprintf(&yaml, "  - name: %s\n    kind: postgres\n    postgres: {admin_url_env: %s}\n    notify: {webhook: %q, emails: [ops@example.com]}\n",
			p.Name, PoolAdminEnv, s.WebhookURL)
		for key, v := range map[string]string{"session": p.Session, "max_session": p.MaxSession, "cleanup_timeout": p.CleanupTimeout, "cleanup": p.Cleanup} {
			if v != "" {
				fmt.Fprintf(&yaml, "    %s: %s\n", key, v)
			}
		}
		for i := 0; i < p.Size; i++ {
			db := fmt.Sprintf("gtest_%s_%s_%d", suffix, strings.ReplaceAll(p.Name, "-", "_"), i)
			dbs[p.Name] = append(dbs[p.Name], db)
			caps := "{}"
			if p.Caps != nil {
				caps = p.Caps(i)
			}
			fmt.Fprintf(&envs, "  - {pool: %s, database: %s, capabilities: %s}\n", p.Name, db, caps)
		}
	}
	yaml.WriteString("environments:\n" + envs.String())
	s.Sync(t, yaml.String())
	t.Cleanup(func() { s.dropPools(dbs) })
	return dbs
}

// Sync applies yaml as gantry.yaml; every variable it names counts as set.
func (s *Server) Sync(t testing.TB, yaml string) {
	t.Helper()
	f, err := gantryfile.Parse("gantry.yaml", []byte(yaml), func(string) (string, bool) { return "x", true })
	require.NoError(t, err, yaml)
	_, err = s.Pools.Sync(context.Background(), f, "test")
	require.NoError(t, err)
	_, err = s.Infra.Sync(context.Background(), f, "test")
	require.NoError(t, err)
}

func (s *Server) dropPools(dbs map[string][]string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A cleanup job running after the drop would create the database again.
	if s.stopWorkers != nil {
		s.stopWorkers()
	}
	active, _ := models.ListAllocations(ctx, s.DB.Bun, models.AllocationFilter{ActiveOnly: true, Limit: 500})
	for _, a := range active {
		_, _, _ = s.Pools.Release(ctx, a.ID, "", models.EndedByOperator, "", "test-cleanup")
	}
	conn, err := pgx.Connect(ctx, testdb.AdminURL())
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	for _, names := range dbs {
		for _, db := range names {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
		}
	}
}

// testLogger discards the server's log unless GANTRY_TEST_LOG is set (to
// debug a failing test: GANTRY_TEST_LOG=1 go test -run X ./...).
func testLogger() *slog.Logger {
	if os.Getenv("GANTRY_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
