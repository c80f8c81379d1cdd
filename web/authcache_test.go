package web

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/models"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

func newTestAuthCache() (*authCache, *fakeClock) {
	clock := &fakeClock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	c := newAuthCache(time.Second)
	c.now = clock.now
	return c, clock
}

// tokenSource answers lookups from a token that tests revoke, counting the
// lookups.
type tokenSource struct {
	mu      sync.Mutex
	token   *models.APIToken // nil: revoked
	lookups atomic.Int32
}

func (s *tokenSource) lookup(context.Context) (*models.APIToken, error) {
	s.lookups.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token == nil {
		return nil, models.ErrNotFound
	}
	t, u := *s.token, *s.token.User
	t.User = &u
	return &t, nil
}

func (s *tokenSource) revoke() { s.set(nil) }

func (s *tokenSource) set(t *models.APIToken) { s.mu.Lock(); defer s.mu.Unlock(); s.token = t }

func TestAuthCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hash := []byte("0123456789abcdef0123456789abcdef")
	newSource := func() *tokenSource {
		return &tokenSource{token: &models.APIToken{ID: 7, Scopes: []string{"write"}, User: &models.User{ID: 3, Email: "ci@example.com"}}}
	}

	t.Run("a revoked token stops working once the TTL has passed", func(t *testing.T) {
		c, clock := newTestAuthCache()
		src := newSource()
		_, err := c.token(ctx, hash, src.lookup)
		require.NoError(t, err)
		src.revoke() // by another process: this one is not told
		clock.add(999 * time.Millisecond)
		_, err = c.token(ctx, hash, src.lookup)
		require.NoError(t, err, "within the TTL the remembered answer holds")
		require.EqualValues(t, 1, src.lookups.Load())
		clock.add(time.Millisecond)
		_, err = c.token(ctx, hash, src.lookup)
		require.ErrorIs(t, err, models.ErrNotFound, "at the TTL the token is looked up again")
		require.EqualValues(t, 2, src.lookups.Load())
	})

	t.Run("forget makes a revocation take effect at once", func(t *testing.T) {
		c, _ := newTestAuthCache()
		src := newSource()
		_, err := c.token(ctx, hash, src.lookup)
		require.NoError(t, err)
		src.revoke()
		c.forget()
		_, err = c.token(ctx, hash, src.lookup)
		require.ErrorIs(t, err, models.ErrNotFound)
	})

	t.Run("failed lookups are not remembered", func(t *testing.T) {
		c, _ := newTestAuthCache()
		src := newSource()
		src.revoke()
		_, err := c.token(ctx, hash, src.lookup)
		require.ErrorIs(t, err, models.ErrNotFound)
		src.set(newSource().token) // a token that becomes valid works at once
		_, err = c.token(ctx, hash, src.lookup)
		require.NoError(t, err)
	})

	t.Run("a remembered token still expires on time", func(t *testing.T) {
		c, clock := newTestAuthCache()
		exp := clock.now().Add(500 * time.Millisecond)
		src := newSource()
		src.token.ExpiresAt = &exp
		_, err := c.token(ctx, hash, src.lookup)
		require.NoError(t, err)
		clock.add(500 * time.Millisecond)
		_, err = c.token(ctx, hash, src.lookup)
		require.ErrorIs(t, err, models.ErrNotFound)
	})

	t.Run("callers get their own copies", func(t *testing.T) {
		c, _ := newTestAuthCache()
		src := newSource()
		a, err := c.token(ctx, hash, src.lookup)
		require.NoError(t, err)
		a.User.Role = models.RoleAdmin
		b, err := c.token(ctx, hash, src.lookup)
		require.NoError(t, err)
		require.Empty(t, b.User.Role)
	})

	t.Run("a lookup under way during forget is not remembered", func(t *testing.T) {
		c, _ := newTestAuthCache()
		src := newSource()
		_, err := c.token(ctx, hash, func(ctx context.Context) (*models.APIToken, error) {
			tok, err := src.lookup(ctx)
			src.revoke()
			c.forget() // the revocation commits while the old answer is on its way
			return tok, err
		})
		require.NoError(t, err)
		_, err = c.token(ctx, hash, src.lookup)
		require.ErrorIs(t, err, models.ErrNotFound)
	})

	t.Run("concurrent misses share one lookup", func(t *testing.T) {
		c, _ := newTestAuthCache()
		src := newSource()
		release := make(chan struct{})
		slow := func(ctx context.Context) (*models.APIToken, error) {
			<-release
			return src.lookup(ctx)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Go(func() {
				_, err := c.token(ctx, hash, slow)
				errs <- err
			})
		}
		time.Sleep(50 * time.Millisecond)
		close(release)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.EqualValues(t, 1, src.lookups.Load())
	})

	t.Run("a caller that gives up does not wait for the lookup", func(t *testing.T) {
		c, _ := newTestAuthCache()
		block := make(chan struct{})
		defer close(block)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := c.client(cctx, "user:ci@example.com", func(context.Context) (*models.Client, error) {
			<-block
			return nil, errors.New("never")
		})
		require.ErrorIs(t, err, context.Canceled)
	})

	t.Run("allow-list answers are remembered per key for the TTL", func(t *testing.T) {
		c, clock := newTestAuthCache()
		var lookups atomic.Int32
		onList := true
		lookup := func(context.Context) (*models.Client, error) {
			lookups.Add(1)
			if !onList {
				return nil, models.ErrNotFound
			}
			return &models.Client{Name: "ci"}, nil
		}
		cl, err := c.client(ctx, "user:ci@example.com", lookup)
		require.NoError(t, err)
		require.Equal(t, "ci", cl.Name)
		_, err = c.client(ctx, "user:ci@example.com", lookup)
		require.NoError(t, err)
		require.EqualValues(t, 1, lookups.Load())
		onList = false // removed from gantry.yaml by another process
		clock.add(time.Second)
		_, err = c.client(ctx, "user:ci@example.com", lookup)
		require.ErrorIs(t, err, models.ErrNotFound)
	})
}
