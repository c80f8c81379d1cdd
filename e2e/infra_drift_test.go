package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/github/githubtest"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
)

// TestInfrastructureDrift is drift detection against the real binary: dns's
// state is changed behind Gantry's back; River's leader runs the drift
// schedule on start, every unit of the trunk is planned, and /infra lists
// dns as drifted with its plan while the recipients are mailed. An operator
// reconciles it from its page in Chromium; the voter approves from the
// emailed link, and the unit's state is back to its code.
func TestInfrastructureDrift(t *testing.T) {
	t.Parallel()
	repo, _ := infratest.Standard(t)
	repo.Apply(infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2)
	infratest.Git(t, repo.Work, "checkout", "--quiet", infratest.Trunk)
	repo.Write(map[string]string{infratest.DNS + "/main.tf": repo.Resource(infratest.DNS, "zone", `"dns-changed-by-hand"`)})
	repo.Apply(infratest.DNS)
	infratest.Git(t, repo.Work, "checkout", "--quiet", "--", infratest.DNS+"/main.tf")

	smtp := mailtest.New(t)
	gh := githubtest.New(t, githubtest.Options{Repos: []string{infratest.GitHubRepo}})
	yaml := strings.Replace(repo.YAML("live", "INFRA_WEBHOOK_SECRET", "INFRA_GITHUB_TOKEN", []string{"ada@example.com"}, 1, 1),
		"scan: graph\n", "scan: graph\n    drift: {schedule: every 6h, notify: [ops@example.com]}\n", 1)
	config := filepath.Join(t.TempDir(), "gantry.yaml")
	require.NoError(t, os.WriteFile(config, []byte(yaml), 0o600))
	srv := startServer(t, "GANTRY_CONFIG="+config, "INFRA_WEBHOOK_SECRET="+webhookSecret, "INFRA_GITHUB_TOKEN="+githubtest.Token,
		"GANTRY_SMTP_URL="+smtp.URL(), "GANTRY_MAIL_FROM=Gantry <gantry@example.com>", "GANTRY_GITHUB_API_URL="+gh.URL,
		"GANTRY_WORK_DIR="+t.TempDir())
	srv.createUser(t, "Ada Lovelace", "ada@example.com", "approver")
	olivia := srv.createUser(t, "Olivia Operator", "olivia@example.com", "operator")

	// Found and mailed without anyone asking.
	m := smtp.Wait(t, infraWait, func(m mailtest.Message) bool { return slices.Contains(m.To, "ops@example.com") })
	require.Equal(t, "Drift in live: live/shared/dns", m.Subject)
	checkURL := regexp.MustCompile(regexp.QuoteMeta(srv.URL) + `/infra/drift/\d+`).FindString(m.Text)
	require.NotEmpty(t, checkURL, m.Text)

	page := newPage(t)
	signIn(t, page, srv.URL, olivia)
	drifted := page.GetByTestId("drift-row").And(page.Locator(`[data-unit="live/shared/dns"]`))
	deadline := time.Now().Add(infraWait)
	for {
		open(t, page, srv.URL+"/infra", http.StatusOK)
		n, err := drifted.Count()
		require.NoError(t, err)
		checking, err := page.GetByTestId("drift-checking").Count()
		require.NoError(t, err)
		if n == 1 && checking == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "dns is not listed as drifted on /infra, or units are still being checked")
		time.Sleep(time.Second)
	}
	require.NoError(t, expect.Locator(page.GetByTestId("drift-row")).ToHaveCount(1), "only dns drifted")
	require.NoError(t, expect.Locator(drifted).ToContainText("Plan: 0 to add, 1 to change, 0 to destroy"))
	saveScreenshot(t, page, "infra-drift")

	require.NoError(t, drifted.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: infratest.DNS}).Click())
	require.NoError(t, expect.Page(page).ToHaveURL(checkURL))
	require.NoError(t, expect.Locator(page.GetByTestId("drift-status")).ToContainText("drifted"))
	require.NoError(t, expect.Locator(page.Locator("pre").First()).ToContainText(`"dns-changed-by-hand" -> "dns-v1"`))
	saveScreenshot(t, page, "infra-drift-check")

	page.OnDialog(func(d playwright.Dialog) { _ = d.Accept() })
	require.NoError(t, page.GetByTestId("reconcile").Click())
	require.NoError(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/infra/runs/\d+$`)))
	require.NoError(t, expect.Locator(page.GetByTestId("flash")).ToContainText("reconciles the unit"))
	require.NoError(t, expect.Locator(page.GetByTestId("field-reconciles")).ToContainText("Reconcile drift of live/shared/dns"))
	require.NoError(t, expect.Locator(page.GetByTestId("field-scan")).ToContainText("the drifted unit alone"))
	runURL := page.URL()

	// The voter approves from the email, as for a merge.
	vote := smtp.Wait(t, infraWait, func(m mailtest.Message) bool {
		return slices.Contains(m.To, "ada@example.com") && strings.Contains(m.Subject, "Vote on "+infratest.DNS+" ")
	})
	link := regexp.MustCompile(regexp.QuoteMeta(srv.URL) + `/approvals/link/\S+`).FindString(vote.Text)
	require.NotEmpty(t, link, vote.Text)
	anon := newPage(t)
	open(t, anon, link, http.StatusOK)
	require.NoError(t, anon.GetByTestId("vote-approve").Click())
	require.NoError(t, expect.Locator(anon.GetByTestId("flash")).ToContainText("Recorded your approval"))

	deadline = time.Now().Add(infraWait)
	for {
		open(t, page, runURL, http.StatusOK)
		text, err := page.GetByTestId("run-status").TextContent()
		require.NoError(t, err)
		if strings.Contains(text, "succeeded") {
			break
		}
		require.True(t, time.Now().Before(deadline), "the reconcile run is %q", text)
		time.Sleep(time.Second)
	}
	saveScreenshot(t, page, "infra-drift-reconciled-run")
	require.Equal(t, "dns-v1", repo.Output(infratest.DNS))
}
