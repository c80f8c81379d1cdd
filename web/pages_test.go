package web_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/models"
)

func TestLogin(t *testing.T) {
	t.Parallel()
	b := setup(t, "GANTRY_LOGIN_ATTEMPTS=3")
	b.user(t, "ada@example.com", models.RoleViewer)

	t.Run("without the CSRF token the form is refused", func(t *testing.T) {
		br := b.browser(t)
		res, _ := br.post(t, "/login", url.Values{"email": {"ada@example.com"}, "password": {password}})
		require.Equal(t, http.StatusForbidden, res.StatusCode)
	})
	t.Run("a wrong password gets a generic error", func(t *testing.T) {
		br := b.browser(t)
		_, _, csrf := br.get(t, "/login")
		res, body := br.post(t, "/login", url.Values{"_csrf": {csrf}, "email": {"ada@example.com"}, "password": {"wrong-password-here"}})
		require.Equal(t, http.StatusUnauthorized, res.StatusCode)
		require.Contains(t, body, "Email or password is incorrect.")
		res, body2 := br.post(t, "/login", url.Values{"_csrf": {csrf}, "email": {"nobody@example.com"}, "password": {"wrong-password-here"}})
		require.Equal(t, http.StatusUnauthorized, res.StatusCode)
		require.Contains(t, body2, "Email or password is incorrect.", "an unknown email reads the same")
	})
	t.Run("the right password signs in and goes back where it was going", func(t *testing.T) {
		br := b.browser(t)
		res, err := br.Get(b.srv.URL + "/tokens")
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		require.Equal(t, "/login?next=%2Ftokens", res.Header.Get("Location"))

		_, _, csrf := br.get(t, "/login?next=/tokens")
		res, _ = br.post(t, "/login", url.Values{"_csrf": {csrf}, "email": {"ADA@example.com"}, "password": {password}, "next": {"/tokens"}})
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		require.Equal(t, "/tokens", res.Header.Get("Location"))
		var session *http.Cookie
		for _, c := range res.Cookies() {
			if c.Name == "gantry_session" {
				session = c
			}
		}
		require.NotNil(t, session)
		require.True(t, session.HttpOnly)
		require.Equal(t, http.SameSiteLaxMode, session.SameSite)

		status, body, _ := br.get(t, "/tokens")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, body, "ada@example.com"[:3])

		status, _, csrf = br.get(t, "/")
		require.Equal(t, http.StatusOK, status)
		res, _ = br.post(t, "/logout", url.Values{"_csrf": {csrf}})
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		status, _, _ = br.get(t, "/")
		require.Equal(t, http.StatusSeeOther, status, "signed out")
	})
	t.Run("next cannot send people to another site", func(t *testing.T) {
		br := b.browser(t)
		_, _, csrf := br.get(t, "/login")
		res, _ := br.post(t, "/login", url.Values{"_csrf": {csrf}, "email": {"ada@example.com"}, "password": {password}, "next": {"//evil.example.com/"}})
		require.Equal(t, "/", res.Header.Get("Location"))
	})
	t.Run("failures block the account, not everyone at the address, and say until when", func(t *testing.T) {
		b := setup(t, "GANTRY_LOGIN_ATTEMPTS=3", "GANTRY_LOGIN_WINDOW=30m")
		b.user(t, "bob@example.com", models.RoleViewer)
		b.user(t, "grace@example.com", models.RoleViewer)
		br := b.browser(t)
		_, _, csrf := br.get(t, "/login")
		for i := 0; i < 3; i++ {
			res, _ := br.post(t, "/login", url.Values{"_csrf": {csrf}, "email": {"bob@example.com"}, "password": {"not-the-password"}})
			require.Equal(t, http.StatusUnauthorized, res.StatusCode)
		}
		res, body := br.post(t, "/login", url.Values{"_csrf": {csrf}, "email": {"bob@example.com"}, "password": {password}})
		require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "even the right password waits out the window")
		require.Regexp(t, `Too many failed sign-ins for this account: it is blocked until (\d{4}-\d\d-\d\d )?\d\d:\d\d UTC\.`, body)
		retry, err := strconv.Atoi(res.Header.Get("Retry-After"))
		require.NoError(t, err, "Retry-After: %q", res.Header.Get("Retry-After"))
		require.InDelta(t, 30*60, retry, 60, "the block lasts the window from the first failure")

		res, _ = br.post(t, "/login", url.Values{"_csrf": {csrf}, "email": {"grace@example.com"}, "password": {password}})
		require.Equal(t, http.StatusSeeOther, res.StatusCode, "another account from the same address signs in")
	})
	t.Run("a sign-in that finds every hashing slot taken gets 503 at once and is not counted", func(t *testing.T) {
		b := setup(t, "GANTRY_LOGIN_CONCURRENCY=1")
		b.user(t, "grace@example.com", models.RoleViewer)
		br := b.browser(t)
		_, _, csrf := br.get(t, "/login")
		var signedIn, busy atomic.Int32
		// With one slot, concurrent sign-ins soon overlap; the right password
		// is sent so that nothing here counts towards a limit.
		require.Eventually(t, func() bool {
			var wg sync.WaitGroup
			for range 6 {
				wg.Go(func() {
					res, body := br.post(t, "/login", url.Values{"_csrf": {csrf}, "email": {"grace@example.com"}, "password": {password}})
					switch res.StatusCode {
					case http.StatusSeeOther:
						signedIn.Add(1)
					case http.StatusServiceUnavailable:
						assert.Equal(t, "1", res.Header.Get("Retry-After"))
						assert.Contains(t, body, "Too many sign-ins are being checked right now. Try again in a second.")
						busy.Add(1)
					default:
						assert.Failf(t, "unexpected status", "%d: %s", res.StatusCode, body)
					}
				})
			}
			wg.Wait()
			return busy.Load() > 0
		}, time.Minute, 10*time.Millisecond)
		var attempts int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM login_attempts").Scan(&attempts))
		require.Equal(t, int(signedIn.Load()), attempts, "only the sign-ins that were checked are attempts")
	})
	t.Run("every outcome is in the log", func(t *testing.T) {
		ctx := context.Background()
		failed, err := models.ListLog(ctx, b.db.Bun, models.LogFilter{Event: access.EventLoginFailed})
		require.NoError(t, err)
		require.NotEmpty(t, failed)
		ok, err := models.ListLog(ctx, b.db.Bun, models.LogFilter{Event: access.EventLoggedIn})
		require.NoError(t, err)
		require.NotEmpty(t, ok)
		require.Equal(t, "user:ada@example.com", ok[0].Actor)
	})
}

