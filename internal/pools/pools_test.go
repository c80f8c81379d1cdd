package pools_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/semaphore"

	"github.com/gantryhq/gantry/internal/allocation"
	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// grantingKind is a slot kind whose credentials are recorded, and whose
// grants can be made to fail from a given one on.
type grantingKind struct {
	pools.SlotKind
	mu      sync.Mutex
	failAt  int // the grant number (1-based) that fails; 0: none
	grants  int
	revoked []string
}

func (k *grantingKind) Grant(_ context.Context, _ *models.Pool, env *models.Environment, session string, _ time.Time) (pools.Credentials, string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.grants++
	if k.grants == k.failAt {
		return pools.Credentials{}, "", errors.New("the credential service is down")
	}
	return pools.Credentials{URL: "slot://" + env.SlotName}, "ref-" + session, nil
}

func (k *grantingKind) Revoke(_ context.Context, _ *models.Pool, _ *models.Environment, ref string, _ time.Time) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.revoked = append(k.revoked, ref)
	return nil
}

type fixture struct {
	db   *models.DB
	svc  *pools.Service
	kind *grantingKind
}

const gantryYAML = `clients:
  - name: ci
    users: [ci@example.com]
pools:
  - name: seats
    kind: slot
environments:
  - {pool: seats, name: a}
  - {pool: seats, name: b}
  - {pool: seats, name: c}
`

func setup(t *testing.T, yaml string) *fixture {
	t.Helper()
	db := testdb.New(t)
	queue, err := jobs.NewQueue(db.Bun)
	require.NoError(t, err)
	kind := &grantingKind{}
	svc := &pools.Service{Queue: queue, Logger: slog.New(slog.DiscardHandler), Kinds: map[string]pools.Kind{gantryfile.KindSlot: kind}}
	f := &fixture{db: db, svc: svc, kind: kind}
	f.sync(t, yaml)
	return f
}

func (f *fixture) sync(t *testing.T, yaml string) {
	t.Helper()
	file, err := gantryfile.Parse("gantry.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	_, err = f.svc.Sync(context.Background(), file, "test")
	require.NoError(t, err)
}

func (f *fixture) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, f.db.Pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

func request(n int) allocation.Request {
	req := allocation.Request{Pool: "seats", Requester: "test"}
	for range n {
		req.Requirements = append(req.Requirements, allocation.Requirement{})
	}
	return req
}

func TestAllocateRecordsLogsAndSchedulesInOneTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setup(t, gantryYAML)

	leases, err := f.svc.Allocate(ctx, request(2), "ci", "client:ci")
	require.NoError(t, err)
	require.Len(t, leases, 2)
	for _, l := range leases {
		require.Equal(t, "ref-"+l.Allocation.ID.String(), l.Allocation.CredentialRef)
		require.Equal(t, "slot://"+l.Environment.SlotName, l.Credentials.URL)
		require.Equal(t, 1, f.count(t, `SELECT count(*) FROM allocations WHERE id = $1 AND credential_ref = $2 AND ended_at IS NULL`,
			l.Allocation.ID, l.Allocation.CredentialRef))
		require.Equal(t, 1, f.count(t, `SELECT count(*) FROM river_job WHERE kind = 'allocation_timeout' AND state = 'scheduled'
			AND args->>'allocation_id' = $1 AND scheduled_at = $2`, l.Allocation.ID.String(), l.Allocation.ExpiresAt))
		require.Equal(t, 1, f.count(t, `SELECT count(*) FROM deployment_log WHERE event = $1 AND target_id = $2 AND detail->>'allocation' = $3`,
			pools.EventAllocated, pools.Target(l.Environment), l.Allocation.ID.String()))
	}
	require.Equal(t, 2, f.count(t, `SELECT count(*) FROM environments WHERE status = 'in_use'`))

	stored, err := models.AllocationByID(ctx, f.db.Bun, leases[0].Allocation.ID)
	require.NoError(t, err)
	require.True(t, stored.ExpiresAt.Equal(leases[0].Allocation.ExpiresAt), "the expiry answered is the one stored, to the microsecond: %s, %s",
		leases[0].Allocation.ExpiresAt, stored.ExpiresAt)
}

func TestAFailedGrantLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setup(t, gantryYAML)
	f.kind.failAt = 2 // the second of two grants fails

	_, err := f.svc.Allocate(ctx, request(2), "ci", "client:ci")
	require.ErrorContains(t, err, "the credential service is down")
	require.Len(t, f.kind.revoked, 1, "the credentials granted before the failure are revoked")
	require.Zero(t, f.count(t, `SELECT count(*) FROM allocations`))
	require.Zero(t, f.count(t, `SELECT count(*) FROM river_job WHERE kind = 'allocation_timeout'`), "no timeout job without its allocation")
	require.Zero(t, f.count(t, `SELECT count(*) FROM deployment_log WHERE event = $1`, pools.EventAllocated))
	require.Equal(t, 3, f.count(t, `SELECT count(*) FROM environments WHERE status = 'available'`))

	leases, err := f.svc.Allocate(ctx, request(3), "ci", "client:ci")
	require.NoError(t, err, "every environment can be leased again")
	require.Len(t, leases, 3)
}

func TestAllocateExplainsRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setup(t, `clients:
  - name: ci
    users: [ci@example.com]
  - name: other
    users: [other@example.com]
pools:
  - name: seats
    kind: slot
  - name: private
    kind: slot
    clients: [other]
environments:
  - {pool: seats, name: a}
  - {pool: seats, name: b}
  - {pool: seats, name: c}
  - {pool: private, name: z}
`)
	cases := []struct {
		name string
		req  allocation.Request
		code string
	}{
		{"unknown pool", allocation.Request{Pool: "nope", Requester: "t"}, apperr.Invalid},
		{"a pool that does not serve the client", allocation.Request{Pool: "private", Requester: "t"}, apperr.Forbidden},
		{"more than the pool has", request(4), apperr.Invalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.Allocate(ctx, tc.req, "ci", "client:ci")
			require.Equal(t, tc.code, apperr.CodeOf(err), "%v", err)
		})
	}
	t.Run("all taken now is 423", func(t *testing.T) {
		_, err := f.svc.Allocate(ctx, request(3), "ci", "client:ci")
		require.NoError(t, err)
		_, err = f.svc.Allocate(ctx, request(1), "ci", "client:ci")
		require.Equal(t, apperr.Locked, apperr.CodeOf(err))
	})
	require.Zero(t, f.count(t, `SELECT count(*) FROM allocations WHERE pool = 'private'`))
}

func TestReleaseOfASlotRemovedWhileLeased(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setup(t, gantryYAML)
	leases, err := f.svc.Allocate(ctx, allocation.Request{Pool: "seats", Requester: "t"}, "ci", "client:ci")
	require.NoError(t, err)
	held := leases[0]
	f.sync(t, "clients:\n  - name: ci\n    users: [ci@example.com]\npools:\n  - name: seats\n    kind: slot\nenvironments: []\n")

	a, ended, err := f.svc.Release(ctx, held.Allocation.ID, "ci", models.EndedByClient, "success", "client:ci")
	require.NoError(t, err)
	require.True(t, ended)
	require.Equal(t, "success", a.Outcome)
	require.Equal(t, []string{held.Allocation.CredentialRef}, f.kind.revoked, "credentials revoked before the release commits")
	env, err := models.EnvironmentByID(ctx, f.db.Bun, held.Environment.ID)
	require.NoError(t, err)
	require.Equal(t, models.EnvDeregistered, env.Status)
	entries, err := models.ListLog(ctx, f.db.Bun, models.LogFilter{Target: pools.Target(env)})
	require.NoError(t, err)
	var events []string
	for _, e := range slices.Backward(entries) {
		events = append(events, e.Event)
	}
	require.Equal(t, []string{pools.EventRegistered, pools.EventAllocated, pools.EventDeregistering, pools.EventReleased, pools.EventDeregistered}, events)

	t.Run("releasing again is harmless", func(t *testing.T) {
		again, ended, err := f.svc.Release(ctx, held.Allocation.ID, "ci", models.EndedByClient, "again", "client:ci")
		require.NoError(t, err)
		require.False(t, ended)
		require.Equal(t, "success", again.Outcome)
		require.Len(t, f.kind.revoked, 1)
	})
	t.Run("another client's allocation is not found", func(t *testing.T) {
		_, _, err := f.svc.Release(ctx, held.Allocation.ID, "other", models.EndedByClient, "", "client:other")
		require.Equal(t, apperr.NotFound, apperr.CodeOf(err))
		_, _, err = f.svc.Release(ctx, uuid.New(), "ci", models.EndedByClient, "", "client:ci")
		require.Equal(t, apperr.NotFound, apperr.CodeOf(err))
	})
}

