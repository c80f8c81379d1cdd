package ecsdaemon

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

type doFunc func(*http.Request) (*http.Response, error)

func (f doFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

// writerToBody is a request body like smithy-go's closed-safe one: it
// implements io.WriterTo, which net/http's last read of a body uses.
type writerToBody struct{ *bytes.Reader }

func (writerToBody) Close() error { return nil }

func TestClosedBodyGuard(t *testing.T) {
	t.Parallel()
	var sent *http.Request
	inner := doFunc(func(r *http.Request) (*http.Response, error) {
		sent = r
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://ecs.test/", nil)
	require.NoError(t, err)
	req.Body = writerToBody{bytes.NewReader([]byte(`{"cluster":"c"}`))}
	req.ContentLength = 15

	_, err = closedBodyGuard{inner}.Do(req)
	require.NoError(t, err)
	_, writerTo := sent.Body.(io.WriterTo)
	require.False(t, writerTo, "the transport must not see WriteTo")
	body, err := io.ReadAll(sent.Body)
	require.NoError(t, err)
	require.JSONEq(t, `{"cluster":"c"}`, string(body))
	_, still := req.Body.(io.WriterTo)
	require.True(t, still, "the caller's request is not modified")
}
