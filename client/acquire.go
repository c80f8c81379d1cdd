package client

import (
	"context"
	"fmt"
	"time"
)

// Backoff between Acquire's tries: exponential from backoffBase, doubling,
// at most backoffCap, with full jitter (a uniform pick from zero to that).
const (
	backoffBase = time.Second
	backoffCap  = 30 * time.Second
)

// Retry describes one wait between tries, for WithRetryHook.
type Retry struct {
	Pool    string
	Attempt int           // tries made so far
	Err     error         // why the last try failed (often an *APIError with status 423)
	Delay   time.Duration // the wait before the next try
	Waited  time.Duration // time since the first try
	Wait    time.Duration // the whole wait allowed
}

// WaitError is Acquire giving up: no environment within the wait. It wraps
// the last answer, so errors.As finds the *APIError (typically 423 Locked).
type WaitError struct {
	Pool     string
	Wait     time.Duration // the wait allowed
	Waited   time.Duration // the time spent
	Attempts int
	Last     error
	// RetryAfter, when set, is why it stopped before the wait was over: the
	// server asked for a pause that would have ended after it.
	RetryAfter time.Duration
}

func (e *WaitError) Error() string {
	tries := "tries"
	if e.Attempts == 1 {
		tries = "try"
	}
	early := ""
	if e.RetryAfter > 0 {
		early = fmt.Sprintf("; the server asked to wait %s before trying again, past the end of the wait", e.RetryAfter)
	}
	return fmt.Sprintf("no environment from pool %s after waiting %s of the %s allowed (%d %s%s); the last answer: %v",
		e.Pool, e.Waited.Round(time.Millisecond), e.Wait, e.Attempts, tries, early, e.Last)
}

func (e *WaitError) Unwrap() error { return e.Last }

// Acquire allocates like Allocate, and when nothing is free (423), the
// server is busy (429, 502, 503, 504) or unreachable, tries again after a
// backoff (1s doubling to at most 30s, with full jitter), never sooner than
// the server's Retry-After, until wait has passed. It then returns a
// *WaitError with the last answer. It makes no try after the wait is over,
// and gives up early when Retry-After falls beyond it. Other errors (400,
// 401, 403, ...) return at once. A wait of zero or less makes one try.
func (c *Client) Acquire(ctx context.Context, req AllocateRequest, wait time.Duration) (*Allocation, error) {
	start := c.now()
	deadline := start.Add(wait)
	for attempt := 1; ; attempt++ {
		a, err := c.Allocate(ctx, req)
		if err == nil {
			return a, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		ok, retryAfter := retryable(err)
		if !ok {
			return nil, err
		}
		now := c.now()
		remaining := deadline.Sub(now)
		if remaining <= 0 || retryAfter > remaining {
			e := &WaitError{Pool: req.Pool, Wait: wait, Waited: now.Sub(start), Attempts: attempt, Last: err}
			if remaining > 0 {
				e.RetryAfter = retryAfter
			}
			return nil, e
		}
		delay := min(max(c.jitter(backoff(attempt)), retryAfter), remaining)
		if c.onRetry != nil {
			c.onRetry(Retry{Pool: req.Pool, Attempt: attempt, Err: err, Delay: delay, Waited: now.Sub(start), Wait: wait})
		}
		if err := c.sleep(ctx, delay); err != nil {
			return nil, fmt.Errorf("waiting for an environment from pool %s: %w", req.Pool, err)
		}
	}
}

// backoff is the backoff ceiling after the attempt-th failed try.
func backoff(attempt int) time.Duration {
	d := backoffBase
	for i := 1; i < attempt && d < backoffCap; i++ {
		d *= 2
	}
	return min(d, backoffCap)
}

// jitter picks uniformly from [0, d].
func (c *Client) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(c.rand.Int64N(int64(d) + 1))
}
