package e2e

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLiveLogTail keeps /log open while a CI job appends an entry through
// the API, and sees the entry arrive in the page without a reload.
func TestLiveLogTail(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ada := srv.createUser(t, "Ada Lovelace", "ada@example.com", "admin")
	ci := srv.createUser(t, "CI", "ci@example.com", "operator")
	token := srv.createToken(t, ci.Email, "e2e-ci", "read,write")
	page := newPage(t)
	signIn(t, page, srv.URL, ada)

	open(t, page, srv.URL+"/log", 200)
	rows := page.GetByTestId("log-row")
	before, err := rows.Count()
	require.NoError(t, err)
	require.Positive(t, before, "the sign-in is already in the log")
	// The stream is connected once the script marks the status "on".
	require.NoError(t, expect.Locator(page.GetByTestId("live-status")).ToHaveClass(regexp.MustCompile(`\bon\b`)),
		"the page connects to the live stream")
	// A reload or navigation would lose this.
	_, err = page.Evaluate(`() => { window.e2eNoReload = true }`)
	require.NoError(t, err)

	status, body := callAPI(t, http.MethodPost, srv.URL+"/api/v1/log", token, map[string]string{
		"target_id": "e2e-target", "event": "e2e-event", "revision": "r1",
	})
	require.Equal(t, http.StatusCreated, status, "POST /api/v1/log: %s", body)
	entry := decode[struct {
		ID    int64  `json:"id"`
		Actor string `json:"actor"`
	}](t, body)
	require.Contains(t, entry.Actor, ci.Email)

	// The new entry is the first row, arrived live.
	require.NoError(t, expect.Locator(rows).ToHaveCount(before+1))
	first := rows.First()
	require.NoError(t, expect.Locator(first).ToHaveAttribute("data-id", regexp.MustCompile(`^\d+$`)))
	id, err := first.GetAttribute("data-id")
	require.NoError(t, err)
	require.Equal(t, strconv.FormatInt(entry.ID, 10), id, "the first row is the entry just appended")
	for _, text := range []string{"e2e-event", "e2e-target", "r1", ci.Email} {
		require.NoError(t, expect.Locator(first).ToContainText(text))
	}
	kept, err := page.Evaluate(`() => window.e2eNoReload === true`)
	require.NoError(t, err)
	require.Equal(t, true, kept, "the row must arrive without the page reloading")
	require.Equal(t, srv.URL+"/log", page.URL())
	saveScreenshot(t, page, "log-live-row")
}