// slowKind grants slowly and records how many grants ran at once.
type slowKind struct {
	pools.SlotKind
	mu           sync.Mutex
	running, max int
}

func (k *slowKind) Grant(_ context.Context, _ *models.Pool, env *models.Environment, _ string, _ time.Time) (pools.Credentials, string, error) {
	k.mu.Lock()
	k.running++
	k.max = max(k.max, k.running)
	k.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	k.mu.Lock()
	k.running--
	k.mu.Unlock()
	return pools.Credentials{URL: "slot://" + env.SlotName}, "", nil
}

func TestAdmissionBoundsLeaseTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setup(t, gantryYAML+"  - {pool: seats, name: d}\n  - {pool: seats, name: e}\n  - {pool: seats, name: f}\n")
	kind := &slowKind{}
	f.svc.Kinds = map[string]pools.Kind{gantryfile.KindSlot: kind}
	f.svc.Admission = semaphore.NewWeighted(2)

	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Go(func() {
			_, err := f.svc.Allocate(ctx, request(1), "ci", "client:ci")
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, kind.max, 2, "at most two lease transactions at once")
	require.Equal(t, 6, f.count(t, `SELECT count(*) FROM allocations WHERE ended_at IS NULL`))

	t.Run("a request that cannot get a turn in time is refused and changes nothing", func(t *testing.T) {
		require.NoError(t, f.svc.Admission.Acquire(ctx, 2)) // every turn taken
		defer f.svc.Admission.Release(2)
		var a models.Allocation
		require.NoError(t, f.db.Bun.NewSelect().Model(&a).Limit(1).Scan(ctx))

		// The request has 5.2 s left; a turn must leave 5 s of it to the
		// transaction, so it waits only 0.2 s.
		short, cancel := context.WithTimeout(ctx, 5200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, _, err := f.svc.Release(short, a.ID, "ci", models.EndedByClient, "success", "client:ci")
		require.Equal(t, apperr.Unavailable, apperr.CodeOf(err))
		require.Less(t, time.Since(start), 3*time.Second, "refused while the transaction would still have time, not at the deadline")
		require.Equal(t, 6, f.count(t, `SELECT count(*) FROM allocations WHERE ended_at IS NULL`), "nothing released")

		// With less than twice the reserve left, half of it is kept.
		brief, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		start = time.Now()
		_, _, err = f.svc.Release(brief, a.ID, "ci", models.EndedByClient, "success", "client:ci")
		require.Equal(t, apperr.Unavailable, apperr.CodeOf(err))
		require.Greater(t, time.Since(start), 500*time.Millisecond, "it waited for a turn")
		require.Less(t, time.Since(start), 1500*time.Millisecond, "and kept half of the time for the transaction")

		gone, cancel := context.WithCancel(ctx)
		cancel()
		_, _, err = f.svc.Release(gone, a.ID, "ci", models.EndedByClient, "success", "client:ci")
		require.ErrorIs(t, err, context.Canceled, "a caller that went away is not told the queue is full")
	})
}
