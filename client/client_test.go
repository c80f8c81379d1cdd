package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/client"
)

// sleeps records the waits Acquire asks for; it waits for real only a
// hundredth of each, so that a 5-second Retry-After takes 50ms.
type sleeps struct {
	mu  sync.Mutex
	all []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.all = append(s.all, d)
	s.mu.Unlock()
	select {
	case <-time.After(d / 100):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *sleeps) list() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.all...)
}

// fakeClock is a clock whose sleeps move it on at once.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func TestAcquireReleaseAndTheVariables(t *testing.T) {
	t.Parallel()
	s := setup(t, pool{Name: "pg", Size: 1})
	c := client.New(s.URL, client.WithToken(s.Token))
	ctx := context.Background()

	a, err := c.Acquire(ctx, client.AllocateRequest{Pool: "pg", Requester: "client-test"}, time.Minute)
	require.NoError(t, err)
	require.NotEmpty(t, a.RequestID)
	require.Len(t, a.Leases, 1)
	l := a.Leases[0]
	require.Equal(t, "pg", l.Pool)
	require.Equal(t, "client-test", l.Requester)
	require.Equal(t, "ci", l.Client)
	require.True(t, l.Active())
	require.NotNil(t, l.Credentials)
	require.True(t, strings.HasPrefix(l.Credentials.URL, "postgres://"), l.Credentials.URL)

	env := envMap(l.Env())
	require.Equal(t, l.ID, env["GANTRY_ALLOCATION_ID"])
	require.Equal(t, l.Database, env["GANTRY_ENVIRONMENT"])
	require.Equal(t, l.Credentials.URL, env["DATABASE_URL"])
	require.Equal(t, "127.0.0.1", env["PGHOST"])
	require.Equal(t, "5432", env["PGPORT"])
	require.Equal(t, l.Database, env["PGDATABASE"])
	require.True(t, strings.HasPrefix(env["PGUSER"], "gantry_env_"), env["PGUSER"])
	require.NotEmpty(t, env["PGPASSWORD"])
	require.Equal(t, "disable", env["PGSSLMODE"])
	require.NotContains(t, env, "AWS_ACCESS_KEY_ID", "a postgres lease sets no AWS variables")

	// The libpq variables alone reach the leased database.
	conn, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=%s sslmode=%s",
		env["PGHOST"], env["PGPORT"], env["PGUSER"], env["PGPASSWORD"], env["PGDATABASE"], env["PGSSLMODE"]))
	require.NoError(t, err)
	var db string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&db))
	require.Equal(t, l.Database, db)
	conn.Close(ctx)

	all := envMap(a.Env())
	require.Equal(t, env["DATABASE_URL"], all["DATABASE_URL"], "the first environment is unprefixed")
	require.Equal(t, env["DATABASE_URL"], all["GANTRY_ENV_0_DATABASE_URL"])
	require.Equal(t, l.ID, all["GANTRY_ENV_0_ALLOCATION_ID"])
	require.Equal(t, "1", all["GANTRY_ENV_COUNT"])
	require.Equal(t, l.ID, all["GANTRY_ALLOCATION_IDS"])

	got, err := c.Get(ctx, l.ID)
	require.NoError(t, err)
	require.True(t, got.Active())
	require.Nil(t, got.Credentials, "reads do not repeat the credentials")

	ext, err := c.Extend(ctx, l.ID, 30*time.Minute)
	require.NoError(t, err)
	require.WithinDuration(t, l.ExpiresAt.Add(30*time.Minute), ext.ExpiresAt, time.Second)

	pools, err := c.Pools(ctx)
	require.NoError(t, err)
	require.Len(t, pools, 1)
	require.Equal(t, "pg", pools[0].Name)
	require.Equal(t, "postgres", pools[0].Kind)
	require.Equal(t, 1, pools[0].Capacity.InUse)
	require.Equal(t, 1, pools[0].Capacity.Total())
	require.Equal(t, 3*time.Hour, pools[0].Session())

	released, err := c.Release(ctx, l.ID, "success")
	require.NoError(t, err)
	require.False(t, released.Active())
	require.Equal(t, "success", released.Outcome)
	require.Equal(t, "client", released.EndedBy)
	_, err = pgx.Connect(ctx, env["DATABASE_URL"])
	require.Error(t, err, "the credentials stopped working")

	history, err := c.List(ctx, client.ListOptions{Requester: "client-test"})
	require.NoError(t, err)
	require.Len(t, history, 1)
	require.Equal(t, "success", history[0].Outcome)
}

