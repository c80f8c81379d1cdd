package client_test

import (
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/client"
)

// maxSource makes the jitter pick the top of its range.
type maxSource struct{}

func (maxSource) Uint64() uint64 { return math.MaxUint64 }

// A proxy in front of Gantry answering 503 without Retry-After: the waits
// follow the backoff, 1s doubling to 30s, capped.
func TestAcquireBacksOffExponentiallyWithACap(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/api/v1/allocations", r.URL.Path)
		require.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		if calls.Add(1) < 9 {
			http.Error(w, "<html>upstream unavailable</html>", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"request_id":"r","allocations":[{"id":"a","pool":"p","environment":"e"}]}`))
	}))
	defer srv.Close()
	clock := &fakeClock{now: time.Unix(0, 0)}
	var hooks []client.Retry
	c := client.New(srv.URL, client.WithToken("tok"), client.WithClock(clock.Now), client.WithSleep(clock.Sleep),
		client.WithRandSource(maxSource{}), client.WithRetryHook(func(r client.Retry) { hooks = append(hooks, r) }))
	a, err := c.Acquire(context.Background(), client.AllocateRequest{Pool: "p", Requester: "t"}, time.Hour)
	require.NoError(t, err)
	require.Equal(t, "e", a.Leases[0].Environment)
	s := time.Second
	require.Equal(t, []time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s, 30 * s}, clock.sleeps)
	require.Len(t, hooks, 8)
	require.Equal(t, 3, hooks[2].Attempt)
	require.Equal(t, 7*s, hooks[3].Waited)
	require.Contains(t, hooks[0].Err.Error(), "503 Service Unavailable: <html>upstream unavailable</html> [HTTP 503 service unavailable]")
}

func TestAcquireJitterStaysWithinTheBackoff(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	clock := &fakeClock{now: time.Unix(0, 0)}
	c := client.New(srv.URL, client.WithClock(clock.Now), client.WithSleep(clock.Sleep))
	_, err := c.Acquire(context.Background(), client.AllocateRequest{Pool: "p", Requester: "t"}, 10*time.Minute)
	var waitErr *client.WaitError
	require.ErrorAs(t, err, &waitErr)
	require.Equal(t, 10*time.Minute, waitErr.Waited, "it kept trying up to the deadline")
	distinct := map[time.Duration]bool{}
	for i, d := range clock.sleeps {
		ceiling := 30 * time.Second
		if i < 5 {
			ceiling = time.Second << i
		}
		require.LessOrEqual(t, d, ceiling, "wait %d", i)
		require.GreaterOrEqual(t, d, time.Duration(0))
		distinct[d] = true
	}
	require.Greater(t, len(distinct), len(clock.sleeps)/2, "the waits are jittered")
}

func TestAcquireRetriesWhenTheServerIsUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens: connections are refused

	clock := &fakeClock{now: time.Unix(0, 0)}
	c := client.New("http://"+addr, client.WithClock(clock.Now), client.WithSleep(clock.Sleep))
	_, err = c.Acquire(context.Background(), client.AllocateRequest{Pool: "p", Requester: "t"}, time.Minute)
	var waitErr *client.WaitError
	require.ErrorAs(t, err, &waitErr)
	require.Greater(t, waitErr.Attempts, 3)
	require.ErrorContains(t, err, "connection refused")

	_, err = c.Release(context.Background(), "id", "success")
	require.ErrorContains(t, err, "connection refused")
	require.Len(t, clock.sleeps, waitErr.Attempts-1+3, "a release is tried 4 times")
}

// Retry-After as an HTTP date is honoured too.
func TestRetryAfterAsADate(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", time.Now().Add(90*time.Second).UTC().Format(http.TimeFormat))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusLocked)
			_, _ = w.Write([]byte(`{"error":{"code":"locked","message":"No matching environment is free now; retry later."}}`))
			return
		}
		_, _ = w.Write([]byte(`{"request_id":"r","allocations":[{"id":"a"}]}`))
	}))
	defer srv.Close()
	clock := &fakeClock{now: time.Now()}
	c := client.New(srv.URL, client.WithClock(clock.Now), client.WithSleep(clock.Sleep))
	_, err := c.Acquire(context.Background(), client.AllocateRequest{Pool: "p", Requester: "t"}, time.Hour)
	require.NoError(t, err)
	require.Len(t, clock.sleeps, 1)
	require.InDelta(t, 90*time.Second, clock.sleeps[0], float64(2*time.Second))
}

// An allocation granted after the caller gave up is released at once.
func TestAllocateCancelledInFlightReleasesWhatItGot(t *testing.T) {
	t.Parallel()
	proceed := make(chan struct{})
	released := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.Method {
		case http.MethodPost:
			<-proceed
			_, _ = w.Write([]byte(`{"request_id":"r","allocations":[{"id":"a1"}]}`))
		case http.MethodDelete:
			body, _ := io.ReadAll(r.Body)
			released <- r.URL.Path + " " + string(body)
			_, _ = w.Write([]byte(`{"id":"a1","outcome":"cancelled"}`))
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(100 * time.Millisecond)
		cancel()
		close(proceed) // the server answers after the caller gave up
	}()
	_, err := client.New(srv.URL).Allocate(ctx, client.AllocateRequest{Pool: "p", Requester: "t"})
	require.ErrorIs(t, err, context.Canceled)
	select {
	case got := <-released:
		require.Equal(t, `/api/v1/allocations/a1 {"outcome":"cancelled"}`, got)
	default:
		t.Fatal("the allocation was not released")
	}
}
