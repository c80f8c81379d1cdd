package pools_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/models"
)

// The area's behaviour through the service, as web handlers and job workers
// drive it: matching and all-or-nothing under contention, extension limits
// and timeouts, de-registration, cleanup ending dirty with its
// notifications and the operator's decisions, and pruning the history.

// invalidFields are the fields a 400 names.
func invalidFields(t *testing.T, err error) map[string]string {
	t.Helper()
	var ae *apperr.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, apperr.Invalid, ae.Code, err.Error())
	return ae.Fields
}

func TestAllocationsUnderContention(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.applyPools(t, pgPool{Name: "single", Size: 10}, pgPool{Name: "triple", Size: 10})

	run := func(pool string, n, each int) (granted [][]pools.Lease, locked int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				leases, err := h.lease(pool, "load-test", each)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					granted = append(granted, leases)
				case apperr.CodeOf(err) == apperr.Locked:
					locked++
				default:
					t.Errorf("unexpected error: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		return granted, locked
	}

	t.Run("200 requests for a pool of 10", func(t *testing.T) {
		granted, locked := run("single", 200, 1)
		require.Len(t, granted, 10)
		require.Equal(t, 190, locked)
		seen := map[string]bool{}
		for _, g := range granted {
			require.Len(t, g, 1)
			require.False(t, seen[g[0].Environment.Key], "environment %s handed out twice", g[0].Environment.Key)
			seen[g[0].Environment.Key] = true
		}
	})
	t.Run("multi-environment requests are all or nothing", func(t *testing.T) {
		granted, locked := run("triple", 100, 3)
		require.Len(t, granted, 3, "three requests of three fit in ten")
		require.Equal(t, 97, locked)
		seen := map[string]bool{}
		for _, g := range granted {
			require.Len(t, g, 3)
			for _, l := range g {
				require.False(t, seen[l.Environment.Key])
				seen[l.Environment.Key] = true
			}
		}
		active, err := models.ListAllocations(context.Background(), h.db.Bun, models.AllocationFilter{Pool: "triple", ActiveOnly: true})
		require.NoError(t, err)
		require.Len(t, active, 9, "no half-granted request left anything behind")
	})
	t.Run("the database refuses a second active allocation of an environment", func(t *testing.T) {
		active, err := models.ListAllocations(context.Background(), h.db.Bun, models.AllocationFilter{Pool: "single", ActiveOnly: true, Limit: 1})
		require.NoError(t, err)
		_, err = h.db.Pool.Exec(context.Background(), `INSERT INTO allocations (request_id, environment_id, pool, requester, client, expires_at)
			VALUES (gen_random_uuid(), $1, 'single', 'sneaky', 'ci', now() + interval '1 hour')`, active[0].EnvironmentID)
		require.ErrorContains(t, err, "allocations_one_active_per_environment")
	})
}

func TestAllocationTimeoutAndExtension(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.applyPools(t, pgPool{Name: "short", Size: 2, Session: "2s", MaxSession: "1h"})
	h.startWorkers(t)
	ctx := context.Background()

	leases, err := h.lease("short", "forgetful", 1)
	require.NoError(t, err)
	forgotten := leases[0]
	leases, err = h.lease("short", "careful", 1)
	require.NoError(t, err)
	extended := leases[0]

	// Extensions add to the current expiry, as the API's duration does.
	_, _, err = h.svc.Extend(ctx, extended.Allocation.ID, 30*time.Minute, "ci", "client:ci")
	require.NoError(t, err)
	_, _, err = h.svc.Extend(ctx, extended.Allocation.ID, 2*time.Hour, "ci", "client:ci")
	require.Contains(t, invalidFields(t, err), "duration", "beyond the pool's max_session")

	h.WaitEnvironment(t, forgotten.Environment.Key, models.EnvAvailable)
	got, err := models.AllocationByID(ctx, h.db.Bun, forgotten.Allocation.ID)
	require.NoError(t, err)
	require.NotNil(t, got.EndedBy)
	require.Equal(t, "timeout", *got.EndedBy, "the timeout released it on behalf of the test")

	got, err = models.AllocationByID(ctx, h.db.Bun, extended.Allocation.ID)
	require.NoError(t, err)
	require.Nil(t, got.EndedAt, "the extended allocation outlived its first expiry")
}

func TestDeregistrationOfAnAllocatedEnvironment(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	dbs := h.applyPools(t, pgPool{Name: "shrinking", Size: 2})
	h.startWorkers(t)
	ctx := context.Background()

	leases, err := h.lease("shrinking", "t", 1)
	require.NoError(t, err)
	held := leases[0]
	var free string
	for _, db := range dbs["shrinking"] {
		if db != held.Environment.Database {
			free = db
		}
	}

	// Remove both environments from gantry.yaml.
	h.sync(t, "clients:\n  - name: ci\n    users: [ci@example.com]\npools:\n  - name: shrinking\n    kind: postgres\n    postgres: {admin_url_env: POOL_PG_URL}\n")
	h.WaitEnvironment(t, "postgres:"+free, models.EnvDeregistered)
	env := h.WaitEnvironment(t, held.Environment.Key, models.EnvInUse)
	require.True(t, env.Deregistering(), "the held one waits for its allocation")

	capacity, err := models.Capacity(ctx, h.db.Bun)
	require.NoError(t, err)
	require.Len(t, capacity, 1)
	require.EqualValues(t, 1, capacity[0].Deregistering)
	require.EqualValues(t, 0, capacity[0].Available)

	_, err = h.lease("shrinking", "t2", 1)
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err), "a pool whose environments are all leaving can never serve: %v", err)

	h.release(t, held, "")
	env = h.WaitEnvironment(t, held.Environment.Key, models.EnvDeregistered)
	require.NotNil(t, env.DeregisteredAt, "operators see when de-registration completed")
}