func TestAcquireOfSeveralEnvironmentsNumbersTheVariables(t *testing.T) {
	t.Parallel()
	s := setup(t, pool{Name: "multi", Size: 3, Caps: func(i int) string { return fmt.Sprintf("{size: %s}", []string{"small", "large", "large"}[i]) }})
	c := client.New(s.URL, client.WithToken(s.Token))
	large := client.Requirement{Capabilities: map[string]string{"size": "large"}}
	a, err := c.Acquire(context.Background(), client.AllocateRequest{Pool: "multi", Requester: "t", Requirements: []client.Requirement{large, large}}, time.Minute)
	require.NoError(t, err)
	require.Len(t, a.Leases, 2)
	env := envMap(a.Env())
	require.Equal(t, "2", env["GANTRY_ENV_COUNT"])
	require.Equal(t, a.Leases[0].ID+" "+a.Leases[1].ID, env["GANTRY_ALLOCATION_IDS"])
	require.Equal(t, a.Leases[0].Credentials.URL, env["DATABASE_URL"])
	for i, l := range a.Leases {
		require.Equal(t, "large", l.Capabilities["size"])
		require.Equal(t, l.Credentials.URL, env[fmt.Sprintf("GANTRY_ENV_%d_DATABASE_URL", i)])
		require.Equal(t, l.Database, env[fmt.Sprintf("GANTRY_ENV_%d_PGDATABASE", i)])
		require.Equal(t, l.ID, env[fmt.Sprintf("GANTRY_ENV_%d_ALLOCATION_ID", i)])
	}
	require.NotEqual(t, env["GANTRY_ENV_0_PGDATABASE"], env["GANTRY_ENV_1_PGDATABASE"])
	require.NoError(t, c.ReleaseAll(context.Background(), a, "success"))
}

func TestAcquireWaitsUntilAnotherHolderReleases(t *testing.T) {
	t.Parallel()
	s := setup(t, pool{Name: "one", Size: 1})
	holder := client.New(s.URL, client.WithToken(s.Token))
	ctx := context.Background()
	held, err := holder.Allocate(ctx, client.AllocateRequest{Pool: "one", Requester: "holder"})
	require.NoError(t, err)

	_, err = holder.Allocate(ctx, client.AllocateRequest{Pool: "one", Requester: "impatient"})
	var locked *client.APIError
	require.ErrorAs(t, err, &locked, "a single try fails at once")
	require.Equal(t, 423, locked.Status)
	require.Equal(t, "locked", locked.Code)
	require.Equal(t, 5*time.Second, locked.RetryAfter)

	go func() {
		time.Sleep(1500 * time.Millisecond)
		_, _ = holder.Release(context.Background(), held.Leases[0].ID, "success")
	}()
	var sl sleeps
	var retries atomic.Int32
	waiter := client.New(s.URL, client.WithToken(s.Token), client.WithSleep(sl.sleep),
		client.WithRetryHook(func(r client.Retry) {
			retries.Add(1)
			require.Equal(t, "one", r.Pool)
			require.ErrorAs(t, r.Err, &locked)
		}))
	start := time.Now()
	a, err := waiter.Acquire(ctx, client.AllocateRequest{Pool: "one", Requester: "waiter"}, 30*time.Minute)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 1500*time.Millisecond, "it waited for the release")
	require.Equal(t, held.Leases[0].Environment, a.Leases[0].Environment, "and got the released environment, cleaned")
	waits := sl.list()
	require.GreaterOrEqual(t, len(waits), 2, "it retried")
	require.Equal(t, int(retries.Load()), len(waits))
	for _, d := range waits {
		require.GreaterOrEqual(t, d, 5*time.Second, "never sooner than Retry-After")
	}
	_, err = waiter.Release(ctx, a.Leases[0].ID, "success")
	require.NoError(t, err)
}

