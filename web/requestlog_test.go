package web_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// syncBuffer is a log destination the server's goroutines write to while
// the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// requestLines are the request log's lines for a path, in order.
func (b *syncBuffer) requestLines(path string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if strings.Contains(l, "msg=request") && strings.Contains(l, "path="+path+" ") {
			out = append(out, l)
		}
	}
	return out
}

// TestAgentLongPollsAreLoggedAtDebug: an agent polls all day, so a
// successful poll is a debug line; a refused one, and every other request,
// stays at info where an operator reads them.
func TestAgentLongPollsAreLoggedAtDebug(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	s := servertest.NewWith(t, servertest.Options{Logger: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	b := &bundle{Server: s, srv: s.HTTP, server: s.Web, db: s.DB, queue: s.Queue, pools: s.Pools, logger: s.Logger}
	ops := b.user(t, "ops@example.com", models.RoleOperator)
	agent := b.token(t, ops, "agent")

	res, body := b.call(t, http.MethodPost, "/api/v1/daemons/agents", agent, `{"cluster":"web","id":"m-1"}`)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	res, body = b.call(t, http.MethodGet, "/api/v1/daemons/agents/m-1/tasks?wait=0s", agent, "")
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	res, _ = b.call(t, http.MethodGet, "/api/v1/daemons/agents/m-1/tasks?wait=soon", agent, "")
	require.Equal(t, http.StatusBadRequest, res.StatusCode)

	polls := b.logLines(t, &out, "/api/v1/daemons/agents/m-1/tasks", 2)
	require.Contains(t, polls[0], "level=DEBUG", "a successful poll")
	require.Contains(t, polls[1], "level=INFO", "a refused poll")
	require.Contains(t, b.logLines(t, &out, "/api/v1/daemons/agents", 1)[0], "level=INFO", "registering")
}

// logLines waits for the request log to hold n lines for path: the
// logger runs after the answer is written.
func (b *bundle) logLines(t *testing.T, out *syncBuffer, path string, n int) []string {
	t.Helper()
	var lines []string
	require.Eventually(t, func() bool { lines = out.requestLines(path); return len(lines) >= n }, time.Minute, 10*time.Millisecond, "request log lines for %s", path)
	return lines
}
