package web_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/awsenv/awstest"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/web"
)

const password = "correct-horse-battery"

type bundle struct {
	*servertest.Server
	srv     *httptest.Server
	server  *web.Server
	db      *models.DB
	queue   *jobs.Queue
	pools   *pools.Service
	logger  *slog.Logger
	webhook chan map[string]any // dirty-environment notifications received
	aws     *awstest.Server
	mail    *mailtest.Server // receives the notification emails
}

// setup serves Gantry on a fresh database, with extra environment variables.
func setup(t testing.TB, env ...string) *bundle {
	t.Helper()
	s := servertest.New(t, env...)
	return &bundle{Server: s, srv: s.HTTP, server: s.Web, db: s.DB, queue: s.Queue, pools: s.Pools, logger: s.Logger,
		webhook: s.Webhook, aws: s.AWS, mail: s.Mail}
}

func (b *bundle) user(t testing.TB, email string, role models.Role) *models.User {
	t.Helper()
	u, err := access.CreateUser(context.Background(), b.db.Bun, access.NewUser{Email: email, Role: string(role), Password: password}, "test")
	require.NoError(t, err)
	return u
}

func (b *bundle) token(t testing.TB, u *models.User, scopes ...string) string {
	t.Helper()
	secret, _, err := access.CreateToken(context.Background(), b.db.Bun, u, access.NewToken{Name: "test", Scopes: scopes}, "test")
	require.NoError(t, err)
	return secret
}

// call makes an API request and decodes the JSON answer into a map.
func (b *bundle) call(t testing.TB, method, path, token, body string) (*http.Response, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, b.srv.URL+path, r)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return b.do(t, req)
}

// do sends req and decodes a JSON answer.
func (b *bundle) do(t testing.TB, req *http.Request) (*http.Response, map[string]any) {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var out map[string]any
	if len(raw) > 0 && strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	}
	return res, out
}

// browser is a cookie-keeping client that does not follow redirects, so
// tests see them.
type browser struct {
	*http.Client
	base string
}

func (b *bundle) browser(t testing.TB) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{Client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, base: b.srv.URL}
}

var csrfRe = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// get fetches a page and returns its status, body and the CSRF token in it.
func (br *browser) get(t *testing.T, path string) (int, string, string) {
	t.Helper()
	res, err := br.Get(br.base + path)
	require.NoError(t, err)
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	csrf := ""
	if m := csrfRe.FindSubmatch(body); m != nil {
		csrf = string(m[1])
	}
	return res.StatusCode, string(body), csrf
}

func (br *browser) post(t *testing.T, path string, form url.Values) (*http.Response, string) {
	t.Helper()
	res, err := br.PostForm(br.base+path, form)
	require.NoError(t, err)
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

// login signs in through the form and fails the test if that does not work.
func (br *browser) login(t *testing.T, email string) {
	t.Helper()
	_, _, csrf := br.get(t, "/login")
	res, _ := br.post(t, "/login", url.Values{"_csrf": {csrf}, "email": {email}, "password": {password}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
}

func itoa(n int) string { return strconv.Itoa(n) }

func errorCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func errorFields(body map[string]any) map[string]any {
	e, _ := body["error"].(map[string]any)
	f, _ := e["fields"].(map[string]any)
	return f
}