func TestAcquireGivesUpAtTheDeadline(t *testing.T) {
	t.Parallel()
	s := setup(t, pool{Name: "busy", Size: 1})
	ctx := context.Background()
	_, err := client.New(s.URL, client.WithToken(s.Token)).Allocate(ctx, client.AllocateRequest{Pool: "busy", Requester: "holder"})
	require.NoError(t, err)

	clock := &fakeClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	c := client.New(s.URL, client.WithToken(s.Token), client.WithClock(clock.Now), client.WithSleep(clock.Sleep))
	_, err = c.Acquire(ctx, client.AllocateRequest{Pool: "busy", Requester: "waiter"}, 2*time.Minute)
	var waitErr *client.WaitError
	require.ErrorAs(t, err, &waitErr)
	// It stops at the deadline, or just before it when the server's pause
	// (5 s) would end after it; the jittered waits decide which.
	require.LessOrEqual(t, waitErr.Waited, 2*time.Minute)
	if waitErr.Waited < 2*time.Minute {
		require.Greater(t, waitErr.Waited, 2*time.Minute-5*time.Second)
		require.Equal(t, 5*time.Second, waitErr.RetryAfter, "stopped early because of the server's pause, and says so")
	}
	require.Equal(t, len(clock.sleeps)+1, waitErr.Attempts)
	require.GreaterOrEqual(t, waitErr.Attempts, 5, "waits of at most 30s over 2 minutes")
	var last *client.APIError
	require.ErrorAs(t, err, &last, "the last answer is kept")
	require.Equal(t, 423, last.Status)
	for i, d := range clock.sleeps {
		require.LessOrEqual(t, d, 30*time.Second, "backoff is capped at 30s")
		if i < len(clock.sleeps)-1 { // the last one is cut short at the deadline
			require.GreaterOrEqual(t, d, 5*time.Second, "never sooner than the server's Retry-After")
		}
	}
	require.Contains(t, err.Error(), fmt.Sprintf("no environment from pool busy after waiting %s of the 2m0s allowed (%d tries",
		waitErr.Waited.Round(time.Millisecond), waitErr.Attempts))
	require.Contains(t, err.Error(), "[HTTP 423 locked]")

	t.Run("a wait shorter than Retry-After makes one try and says why", func(t *testing.T) {
		_, err := c.Acquire(ctx, client.AllocateRequest{Pool: "busy", Requester: "waiter"}, 3*time.Second)
		require.ErrorAs(t, err, &waitErr)
		require.Equal(t, 1, waitErr.Attempts)
		require.Contains(t, err.Error(), "the server asked to wait 5s before trying again, past the end of the wait")
	})
	t.Run("cancelling stops the wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		c := client.New(s.URL, client.WithToken(s.Token), client.WithRetryHook(func(client.Retry) { cancel() }))
		start := time.Now()
		_, err := c.Acquire(ctx, client.AllocateRequest{Pool: "busy", Requester: "waiter"}, time.Hour)
		require.ErrorIs(t, err, context.Canceled)
		require.Less(t, time.Since(start), 10*time.Second)
	})
}

func TestErrorsAreAPIErrors(t *testing.T) {
	t.Parallel()
	s := setup(t, pool{Name: "ci", Size: 1})
	ctx := context.Background()
	var slept atomic.Int32
	c := client.New(s.URL, client.WithToken(s.Token), client.WithSleep(func(context.Context, time.Duration) error { slept.Add(1); return nil }))

	_, err := c.Acquire(ctx, client.AllocateRequest{Pool: "nope", Requester: "t"}, time.Hour)
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 400, ae.Status)
	require.Equal(t, "invalid", ae.Code)
	require.Contains(t, ae.Fields, "pool")
	require.Equal(t, `allocating from pool nope: invalid pool: no pool named "nope" is registered [HTTP 400 invalid]`, err.Error(),
		"the field and its reason once")
	require.Zero(t, slept.Load(), "a bad request is not retried")

	_, err = c.Acquire(ctx, client.AllocateRequest{Pool: "ci", Requirements: []client.Requirement{{Capabilities: map[string]string{"size": "huge"}}}}, time.Hour)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 400, ae.Status)
	require.Contains(t, ae.Fields, "requester")
	require.Contains(t, err.Error(), "requester: is required")

	_, err = client.New(s.URL).Allocate(ctx, client.AllocateRequest{Pool: "ci", Requester: "t"})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 401, ae.Status)
	require.Equal(t, "unauthorized", ae.Code)

	_, err = c.Release(ctx, "00000000-0000-0000-0000-000000000000", "success")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 404, ae.Status)
	_, err = c.Get(ctx, "not-a-uuid")
	require.ErrorAs(t, err, &ae)
	require.Contains(t, ae.Fields, "id")
	require.Zero(t, slept.Load())

	var identities atomic.Int32
	aws := client.New(s.URL, client.WithAWSIdentity(func(context.Context) (string, error) {
		identities.Add(1)
		return "signed-request", nil
	}))
	_, err = aws.Pools(ctx)
	require.ErrorAs(t, err, &ae, "the server checks the identity it was sent, and this one is not signed")
	require.Equal(t, 401, ae.Status)
	require.Contains(t, ae.Message, "X-Gantry-AWS-Identity")
	require.Equal(t, int32(1), identities.Load(), "the identity is signed per request")

	failing := client.New(s.URL, client.WithAWSIdentity(func(context.Context) (string, error) { return "", errors.New("no role") }))
	_, err = failing.Pools(ctx)
	require.ErrorContains(t, err, "signing the AWS identity: no role")
}