// Every route but the public ones must refuse an anonymous caller: a page
// sends them to sign in, an API route or a form post answers 401.
func TestEveryRouteRequiresAuthentication(t *testing.T) {
	t.Parallel()
	// One anonymous address calls every route at once: a burst as large as
	// the routes, so that each answer is about authentication, not the
	// API's rate limit (429).
	b := setup(t, "GANTRY_API_BURST=10000")
	public := map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /login": true, "POST /login": true, "GET /assets/:name": true,
		// The emailed voting link: its signed token is the credential.
		"GET /approvals/link/:token": true, "POST /approvals/link/:token": true}
	checked := 0
	for _, r := range b.server.Routes() {
		key := r.Method + " " + r.Path
		// The API's catch-all only says "no such endpoint".
		if public[key] || r.Path == "/api/v1/*" || r.Method == "echo_route_not_found" {
			continue
		}
		path := strings.NewReplacer(":id", "1", ":name", "x", "*", "x").Replace(r.Path)
		if path == "" {
			path = "/"
		}
		req, err := http.NewRequest(r.Method, b.srv.URL+path, nil)
		require.NoError(t, err)
		res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		require.NoError(t, err)
		res.Body.Close()
		switch {
		case r.Method == http.MethodGet && !isAPI(path):
			require.Equal(t, http.StatusSeeOther, res.StatusCode, key)
			require.True(t, strings.HasPrefix(res.Header.Get("Location"), "/login"), key)
		default:
			require.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, res.StatusCode, key)
		}
		checked++
	}
	require.Greater(t, checked, 30)
}

