package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// AWSIdentityHeader carries a signed sts:GetCallerIdentity request, the
// server's proof of the caller's AWS account.
const AWSIdentityHeader = "X-Gantry-AWS-Identity"

const (
	// requestTimeout bounds one HTTP exchange (the server's own limit is 30s).
	requestTimeout = time.Minute
	// cancelGrace is how long an allocation request in flight may still take
	// after the caller's context ends, so that what it grants is released
	// rather than left held until it expires.
	cancelGrace = 10 * time.Second
	// idempotentTries bounds the tries of reads and releases on transient
	// failures.
	idempotentTries = 4
	maxBody         = 8 << 20
)

// Client talks to one Gantry. It is safe for concurrent use.
type Client struct {
	base        string // without a trailing slash
	token       string
	awsIdentity func(context.Context) (string, error)
	http        *http.Client
	now         func() time.Time
	sleep       func(context.Context, time.Duration) error
	onRetry     func(Retry)
	userAgent   string

	mu   sync.Mutex // guards rand
	rand *rand.Rand
}

// Option configures a Client.
type Option func(*Client)

// WithToken authenticates with a Gantry API token (read and write scopes)
// of a user listed under a client in gantry.yaml.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithAWSIdentity authenticates with an AWS identity: identity returns the
// value of the X-Gantry-AWS-Identity header (a signed sts:GetCallerIdentity
// request). It is called for every request, since signatures expire.
func WithAWSIdentity(identity func(context.Context) (string, error)) Option {
	return func(c *Client) { c.awsIdentity = identity }
}

// WithHTTPClient sends requests through hc instead of a default client.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithClock replaces time.Now, which measures Acquire's wait.
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// WithSleep replaces the wait between retries; sleep must return early with
// ctx's error when ctx ends.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.sleep = sleep }
}

// WithRandSource sets the source of the retries' jitter.
func WithRandSource(src rand.Source) Option { return func(c *Client) { c.rand = rand.New(src) } }

// WithRetryHook calls hook before every wait between tries, e.g. to log
// progress while Acquire waits for a free environment.
func WithRetryHook(hook func(Retry)) Option { return func(c *Client) { c.onRetry = hook } }

// WithUserAgent names the caller in the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client of the Gantry at baseURL (e.g.
// https://gantry.example.com).
func New(baseURL string, opts ...Option) *Client {
	c := &Client{
		base:      strings.TrimSuffix(baseURL, "/"),
		http:      &http.Client{},
		now:       time.Now,
		sleep:     sleepCtx,
		userAgent: "gantry-go-client",
		rand:      rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// APIError is an error answer of the server: its status and the JSON error
// body {"error": {"code", "message", "fields"}}.
type APIError struct {
	Status  int               // HTTP status
	Code    string            // stable code: invalid, unauthorized, forbidden, not_found, locked, ...
	Message string            // for people
	Fields  map[string]string // for invalid requests: field → what is wrong with it
	// RetryAfter is the server's Retry-After, zero when it sent none.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	// The fields the message does not already tell: the server's one-field
	// message is "invalid <field>: <reason>".
	var extra []string
	for k, why := range e.Fields {
		if len(e.Fields) > 1 || e.Message != "invalid "+k+": "+why {
			extra = append(extra, k+": "+why)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		b.WriteString(" (" + strings.Join(extra, "; ") + ")")
	}
	code := e.Code
	if code == "" {
		code = strings.ToLower(http.StatusText(e.Status))
	}
	fmt.Fprintf(&b, " [HTTP %d %s]", e.Status, code)
	return b.String()
}

// retryable reports whether another try may succeed, and the earliest the
// server allows it.
func retryable(err error) (bool, time.Duration) {
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusLocked, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true, ae.RetryAfter
		}
		return false, 0
	}
	var te *transportError
	if !errors.As(err, &te) {
		return false, 0
	}
	// A certificate the client refuses is refused again; anything else
	// between here and the server (refused, reset, timed out, DNS) may pass.
	var cert *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	if errors.As(err, &cert) || errors.As(err, &unknownAuthority) || errors.As(err, &hostname) {
		return false, 0
	}
	return true, 0
}

// transportError is a failure to get an answer at all.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// call sends one request to path (under /api/v1) with body as JSON, and
// decodes a 2xx answer into out.
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	return c.callStatus(ctx, method, path, body, out, nil)
}

// callStatus is call telling status, when set, the status of a successful
// answer (201 from 200 where the API tells created from already there).
func (c *Client) callStatus(ctx context.Context, method, path string, body, out any, status func(int)) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encoding the request: %w", err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+"/api/v1"+path, r)
	if err != nil {
		return fmt.Errorf("gantry: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.awsIdentity != nil {
		h, err := c.awsIdentity(ctx)
		if err != nil {
			return fmt.Errorf("signing the AWS identity: %w", err)
		}
		req.Header.Set(AWSIdentityHeader, h)
	}
	res, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return err // the caller gave up
		}
		return &transportError{err: err}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxBody))
	if err != nil {
		return &transportError{err: fmt.Errorf("%s %s: reading the answer: %w", method, req.URL.Path, err)}
	}
	if res.StatusCode >= 300 {
		return apiError(res, raw)
	}
	if status != nil {
		status(res.StatusCode)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, req.URL.Path, err)
	}
	return nil
}

