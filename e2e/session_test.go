package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/require"
)

// browserWait bounds every browser action, navigation, screenshot and
// retrying assertion. Each returns as soon as its condition holds, so the
// bound only decides how long a broken test takes to fail: it is generous so
// that a busy machine (make test runs every package at once, with -race, on
// two cores) makes the tests slower, never red. With 10 s, River UI's first
// render and full-page screenshots failed when the machine was busy.
const browserWait = 90 * time.Second

const (
	browserTimeout = float64(browserWait / time.Millisecond) // browserWait in Playwright's unit
	desktopWidth   = 1280
	desktopHeight  = 800
)

// expect is Playwright's retrying assertions (they poll until they hold or
// browserWait passes).
var expect = playwright.NewPlaywrightAssertions(browserTimeout)

// newPage opens a page in a new browser context of its own (no cookies
// shared with other tests), closed at cleanup. Script errors on the page
// and Content-Security-Policy violations fail the test.
func newPage(t *testing.T) playwright.Page {
	t.Helper()
	bctx, err := env.browser.NewContext(playwright.BrowserNewContextOptions{
		Viewport: &playwright.Size{Width: desktopWidth, Height: desktopHeight},
	})
	require.NoError(t, err)
	// Once for the context, so every page, action and navigation in it
	// waits up to browserWait.
	bctx.SetDefaultTimeout(browserTimeout)
	bctx.SetDefaultNavigationTimeout(browserTimeout)
	page, err := bctx.NewPage()
	require.NoError(t, err)

	problems := &problemList{}
	page.OnPageError(func(err error) { problems.add("uncaught script error on " + page.URL() + ": " + err.Error()) })
	page.OnConsole(func(m playwright.ConsoleMessage) {
		// "Failed to load resource" is how Chromium reports any 4xx
		// document, which several tests expect; anything else is a fault.
		if m.Type() != "error" || strings.HasPrefix(m.Text(), "Failed to load resource") {
			return
		}
		problems.add("console error on " + m.Page().URL() + ": " + m.Text())
	})
	t.Cleanup(func() {
		if err := bctx.Close(); err != nil {
			t.Errorf("closing the browser context: %v", err)
		}
	})
	// Registered after Close, so it runs before it.
	t.Cleanup(func() {
		for _, p := range problems.list() {
			t.Errorf("browser: %s", p)
		}
	})
	return page
}

// open navigates to url and requires the given HTTP status. It first stops
// the page it leaves (see holdStill), so that a refresh the old page had
// scheduled cannot fire during this navigation: on a busy machine one did,
// and the navigation came back without a response.
func open(t *testing.T, page playwright.Page, url string, status int) {
	t.Helper()
	holdStill(page)
	resp, err := page.Goto(url)
	require.NoError(t, err, "opening %s", url)
	require.NotNil(t, resp, "opening %s: no response", url)
	require.Equal(t, status, resp.Status(), "GET %s", url)
}

// holdStill cancels whatever page is still loading and any refresh it has
// scheduled: pages of work in progress reload themselves every few seconds
// (<meta http-equiv="refresh">), and Chromium's window.stop() cancels that
// timer. The page stays as it is, but no longer refreshes. Best effort: a
// page with no document yet has nothing to stop.
func holdStill(page playwright.Page) {
	_, _ = page.Evaluate(`() => window.stop()`)
}

// submitLogin fills the sign-in form already on the page, submits it, and
// returns the status of the POST /login response itself (303 on success, a
// page with 401 or 429 otherwise).
func submitLogin(t *testing.T, page playwright.Page, baseURL, email, password string) int {
	t.Helper()
	require.NoError(t, page.Locator("#email").Fill(email))
	require.NoError(t, page.Locator("#password").Fill(password))
	resp, err := page.ExpectResponse(func(url string) bool { return url == baseURL+"/login" }, func() error {
		return page.GetByTestId("login-submit").Click()
	})
	require.NoError(t, err, "submitting the sign-in form")
	require.Equal(t, "POST", resp.Request().Method())
	return resp.Status()
}

// signIn signs u in through the login page and requires that it lands on
// the overview as u.
func signIn(t *testing.T, page playwright.Page, baseURL string, u user) {
	t.Helper()
	open(t, page, baseURL+"/login", 200)
	status := submitLogin(t, page, baseURL, u.Email, u.Password)
	require.Equal(t, 303, status, "POST /login as %s", u.Email)
	require.NoError(t, expect.Page(page).ToHaveURL(baseURL+"/"))
	require.NoError(t, expect.Locator(page.GetByTestId("current-user")).ToContainText(u.Name))
}

// problemList collects what went wrong in a page, each distinct problem once
// with how often it happened (a page may repeat one CSP violation dozens of
// times, differing only in the hash it quotes).
type problemList struct {
	mu    sync.Mutex
	order []string
	count map[string]int
}

func (l *problemList) add(msg string) {
	// The first sentence says what and where; the rest is advice.
	if first, _, ok := strings.Cut(msg, ". "); ok {
		msg = first + "."
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.count == nil {
		l.count = map[string]int{}
	}
	if l.count[msg] == 0 {
		l.order = append(l.order, msg)
	}
	l.count[msg]++
}

func (l *problemList) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, len(l.order))
	for i, msg := range l.order {
		out[i] = msg
		if n := l.count[msg]; n > 1 {
			out[i] = fmt.Sprintf("%s (%d times)", msg, n)
		}
	}
	return out
}