func TestViewerCannotAdminister(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, "vera@example.com", models.RoleViewer)
	br := b.browser(t)
	br.login(t, "vera@example.com")
	for _, path := range []string{"/admin", "/admin/users", "/admin/jobs", "/admin/tokens"} {
		status, body, _ := br.get(t, path)
		require.Equal(t, http.StatusForbidden, status, path)
		require.Contains(t, body, `data-testid="error-page"`)
	}
	_, _, csrf := br.get(t, "/")
	res, _ := br.post(t, "/admin/users", url.Values{"_csrf": {csrf}, "email": {"x@example.com"}, "role": {"admin"}, "password": {"long-enough-password"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	_, err := models.UserByEmail(context.Background(), b.db.Bun, "x@example.com")
	require.ErrorIs(t, err, models.ErrNotFound)
}

func TestAdminManagesUsers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, "root@example.com", models.RoleAdmin)
	br := b.browser(t)
	br.login(t, "root@example.com")
	ctx := context.Background()

	_, _, csrf := br.get(t, "/admin/users")
	res, body := br.post(t, "/admin/users", url.Values{"_csrf": {csrf}, "email": {"bad"}, "role": {"viewer"}, "password": {"short"}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, body, `data-testid="error-email"`)
	require.Contains(t, body, `data-testid="error-password"`)
	require.Contains(t, body, `value="bad"`, "what was typed is kept")

	res, _ = br.post(t, "/admin/users", url.Values{"_csrf": {csrf}, "email": {"new@example.com"}, "name": {"New"}, "role": {"approver"}, "password": {"long-enough-password"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	status, body, _ := br.get(t, "/admin/users")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "Created new@example.com as approver.", "the flash message arrives once")
	_, body, _ = br.get(t, "/admin/users")
	require.NotContains(t, body, "Created new@example.com")

	u, err := models.UserByEmail(ctx, b.db.Bun, "new@example.com")
	require.NoError(t, err)
	res, _ = br.post(t, "/admin/users/"+itoa(int(u.ID))+"/role", url.Values{"_csrf": {csrf}, "role": {"operator"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	res, _ = br.post(t, "/admin/users/"+itoa(int(u.ID))+"/disable", url.Values{"_csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	u, err = models.UserByEmail(ctx, b.db.Bun, "new@example.com")
	require.NoError(t, err)
	require.Equal(t, models.RoleOperator, u.Role)
	require.True(t, u.Disabled())

	changes, err := models.ListLog(ctx, b.db.Bun, models.LogFilter{Target: access.UserTarget(u.ID)})
	require.NoError(t, err)
	var events []string
	for _, e := range changes {
		events = append(events, e.Event)
		require.Equal(t, "user:root@example.com", e.Actor)
	}
	require.Equal(t, []string{access.EventUserDisabled, access.EventUserRoleChanged, access.EventUserCreated}, events)
}

func TestTokensPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, "ops@example.com", models.RoleOperator)
	br := b.browser(t)
	br.login(t, "ops@example.com")

	_, body, csrf := br.get(t, "/tokens")
	require.Contains(t, body, `data-testid="tokens-empty"`)
	require.Contains(t, body, `data-testid="token-form"`, "one's own tokens page offers a new one")
	require.NotContains(t, body, `value="admin"`, "an operator is not offered the admin scope")

	res, body := br.post(t, "/tokens", url.Values{"_csrf": {csrf}, "name": {"ci"}, "scopes": {"read", "write"}, "expires_in": {"720h"}})
	require.Equal(t, http.StatusCreated, res.StatusCode)
	secret := between(body, `data-testid="new-token-secret">`, "<")
	require.True(t, strings.HasPrefix(secret, "gnt_"), body)

	res, me := b.call(t, "GET", "/api/v1/me", secret, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, []any{"read", "write"}, me["token"].(map[string]any)["scopes"])

	_, body, _ = br.get(t, "/tokens")
	require.NotContains(t, body, secret, "the secret is shown only once")

	tokens, err := models.ListTokens(context.Background(), b.db.Bun, 0)
	require.NoError(t, err)
	res, _ = br.post(t, "/tokens/"+itoa(int(tokens[0].ID))+"/revoke", url.Values{"_csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	res, _ = b.call(t, "GET", "/api/v1/me", secret, "")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)

	res, body = br.post(t, "/tokens", url.Values{"_csrf": {csrf}, "name": {""}})
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, body, `data-testid="error-name"`)
	require.Contains(t, body, `data-testid="error-scopes"`)
}

func TestLogPageAndStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, "ops@example.com", models.RoleOperator)
	ctx := context.Background()
	for i := 0; i < 60; i++ {
		require.NoError(t, models.AppendLog(ctx, b.db.Bun, &models.LogEntry{DeploymentID: "d1", TargetID: "p-web", Revision: "v" + itoa(i), Event: "stage-finished-successfully", Actor: "pipeline"}))
	}
	br := b.browser(t)
	br.login(t, "ops@example.com")

	status, body, _ := br.get(t, "/log?target=p-web")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, 50, strings.Count(body, `data-testid="log-row"`))
	require.Contains(t, body, `data-testid="page-older"`)
	require.Contains(t, body, "v59")
	require.NotContains(t, body, ">v9<")

	_, body, _ = br.get(t, "/log?target=p-web&before="+between(body, "before=", `"`))
	require.Equal(t, 10, strings.Count(body, `data-testid="log-row"`))
	require.Contains(t, body, "Older page")

	status, body, _ = br.get(t, "/log?target=nothing")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "No entries match these filters")

	status, _, _ = br.get(t, "/log?until=not-a-time")
	require.Equal(t, http.StatusBadRequest, status)

	t.Run("the stream sends new entries as rendered rows", func(t *testing.T) {
		last, err := models.LastLogID(ctx, b.db.Bun)
		require.NoError(t, err)
		// Generous: the stream's answer is prompt unless the machine is busy.
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/log/stream?target=p-api&after="+itoa(int(last)), nil)
		res, err := br.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))

		// One entry for another target (filtered out), then one for ours.
		require.NoError(t, models.AppendLog(ctx, b.db.Bun, &models.LogEntry{TargetID: "p-web", Event: "x", Actor: "t"}))
		require.NoError(t, models.AppendLog(ctx, b.db.Bun, &models.LogEntry{TargetID: "p-api", Event: "pipeline-started", Revision: "r42", Actor: "t"}))
		sc := bufio.NewScanner(res.Body)
		var event []string
		for sc.Scan() {
			line := sc.Text()
			if line == "" && len(event) > 0 && strings.HasPrefix(event[0], "id:") {
				break
			}
			if line == "" {
				event = nil
				continue
			}
			event = append(event, line)
		}
		joined := strings.Join(event, "\n")
		require.Contains(t, joined, "event: row")
		require.Contains(t, joined, "r42")
		require.Contains(t, joined, `data-testid="log-row"`)
		require.NotContains(t, joined, ">x<")

		// A carriage return in a field ends a line for an event-stream
		// parser: it must not start fields of its own (a retry, an id).
		require.NoError(t, models.AppendLog(ctx, b.db.Bun, &models.LogEntry{TargetID: "p-api", Event: "pipeline-started",
			Revision: "r43\rretry: 1\rid: 999999\r\ndata: <b>injected</b>", Actor: "t"}))
		var raw strings.Builder
		buf := make([]byte, 4096)
		for !strings.Contains(raw.String(), "r43") || !strings.Contains(raw.String()[strings.Index(raw.String(), "r43"):], "\n\n") {
			n, err := res.Body.Read(buf)
			raw.Write(buf[:n])
			require.NoError(t, err, "the stream ended before the entry: %q", raw.String())
		}
		for _, line := range regexp.MustCompile("\r\n|\r|\n").Split(raw.String(), -1) {
			require.False(t, strings.HasPrefix(line, "retry:") || strings.HasPrefix(line, "id: 999999"), "a field was injected: %q", line)
			if line != "" {
				require.Regexp(t, `^(id|event|data|retry|:)`, line, "every line is a field of the stream's own")
			}
		}
	})
}

func TestHealthMetricsAndHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, body := b.call(t, "GET", "/healthz", "", "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "ok", body["status"])
	res, body = b.call(t, "GET", "/readyz", "", "")
	require.Equal(t, http.StatusOK, res.StatusCode, body)

	res, _ = b.call(t, "GET", "/metrics", "", "")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "metrics need a read token")
	token := b.token(t, b.user(t, "prom@example.com", models.RoleViewer), "read")
	req, _ := http.NewRequest("GET", b.srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw := new(strings.Builder)
	_, _ = bufio.NewReader(res.Body).WriteTo(raw)
	require.Contains(t, raw.String(), `gantry_http_requests_total{method="GET",route="/healthz",status="200"} 1`)
	require.Contains(t, raw.String(), "gantry_http_request_duration_seconds_bucket")
	require.Contains(t, raw.String(), "gantry_jobs_scrape_errors 0")

	res, err = http.Get(b.srv.URL + "/login")
	require.NoError(t, err)
	res.Body.Close()
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'self'")
	require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"))
	require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
	require.NotEmpty(t, res.Header.Get("X-Request-Id"))
}

func TestReadyzWaitsForMigrations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var applied int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM gantry_migrations").Scan(&applied))
	_, err := b.db.Bun.ExecContext(context.Background(), "DELETE FROM gantry_migrations")
	require.NoError(t, err)
	res, body := b.call(t, "GET", "/readyz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	require.EqualValues(t, applied, body["pending_migrations"])
}

// between cuts the text between start and end out of body.
func between(body, start, end string) string {
	_, after, ok := strings.Cut(body, start)
	if !ok {
		return ""
	}
	value, _, _ := strings.Cut(after, end)
	return strings.TrimSpace(value)
}

// isAPI says whether path answers JSON rather than pages.
func isAPI(path string) bool {
	return strings.HasPrefix(path, "/api/") || strings.HasPrefix(path, "/allocations") || path == "/pools" || path == "/metrics"
}

// TestDatabaseOutage: while the database refuses connections, /readyz says
// so without naming the database's user, host or port, and the API answers
// 503 (try again), not 500.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token := b.token(t, b.user(t, "ops@example.com", models.RoleViewer), "read")
	ctx := context.Background()
	var name string
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT current_database()").Scan(&name))
	admin, err := pgx.Connect(ctx, testdb.AdminURL())
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH ALLOW_CONNECTIONS false")
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH ALLOW_CONNECTIONS true")
	})
	_, err = admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name)
	require.NoError(t, err)

	// Twice: the first may meet a connection the termination closed, the
	// second is refused by the server (its error names the database).
	for range 2 {
		res, body := b.call(t, "GET", "/readyz", "", "")
		require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
		require.Equal(t, "unavailable", body["status"])
		raw := fmt.Sprint(body)
		for _, secret := range []string{name, "postgres", "127.0.0.1", "5432"} {
			require.NotContains(t, raw, secret, "/readyz tells anyone about the database")
		}
	}

	res, body := b.call(t, "GET", "/api/v1/log", token, "")
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, body)
	require.Equal(t, "unavailable", errorCode(body))
}

