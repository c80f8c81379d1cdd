package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/devmail"
	"github.com/gantryhq/gantry/internal/mail"
	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/web"
)

// TestDevMailbox serves the same Gantry as gantry dev does, with a dev
// mailbox: its pages exist, are in the navigation, and show each email's
// text with its links clickable and nothing of its HTML.
func TestDevMailbox(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, vera, models.RoleAdmin) // the developer running gantry dev reads every message
	b.user(t, grace, models.RoleViewer)
	box := &devmail.Mailbox{DB: b.db.Bun}
	deps := b.server.Deps
	deps.Mailbox, deps.Registry = box, prometheus.NewRegistry()
	dev := web.New(deps)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	require.NoError(t, dev.Start(ctx))
	srv := httptest.NewServer(dev.Handler())
	t.Cleanup(srv.Close)
	br := b.browser(t)
	br.base = srv.URL
	br.login(t, vera)

	status, page, _ := br.get(t, "/dev/mailbox")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, `data-testid="mailbox-empty"`)
	require.Contains(t, page, `href="/dev/mailbox"`, "the navigation links to it under gantry dev")

	require.NoError(t, box.Send(ctx, mail.Message{To: []string{"ops@example.com"}, Subject: "Environment pixel-7 is dirty", Text: "Cleanup failed."}))
	require.NoError(t, box.Send(ctx, mail.Message{To: []string{grace, ada}, Subject: "[Gantry] Vote on live/prod/vpc (prod) for live#7",
		Text: "Review the plan and vote (this link is yours):\nhttp://gantry.test/approvals/link/eyJzdWIi.c2lnbg.\nOr see https://gantry.test/infra, then <b>reply</b>.",
		HTML: `<p>Vote <script>alert(1)</script><a href="javascript:alert(2)">here</a></p>`}))
	mails, err := models.ListDevMails(ctx, b.db.Bun, "", 10)
	require.NoError(t, err)
	require.Len(t, mails, 2)

	_, page, _ = br.get(t, "/dev/mailbox")
	first := strings.Index(page, "Vote on live/prod/vpc")
	second := strings.Index(page, "Environment pixel-7 is dirty")
	require.True(t, first > 0 && second > first, "newest first")
	require.Contains(t, page, "grace@example.com, ada@example.com")
	require.Regexp(t, `<time datetime="[0-9T:-]+Z">`, page)

	status, page, _ = br.get(t, "/dev/mailbox/"+itoa(int(mails[0].ID)))
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, `<a href="http://gantry.test/approvals/link/eyJzdWIi.c2lnbg">http://gantry.test/approvals/link/eyJzdWIi.c2lnbg</a>.`, "the link without the full stop after it")
	require.Contains(t, page, `<a href="https://gantry.test/infra">https://gantry.test/infra</a>, then &lt;b&gt;reply&lt;/b&gt;.`, "text stays text")
	require.Equal(t, 2, strings.Count(page, `data-testid="mail-link"`))
	require.NotContains(t, page, "<script>alert")
	require.NotContains(t, page, "javascript:")
	require.Contains(t, page, "also has an HTML part")

	for _, path := range []string{"/dev/mailbox/999999", "/dev/mailbox/x"} {
		status, _, _ := br.get(t, path)
		require.Equal(t, http.StatusNotFound, status, path)
	}
	anon := b.browser(t)
	anon.base = srv.URL
	status, _, _ = anon.get(t, "/dev/mailbox")
	require.Equal(t, http.StatusSeeOther, status, "signed-in people only")

	// Anyone else reads only the mail sent to them: a viewer must not follow
	// an approver's voting link and vote as them.
	asGrace := b.browser(t)
	asGrace.base = srv.URL
	asGrace.login(t, grace)
	_, page, _ = asGrace.get(t, "/dev/mailbox")
	require.Contains(t, page, "Vote on live/prod/vpc", "grace's own mail")
	require.NotContains(t, page, "Environment pixel-7 is dirty", "ops's mail")
	status, _, _ = asGrace.get(t, "/dev/mailbox/"+itoa(int(mails[1].ID)))
	require.Equal(t, http.StatusNotFound, status, "another's message is not there for grace")
	status, _, _ = asGrace.get(t, "/dev/mailbox/"+itoa(int(mails[0].ID)))
	require.Equal(t, http.StatusOK, status)
}
