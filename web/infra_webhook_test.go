package web_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/github"
)

// countingBody is a request body that says how much of it was read.
type countingBody struct {
	r    io.Reader
	read atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error { return nil }

// TestWebhookRefusesWhatItCanBeforeReadingTheBody: a delivery costs up to
// 25 MB to read, so an unsigned one is refused unread, a body declared too
// large is told the real limit, and an address whose deliveries keep
// failing their signature is slowed down before anything is read.
func TestWebhookRefusesWhatItCanBeforeReadingTheBody(t *testing.T) {
	t.Parallel()
	b := setupInfra(t)
	h := b.server.Handler()
	post := func(addr, signature string, body io.ReadCloser, length int64) (*httptest.ResponseRecorder, string) {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/github", body)
		req.RemoteAddr = addr + ":40000"
		req.ContentLength = length
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(github.HeaderEvent, "pull_request")
		req.Header.Set(github.HeaderDelivery, "d-1")
		if signature != "" {
			req.Header.Set(github.HeaderSignature, signature)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec, rec.Body.String()
	}

	big := &countingBody{r: bytes.NewReader(make([]byte, 24<<20))}
	rec, body := post("10.0.0.1", "", big, 24<<20)
	require.Equal(t, http.StatusUnauthorized, rec.Code, body)
	require.Contains(t, body, "no X-Hub-Signature-256 header")
	require.Zero(t, big.read.Load(), "an unsigned delivery's body is never read")

	rec, body = post("10.0.0.2", "sha256=00", io.NopCloser(strings.NewReader("x")), 26<<20)
	require.Equal(t, http.StatusBadRequest, rec.Code, body)
	require.Contains(t, body, "larger than 25 MB", "the limit said is the webhook's, not the API's 1 MB")

	for range 10 {
		rec, body = post("10.0.0.3", "sha256=0000", io.NopCloser(strings.NewReader(`{"zen":"x"}`)), 11)
		require.Equal(t, http.StatusUnauthorized, rec.Code, body)
	}
	again := &countingBody{r: strings.NewReader(`{"zen":"x"}`)}
	rec, body = post("10.0.0.3", "sha256=0000", again, 11)
	require.Equal(t, http.StatusTooManyRequests, rec.Code, body)
	require.Equal(t, "60", rec.Header().Get("Retry-After"))
	require.Zero(t, again.read.Load(), "refused before reading")
	rec, body = post("10.0.0.4", "sha256=0000", io.NopCloser(strings.NewReader(`{"zen":"x"}`)), 11)
	require.Equal(t, http.StatusUnauthorized, rec.Code, "another address is not slowed down: %s", body)
}