func TestFailingAndHangingCleanupsEndDirty(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.applyPools(t,
		pgPool{Name: "failing", Size: 1, Cleanup: "[sh, -c, 'echo removing leftovers; exit 3']"},
		pgPool{Name: "hanging", Size: 1, Cleanup: "[sleep, '30']", CleanupTimeout: "2s"},
	)
	h.startWorkers(t)
	ctx := context.Background()
	envOf := map[string]string{}
	for _, pool := range []string{"failing", "hanging"} {
		leases, err := h.lease(pool, "t", 1)
		require.NoError(t, err)
		envOf[pool] = leases[0].Environment.Key
		h.release(t, leases[0], "failure")
	}

	failing := h.WaitEnvironment(t, envOf["failing"], models.EnvDirty)
	require.Contains(t, failing.CleanupOutput, "removing leftovers")
	require.Contains(t, failing.CleanupOutput, "cleanup command exited with 3")
	hanging := h.WaitEnvironment(t, envOf["hanging"], models.EnvDirty)

	notified := map[string]string{}
	for len(notified) < 2 {
		select {
		case n := <-h.webhook:
			require.Equal(t, "environment-dirty", n["event"])
			notified[n["pool"].(string)] = n["reason"].(string)
		case <-time.After(30 * time.Second):
			t.Fatalf("only these notifications arrived: %v", notified)
		}
	}
	require.Contains(t, notified["failing"], "cleanup failed")
	email := h.mail.Wait(t, 30*time.Second, func(m mailtest.Message) bool { return strings.Contains(m.Subject, "pool failing") })
	require.Equal(t, []string{"ops@example.com"}, email.To)
	require.Contains(t, email.Subject, "is dirty")
	require.Contains(t, email.Body, fmt.Sprintf("http://gantry.test/environments/%d", failing.ID), "the email links to the environment")
	require.Contains(t, notified["hanging"], "did not finish", "the cleanup timeout, or the command's own limit, ended it")

	_, err := h.lease("failing", "t", 1)
	require.Equal(t, apperr.Locked, apperr.CodeOf(err), "a dirty environment is not handed out: %v", err)

	t.Run("mark clean", func(t *testing.T) {
		_, err := h.svc.MarkClean(ctx, hanging.ID, "user:ops@example.com")
		require.NoError(t, err)
		h.WaitEnvironment(t, envOf["hanging"], models.EnvAvailable)
		_, err = h.svc.MarkClean(ctx, hanging.ID, "user:ops@example.com")
		require.Error(t, err, "only dirty environments")
	})
	t.Run("retry cleanup", func(t *testing.T) {
		require.NoError(t, h.svc.RetryCleanup(ctx, failing.ID, "user:ops@example.com"))
		again := h.WaitEnvironment(t, envOf["failing"], models.EnvDirty)
		require.NotEqual(t, *failing.CleanupID, *again.CleanupID, "a new cleanup ran")
	})
	names := h.events(t, "environment:"+envOf["failing"])
	require.Contains(t, names, "environment-cleanup-failed")
	require.Contains(t, names, "environment-cleanup-retried")
	require.Contains(t, names, "environment-dirty-notified")
}

func TestHistoryIsPrunedAfterTheRetention(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.sync(t, "clients:\n  - name: ci\n    users: [ci@example.com]\npools:\n  - name: seats\n    kind: slot\nenvironments:\n  - {pool: seats, name: a}\n  - {pool: seats, name: b}\n")
	ctx := context.Background()
	var leases []pools.Lease
	for i := 0; i < 2; i++ {
		l, err := h.lease("seats", "r", 1)
		require.NoError(t, err)
		leases = append(leases, l[0])
	}
	h.release(t, leases[0], "")
	// Both started long ago; only the ended one may go.
	_, err := h.db.Pool.Exec(ctx, "UPDATE allocations SET started_at = now() - interval '200 days'")
	require.NoError(t, err)

	pruned, err := h.svc.PruneHistory(ctx) // retention is 24h in these tests
	require.NoError(t, err)
	require.EqualValues(t, 1, pruned)
	_, err = models.AllocationByID(ctx, h.db.Bun, leases[0].Allocation.ID)
	require.True(t, errors.Is(err, models.ErrNotFound), "the ended allocation is gone: %v", err)
	_, err = models.AllocationByID(ctx, h.db.Bun, leases[1].Allocation.ID)
	require.NoError(t, err, "an active allocation is never pruned")
}