func apiError(res *http.Response, raw []byte) *APIError {
	e := &APIError{Status: res.StatusCode, RetryAfter: parseRetryAfter(res.Header.Get("Retry-After"), time.Now())}
	var body struct {
		Error struct {
			Code    string            `json:"code"`
			Message string            `json:"message"`
			Fields  map[string]string `json:"fields"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil && body.Error.Message != "" {
		e.Code, e.Message, e.Fields = body.Error.Code, body.Error.Message, body.Error.Fields
		return e
	}
	// Not Gantry's answer (a proxy's error page): keep a line of it.
	e.Message = res.Status
	if line, _, _ := strings.Cut(strings.TrimSpace(string(raw)), "\n"); line != "" && len(line) < 200 {
		e.Message += ": " + line
	}
	return e
}

// parseRetryAfter reads a Retry-After value: seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// retryIdempotent calls f until it succeeds, fails for good, or has been
// tried idempotentTries times: for requests that may safely be repeated.
func (c *Client) retryIdempotent(ctx context.Context, f func() error) error {
	return c.retry(ctx, retryable, f)
}

// retry calls f until it succeeds, fails in a way again says not to try
// again, or has been tried idempotentTries times, waiting between tries as
// retryIdempotent does.
func (c *Client) retry(ctx context.Context, again func(error) (bool, time.Duration), f func() error) error {
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || attempt == idempotentTries || ctx.Err() != nil {
			return err
		}
		ok, after := again(err)
		if !ok {
			return err
		}
		if err := c.sleep(ctx, max(c.jitter(backoff(attempt)), after)); err != nil {
			return err
		}
	}
}

// Allocate asks for environments once: the answer is an allocation, or an
// *APIError (423 Locked when nothing matching is free; see Acquire to wait).
//
// If ctx ends while the request is in flight, Allocate still waits a little
// for the answer and releases whatever was granted, so that a cancelled
// caller does not leave environments held until they expire.
func (c *Client) Allocate(ctx context.Context, req AllocateRequest) (*Allocation, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("allocating from pool %s: %w", req.Pool, err)
	}
	reqCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(cancelGrace, cancel) })
	defer stop()

	var out Allocation
	err := c.call(reqCtx, http.MethodPost, "/allocations", req, &out)
	if ctx.Err() != nil {
		if err == nil {
			_ = c.ReleaseAll(context.WithoutCancel(ctx), &out, "cancelled")
		}
		return nil, fmt.Errorf("allocating from pool %s: %w", req.Pool, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("allocating from pool %s: %w", req.Pool, err)
	}
	if len(out.Leases) == 0 {
		return nil, fmt.Errorf("allocating from pool %s: the answer holds no environment", req.Pool)
	}
	return &out, nil
}

// Release ends the lease id with outcome (free text such as "success"; it
// may be empty), which makes the server revoke the credentials and clean the
// environment. Releasing an ended lease is harmless, so transient failures
// are retried.
func (c *Client) Release(ctx context.Context, id, outcome string) (*Lease, error) {
	var body any
	if outcome != "" {
		body = struct {
			Outcome string `json:"outcome"`
		}{outcome}
	}
	var out Lease
	err := c.retryIdempotent(ctx, func() error {
		return c.call(ctx, http.MethodDelete, "/allocations/"+url.PathEscape(id), body, &out)
	})
	if err != nil {
		return nil, fmt.Errorf("releasing allocation %s: %w", id, err)
	}
	return &out, nil
}

// ReleaseAll releases every lease of a, returning the failures joined.
func (c *Client) ReleaseAll(ctx context.Context, a *Allocation, outcome string) error {
	var errs []error
	for _, l := range a.Leases {
		if _, err := c.Release(ctx, l.ID, outcome); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Extend moves the lease's expiry d later (within the pool's max_session).
// The answer carries new credentials when the old ones could not be
// extended (AWS sessions have a fixed length). It is not retried: a
// repeated extension would add d twice.
func (c *Client) Extend(ctx context.Context, id string, d time.Duration) (*Lease, error) {
	body := struct {
		Duration string `json:"duration"`
	}{d.String()}
	var out Lease
	if err := c.call(ctx, http.MethodPost, "/allocations/"+url.PathEscape(id)+"/extend", body, &out); err != nil {
		return nil, fmt.Errorf("extending allocation %s: %w", id, err)
	}
	return &out, nil
}

// Get returns the lease id (without credentials).
func (c *Client) Get(ctx context.Context, id string) (*Lease, error) {
	var out Lease
	err := c.retryIdempotent(ctx, func() error {
		return c.call(ctx, http.MethodGet, "/allocations/"+url.PathEscape(id), nil, &out)
	})
	if err != nil {
		return nil, fmt.Errorf("getting allocation %s: %w", id, err)
	}
	return &out, nil
}

// List returns leases from the allocation history, newest first.
func (c *Client) List(ctx context.Context, opts ListOptions) ([]Lease, error) {
	q := url.Values{}
	if opts.Pool != "" {
		q.Set("pool", opts.Pool)
	}
	if opts.Requester != "" {
		q.Set("requester", opts.Requester)
	}
	if opts.ActiveOnly {
		q.Set("active", "true")
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	path := "/allocations"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out struct {
		Allocations []Lease `json:"allocations"`
	}
	err := c.retryIdempotent(ctx, func() error { return c.call(ctx, http.MethodGet, path, nil, &out) })
	if err != nil {
		return nil, fmt.Errorf("listing allocations: %w", err)
	}
	return out.Allocations, nil
}

// Pools returns every pool with its capacity.
func (c *Client) Pools(ctx context.Context) ([]Pool, error) {
	var out struct {
		Pools []Pool `json:"pools"`
	}
	err := c.retryIdempotent(ctx, func() error { return c.call(ctx, http.MethodGet, "/pools", nil, &out) })
	if err != nil {
		return nil, fmt.Errorf("listing pools: %w", err)
	}
	return out.Pools, nil
}