// TestSlowBodiesTimeOut: a client that trickles its body (a byte now and
// then) is cut off after the request timeout, not held open for as long as
// it likes.
func TestSlowBodiesTimeOut(t *testing.T) {
	t.Parallel()
	b := setup(t, "GANTRY_REQUEST_TIMEOUT=2s")
	token := b.token(t, b.user(t, "ci@example.com", models.RoleOperator), "write")
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.srv.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /api/v1/log HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", token)
	require.NoError(t, err)
	// Keep trickling; the server must answer or close long before the
	// body would be complete. The bound is generous for a busy machine.
	done := make(chan string, 1)
	go func() {
		raw, _ := io.ReadAll(conn)
		done <- string(raw)
	}()
	deadline := time.After(2 * time.Minute)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case answer := <-done:
			require.NotContains(t, answer, "201 Created")
			return
		case <-tick.C:
			_, _ = conn.Write([]byte(" "))
		case <-deadline:
			t.Fatal("a body trickled a byte every half second kept its connection for two minutes")
		}
	}
}

// TestAdminTokensPageListsWithoutTheForm: /admin/tokens lists everyone's
// tokens; it does not offer the personal new-token form, which would make
// a token of the admin's own (issue 12).
func TestAdminTokensPageListsWithoutTheForm(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, "root@example.com", models.RoleAdmin)
	br := b.browser(t)
	br.login(t, "root@example.com")

	_, body, csrf := br.get(t, "/admin/tokens")
	require.Contains(t, body, `data-testid="tokens-empty"`)
	require.NotContains(t, body, `data-testid="token-form"`)
	require.NotContains(t, body, "New token")
	require.NotContains(t, body, "Create one above")

	_, body, _ = br.get(t, "/tokens")
	require.Contains(t, body, `data-testid="token-form"`, "the admin's own tokens page has it")
	res, _ := br.post(t, "/tokens", url.Values{"_csrf": {csrf}, "name": {"ci"}, "scopes": {"read"}, "expires_in": {"720h"}})
	require.Equal(t, http.StatusCreated, res.StatusCode)

	_, body, _ = br.get(t, "/admin/tokens")
	require.Contains(t, body, `data-token-name="ci"`)
	require.Contains(t, body, "root@example.com", "with its owner")
	require.NotContains(t, body, `data-testid="token-form"`)
	require.Contains(t, body, `data-testid="all-tokens-lead"`)
}

