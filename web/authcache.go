package web

import (
	"context"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/gantryhq/gantry/models"
)

// AuthCacheTTL bounds how long this process goes on believing a bearer
// token or an allow-list entry after it was looked up. Revoking a token,
// disabling its owner, changing their role or removing them from the allow
// list takes effect in other processes (gantry admin, other web processes,
// gantry config apply) within this time; in the process that made the change
// through the web UI or API at once, because it forgets everything it
// remembered.
const AuthCacheTTL = time.Second

// authCache remembers the answers of the two lookups every allocation API
// call makes, the API token and the allow-list client, for AuthCacheTTL.
// CI clients call in bursts with the same token, and each lookup is a
// database round trip. Only positive answers are remembered, so a new token
// or a new allow-list entry works at once; a token's own expiry is checked on
// every use. Concurrent misses of one key share one query.
type authCache struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	gen     uint64 // bumped by forget, so a lookup in flight cannot store a stale answer
	tokens  map[string]cacheEntry[*models.APIToken]
	clients map[string]cacheEntry[*models.Client]
	flight  singleflight.Group
}

type cacheEntry[T any] struct {
	value T
	until time.Time
}

// authCacheMax bounds each map; past it, expired entries are dropped.
const authCacheMax = 4096

func newAuthCache(ttl time.Duration) *authCache {
	return &authCache{ttl: ttl, now: time.Now,
		tokens: map[string]cacheEntry[*models.APIToken]{}, clients: map[string]cacheEntry[*models.Client]{}}
}

// token returns the active token whose SHA-256 is hash, from the cache or
// from lookup. The answer is the caller's own copy.
func (c *authCache) token(ctx context.Context, hash []byte, lookup func(context.Context) (*models.APIToken, error)) (*models.APIToken, error) {
	key := string(hash)
	t, err := cached(ctx, c, c.tokens, "t:", key, lookup)
	if err != nil {
		return nil, err
	}
	if !t.Active(c.now()) {
		return nil, models.ErrNotFound // expired while remembered
	}
	out, u := *t, *t.User
	out.User = &u
	return &out, nil
}

// client returns the allow-list client of key (a user's e-mail, an AWS
// account), from the cache or from lookup. The answer is the caller's own copy.
func (c *authCache) client(ctx context.Context, key string, lookup func(context.Context) (*models.Client, error)) (*models.Client, error) {
	cl, err := cached(ctx, c, c.clients, "c:", key, lookup)
	if err != nil {
		return nil, err
	}
	out := *cl
	return &out, nil
}

// forget drops everything remembered, for a change this process made to
// tokens, users or the allow list.
func (c *authCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.tokens)
	clear(c.clients)
}

func cached[T any](ctx context.Context, c *authCache, m map[string]cacheEntry[T], kind, key string, lookup func(context.Context) (T, error)) (T, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := m[key]
	gen := c.gen
	c.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.value, nil
	}
	// A lookup that began before a forget is not shared with callers that
	// come after it.
	flightKey := kind + strconv.FormatUint(gen, 10) + ":" + key
	ch := c.flight.DoChan(flightKey, func() (any, error) {
		// Shared by every caller waiting for this key, so not bound to the
		// first caller's request.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		started := c.now()
		v, err := lookup(ctx)
		if err != nil {
			return v, err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.gen == gen {
			if len(m) >= authCacheMax {
				for k, e := range m {
					if !started.Before(e.until) {
						delete(m, k)
					}
				}
			}
			if len(m) < authCacheMax {
				m[key] = cacheEntry[T]{value: v, until: started.Add(c.ttl)}
			}
		}
		return v, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			var zero T
			return zero, r.Err
		}
		return r.Val.(T), nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
