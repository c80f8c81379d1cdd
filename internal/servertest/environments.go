package servertest

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/models"
)

// The environment pools area's drivers: postgres pools of fresh databases,
// and waiting for an environment's state.

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

// WaitEnvironment waits until the environment with key has status, and
// returns it.
func (s *Server) WaitEnvironment(t testing.TB, key, status string) *models.Environment {
	t.Helper()
	var env *models.Environment
	WaitFor(t, func() (bool, string) {
		envs, err := models.ListEnvironments(context.Background(), s.DB.Bun, models.EnvironmentFilter{WithDeregistered: true})
		if err != nil {
			return false, err.Error()
		}
		env = nil
		for i := range envs {
			if envs[i].Key == key {
				env = &envs[i]
			}
		}
		if env == nil {
			return false, "no environment " + key
		}
		return env.Status == status, fmt.Sprintf("environment %s is %s, want %s", key, env.Status, status)
	})
	return env
}
