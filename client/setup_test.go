package client_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/config"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/migrations"
	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/web"
)

// server is a real Gantry (web and workers) on a fresh database, with the
// lease client "ci" (user ci@example.com) and postgres pools.
type server struct {
	URL   string
	Token string // a token of ci@example.com, scopes read and write
	db    *models.DB
	pools *pools.Service
}

// pool is one postgres pool of fresh databases.
type pool struct {
	Name string
	Size int
	Caps func(i int) string // YAML flow map of environment i's capabilities
}

// setup serves Gantry with the pools registered through gantry.yaml; every
// environment is released and its database dropped when the test ends.
func setup(t testing.TB, specs ...pool) *server {
	t.Helper()
	ctx := context.Background()
	cfg, err := config.Load([]string{"GANTRY_SECRET_KEY=" + strings.Repeat("k", 32), "GANTRY_API_RATE=1000"}, nil)
	require.NoError(t, err)
	db := testdb.New(t)
	logger := slog.New(slog.DiscardHandler)
	queue, err := jobs.NewQueue(db.Bun)
	require.NoError(t, err)
	mig, err := migrations.New(db.Pool, db.Bun)
	require.NoError(t, err)
	pg := &pools.PostgresKind{Getenv: func(name string) string {
		if name == "POOL_PG_URL" {
			return testdb.AdminURL()
		}
		return ""
	}}
	t.Cleanup(pg.Close)
	svc := &pools.Service{Queue: queue, Logger: logger, Retention: 24 * time.Hour,
		Kinds:  map[string]pools.Kind{gantryfile.KindPostgres: pg},
		Notify: &pools.DirtyNotifier{BaseURL: "http://gantry.test"}}
	reg := prometheus.NewRegistry()
	svc.Metrics = pools.NewMetrics(reg, db)
	var dbs []string // the pools' databases, dropped once the workers stopped
	t.Cleanup(func() { dropPools(db, svc, dbs) })

	// Workers clean released environments, so that they come back.
	riverClient, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{
		Workers: jobs.NewWorkers(jobs.Deps{DB: db, Logger: logger, Pools: svc}),
		Queues: map[string]river.QueueConfig{
			jobs.QueueEnvironments: {MaxWorkers: 5}, jobs.QueueMaintenance: {MaxWorkers: 1}, river.QueueDefault: {MaxWorkers: 1},
		},
		Logger: logger, FetchPollInterval: 100 * time.Millisecond, FetchCooldown: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, riverClient.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = riverClient.StopAndCancel(ctx)
	})

	s := web.New(web.Deps{Config: cfg, DB: db, Queue: queue, River: riverClient, Migrator: mig, Logger: logger, Registry: reg, Pools: svc})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)

	// gantry.yaml: the client and the pools.
	var yaml, envs strings.Builder
	yaml.WriteString("clients:\n  - name: ci\n    users: [ci@example.com]\npools:\n")
	suffix := strings.ToLower(rand.Text()[:8])
	for _, p := range specs {
		fmt.Fprintf(&yaml, "  - name: %s\n    kind: postgres\n    postgres: {admin_url_env: POOL_PG_URL}\n", p.Name)
		for i := range p.Size {
			name := fmt.Sprintf("gtest_%s_%s_%d", suffix, strings.ReplaceAll(p.Name, "-", "_"), i)
			dbs = append(dbs, name)
			caps := "{}"
			if p.Caps != nil {
				caps = p.Caps(i)
			}
			fmt.Fprintf(&envs, "  - {pool: %s, database: %s, capabilities: %s}\n", p.Name, name, caps)
		}
	}
	yaml.WriteString("environments:\n" + envs.String())
	f, err := gantryfile.Parse("gantry.yaml", []byte(yaml.String()), func(string) (string, bool) { return "x", true })
	require.NoError(t, err, yaml.String())
	_, err = svc.Sync(ctx, f, "test")
	require.NoError(t, err)

	u, err := access.CreateUser(ctx, db.Bun, access.NewUser{Email: "ci@example.com", Role: string(models.RoleViewer), Password: "correct-horse-battery"}, "test")
	require.NoError(t, err)
	token, _, err := access.CreateToken(ctx, db.Bun, u, access.NewToken{Name: "ci", Scopes: []string{"read", "write"}}, "test")
	require.NoError(t, err)
	return &server{URL: srv.URL, Token: token, db: db, pools: svc}
}

// dropPools releases what is still held and drops the pools' databases.
func dropPools(db *models.DB, svc *pools.Service, dbs []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	active, _ := models.ListAllocations(ctx, db.Bun, models.AllocationFilter{ActiveOnly: true, Limit: 500})
	for _, a := range active {
		_, _, _ = svc.Release(ctx, a.ID, "", models.EndedByOperator, "", "test-cleanup")
	}
	conn, err := pgx.Connect(ctx, testdb.AdminURL())
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	for _, name := range dbs {
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	}
}