// logReads counts the queries that read the deployment log.
type logReads struct{ n atomic.Int64 }

func (c *logReads) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context { return ctx }

func (c *logReads) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	q := strings.TrimSpace(e.Query)
	if strings.HasPrefix(q, "SELECT") && strings.Contains(q, "deployment_log") {
		c.n.Add(1)
	}
}

// TestLogHubQueriesDoNotGrowWithStreams: with one stream or fifty open, the
// same entries cost about the same number of reads of the log (the hub's
// polls), and every stream still gets exactly the entries its filter wants.
func TestLogHubQueriesDoNotGrowWithStreams(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reads := &logReads{}
	b.db.Bun.AddQueryHook(reads)
	b.user(t, "ops@example.com", models.RoleOperator)
	br := b.browser(t)
	br.login(t, "ops@example.com")

	measure := func(t *testing.T, streams int) int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var mu sync.Mutex
		got := make([]map[int64]bool, streams)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		for i := range streams {
			got[i] = map[int64]bool{}
			req, _ := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/log/stream?target=p-"+strconv.Itoa(i%2), nil)
			res, err := br.Do(req)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, res.StatusCode)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer res.Body.Close()
				sc := bufio.NewScanner(res.Body)
				for sc.Scan() {
					if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
						n, _ := strconv.ParseInt(id, 10, 64)
						mu.Lock()
						got[i][n] = true
						mu.Unlock()
					}
				}
			}()
		}
		// Every stream is subscribed once its answer has begun.
		before := reads.n.Load()
		want := [2]map[int64]bool{{}, {}}
		for round := range 3 {
			for target := range 2 {
				e := &models.LogEntry{TargetID: "p-" + strconv.Itoa(target), Event: "round-" + strconv.Itoa(round), Actor: "t"}
				require.NoError(t, models.AppendLog(ctx, b.db.Bun, e))
				want[target][e.ID] = true
			}
			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				for i := range streams {
					if len(got[i]) < len(want[i%2]) {
						return false
					}
				}
				return true
			}, time.Minute, 10*time.Millisecond, "every stream gets round %d", round)
		}
		n := reads.n.Load() - before
		mu.Lock()
		defer mu.Unlock()
		for i := range streams {
			require.Equal(t, want[i%2], got[i], "stream %d gets its target's entries, only those", i)
		}
		return n
	}

	one := measure(t, 1)
	fifty := measure(t, 50)
	t.Logf("reads of the log while 6 entries reached the streams: %d with 1 stream, %d with 50", one, fifty)
	// The hub polls once a second, whoever listens: the counts differ only by
	// a tick or two of timing. A query per stream per entry would be 300.
	require.LessOrEqual(t, fifty, one+3)
	require.Less(t, fifty, int64(15))
}
