package pools_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/semaphore"

	"github.com/gantryhq/gantry/internal/allocation"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/mail"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// The light harness of the area's behaviour tests: a cloned test database,
// the pools service with the postgres and slot kinds, notifications to an
// in-test webhook and SMTP server, and on request a River client working the
// jobs. No web server: the HTTP concerns are tested in web/.

// poolAdminEnv names the admin URL of the postgres pools' server.
const poolAdminEnv = "POOL_PG_URL"

type harness struct {
	db      *models.DB
	svc     *pools.Service
	webhook chan map[string]any // dirty-environment notifications received
	mail    *mailtest.Server
	hookURL string
	workers *river.Client[pgx.Tx]
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	db := testdb.New(t)
	queue, err := jobs.NewQueue(db.Bun)
	require.NoError(t, err)
	h := &harness{db: db, webhook: make(chan map[string]any, 64), mail: mailtest.New(t)}
	hook := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		select {
		case h.webhook <- body:
		default: // nobody is reading: a test that does not look at notifications
		}
	}))
	t.Cleanup(hook.Close)
	h.hookURL = hook.URL
	sender, err := mail.ParseURL(h.mail.URL(), "gantry@example.com")
	require.NoError(t, err)
	pg := &pools.PostgresKind{Getenv: func(name string) string {
		if name == poolAdminEnv {
			return testdb.AdminURL()
		}
		return ""
	}}
	t.Cleanup(pg.Close)
	h.svc = &pools.Service{Queue: queue, Logger: slog.New(slog.DiscardHandler), Retention: 24 * time.Hour,
		Admission: semaphore.NewWeighted(8),
		Kinds:     map[string]pools.Kind{gantryfile.KindPostgres: pg, gantryfile.KindSlot: pools.SlotKind{}},
		Notify: &pools.DirtyNotifier{BaseURL: "http://gantry.test", HTTP: hook.Client(),
			SendMail: func(ctx context.Context, to []string, subject, body string) error {
				return sender.Send(ctx, mail.Message{To: to, Subject: subject, Text: body})
			}},
	}
	return h
}

// startWorkers works the area's jobs until the test ends, as gantry worker
// does.
func (h *harness) startWorkers(t *testing.T) {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(h.db.Pool), &river.Config{
		Workers: jobs.NewWorkers(jobs.Deps{DB: h.db, Logger: h.svc.Logger, Pools: h.svc}),
		Queues: map[string]river.QueueConfig{
			jobs.QueueEnvironments: {MaxWorkers: 5}, jobs.QueueMaintenance: {MaxWorkers: 1}, river.QueueDefault: {MaxWorkers: 1},
		},
		Logger: h.svc.Logger, FetchPollInterval: 100 * time.Millisecond, FetchCooldown: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	h.workers = client
	t.Cleanup(h.stopWorkers)
}

func (h *harness) stopWorkers() {
	if h.workers == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = h.workers.StopAndCancel(ctx)
}

// sync applies yaml as gantry.yaml; every variable it names counts as set.
func (h *harness) sync(t *testing.T, yaml string) {
	t.Helper()
	f, err := gantryfile.Parse("gantry.yaml", []byte(yaml), func(string) (string, bool) { return "x", true })
	require.NoError(t, err, yaml)
	_, err = h.svc.Sync(context.Background(), f, "test")
	require.NoError(t, err)
}

// pgPool describes one postgres pool of fresh databases for a test.
type pgPool struct {
	Name           string
	Size           int
	Session        string
	MaxSession     string
	CleanupTimeout string
	Cleanup        string // YAML flow sequence: the cleanup command
}

// applyPools registers postgres pools (and a client "ci") through the real
// gantry.yaml path, with notifications to ops@example.com and the webhook
// receiver, and returns each pool's database names. Everything is released
// and dropped when the test ends.
func (h *harness) applyPools(t *testing.T, specs ...pgPool) map[string][]string {
	t.Helper()
	var yaml, envs strings.Builder
	yaml.WriteString("clients:\n  - name: ci\n    users: [ci@example.com]\npools:\n")
	dbs := map[string][]string{}
	suffix := strings.ToLower(rand.Text()[:8])
	for _, p := range specs {
		fmt.Fprintf(&yaml, "  - name: %s\n    kind: postgres\n    postgres: {admin_url_env: %s}\n    notify: {webhook: %q, emails: [ops@example.com]}\n",
			p.Name, poolAdminEnv, h.hookURL)
		for key, v := range map[string]string{"session": p.Session, "max_session": p.MaxSession, "cleanup_timeout": p.CleanupTimeout, "cleanup": p.Cleanup} {
			if v != "" {
				fmt.Fprintf(&yaml, "    %s: %s\n", key, v)
			}
		}
		for i := 0; i < p.Size; i++ {
			db := fmt.Sprintf("gtest_%s_%s_%d", suffix, strings.ReplaceAll(p.Name, "-", "_"), i)
			dbs[p.Name] = append(dbs[p.Name], db)
			fmt.Fprintf(&envs, "  - {pool: %s, database: %s}\n", p.Name, db)
		}
	}
	yaml.WriteString("environments:\n" + envs.String())
	h.sync(t, yaml.String())
	t.Cleanup(func() { h.dropPools(dbs) })
	return dbs
}

func (h *harness) dropPools(dbs map[string][]string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A cleanup job running after the drop would create the database again.
	h.stopWorkers()
	active, _ := models.ListAllocations(ctx, h.db.Bun, models.AllocationFilter{ActiveOnly: true, Limit: 500})
	for _, a := range active {
		_, _, _ = h.svc.Release(ctx, a.ID, "", models.EndedByOperator, "", "test-cleanup")
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

// lease asks client ci for n environments of pool, any.
func (h *harness) lease(pool, requester string, n int) ([]pools.Lease, error) {
	return h.svc.Allocate(context.Background(), allocation.Request{Pool: pool, Requester: requester,
		Requirements: make([]allocation.Requirement, n)}, "ci", "client:ci")
}

// release gives an allocation back as client ci.
func (h *harness) release(t *testing.T, l pools.Lease, outcome string) *models.Allocation {
	t.Helper()
	a, _, err := h.svc.Release(context.Background(), l.Allocation.ID, "ci", models.EndedByClient, outcome, "client:ci")
	require.NoError(t, err)
	return a
}

// waitStatus polls an environment until it reaches status.
func (h *harness) waitStatus(t *testing.T, key, status string) *models.Environment {
	t.Helper()
	var env *models.Environment
	require.Eventually(t, func() bool {
		envs, err := models.ListEnvironments(context.Background(), h.db.Bun, models.EnvironmentFilter{WithDeregistered: true})
		require.NoError(t, err)
		for i := range envs {
			if envs[i].Key == key {
				env = &envs[i]
			}
		}
		return env != nil && env.Status == status
	}, 30*time.Second, 100*time.Millisecond, "environment %s never became %s", key, status)
	return env
}

// events are the log's event names for target, newest first.
func (h *harness) events(t *testing.T, target string) []string {
	t.Helper()
	entries, err := models.ListLog(context.Background(), h.db.Bun, models.LogFilter{Target: target})
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Event)
	}
	return names
}
