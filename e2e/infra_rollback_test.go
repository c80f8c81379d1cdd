package e2e

import (
	"fmt"
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

// TestInfrastructureRollback is the seed's rollback against the real
// binary: a pull request adds the filer provider to vpc (one of its
// resources refuses to be destroyed) and breaks rds downstream. vpc is
// approved and applied, rds fails, and the run rolls vpc's new provider
// resources back: the vote request says ROLLBACK, the voter approves it
// from the emailed link, the destroy fails on the refusing resource, and
// the run page's Rollback section says what is left and that it waits for
// an operator, who marks it resolved from the page; the run then ends.
func TestInfrastructureRollback(t *testing.T) {
	t.Parallel()
	repo, _ := infratest.Standard(t)
	repo.Apply(infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2)
	filer := infratest.Filer(t)
	smtp := mailtest.New(t)
	gh := githubtest.New(t, githubtest.Options{Repos: []string{infratest.GitHubRepo}})
	config := filepath.Join(t.TempDir(), "gantry.yaml")
	require.NoError(t, os.WriteFile(config, []byte(repo.YAML("live", "INFRA_WEBHOOK_SECRET", "INFRA_GITHUB_TOKEN",
		[]string{"ada@example.com"}, 1, 1)), 0o600))
	srv := startServer(t, "GANTRY_CONFIG="+config, "INFRA_WEBHOOK_SECRET="+webhookSecret, "INFRA_GITHUB_TOKEN="+githubtest.Token,
		"GANTRY_SMTP_URL="+smtp.URL(), "GANTRY_MAIL_FROM=Gantry <gantry@example.com>", "GANTRY_GITHUB_API_URL="+gh.URL,
		"GANTRY_WORK_DIR="+t.TempDir(), "TF_CLI_CONFIG_FILE="+filer.CLIConfig, "GANTRY_COMMAND_ENV=TF_CLI_CONFIG_FILE")
	srv.createUser(t, "Ada Lovelace", "ada@example.com", "approver")
	olivia := srv.createUser(t, "Olivia Operator", "olivia@example.com", "operator")

	out := t.TempDir()
	p := repo.OpenPR(51, map[string]string{
		infratest.VPC + "/filer.tf": filer.Required() +
			infratest.FilerFile("single", fmt.Sprintf("%q", out+"/single"), `"one"`, "  refuse_destroy = true\n") +
			infratest.FilerFile("counted", fmt.Sprintf("%q", out+"/counted-${count.index}"), `"c"`, "  count = 2\n"),
		infratest.RDS + "/main.tf": repo.Resource(infratest.RDS, "rds", `file("/nonexistent/gantry-e2e-rollback")`, infratest.VPC),
	})
	sha := repo.Merge(p.Branch)
	res, err := githubtest.Deliver(t.Context(), http.DefaultClient, srv.URL+"/webhooks/github", webhookSecret, "pull_request",
		fmt.Sprintf("e2e-rollback-%d", time.Now().UnixNano()), repo.Event(p, "closed", sha))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusAccepted, res.StatusCode)

	link := regexp.MustCompile(regexp.QuoteMeta(srv.URL) + `/approvals/link/\S+`)
	anon := newPage(t)
	vote := smtp.Wait(t, infraWait, func(m mailtest.Message) bool { return strings.Contains(m.Subject, "Vote on "+infratest.VPC+" ") })
	open(t, anon, link.FindString(vote.Text), http.StatusOK)
	require.NoError(t, anon.GetByTestId("vote-approve").Click())
	require.NoError(t, expect.Locator(anon.GetByTestId("flash")).ToContainText("Recorded your approval"))

	// rds fails; the rollback of vpc is put to the voters as a rollback.
	back := smtp.Wait(t, infraWait, func(m mailtest.Message) bool {
		return slices.Contains(m.To, "ada@example.com") && strings.Contains(m.Subject, "Vote to roll back "+infratest.VPC+" ")
	})
	require.Contains(t, back.Text, "ROLLBACK")
	require.Contains(t, back.Text, "filer_file.counted[1]")
	open(t, anon, link.FindString(back.Text), http.StatusOK)
	require.NoError(t, expect.Locator(anon.Locator("body")).ToContainText("Roll back "+infratest.VPC))
	require.NoError(t, expect.Locator(anon.Locator("body")).ToContainText("3 to destroy"))
	saveScreenshot(t, anon, "infra-rollback-vote")
	require.NoError(t, anon.GetByTestId("vote-approve").Click())
	require.NoError(t, expect.Locator(anon.GetByTestId("flash")).ToContainText("Recorded your approval"))

	page := newPage(t)
	signIn(t, page, srv.URL, olivia)
	token := srv.createToken(t, "olivia@example.com", "reader", "read")
	status, body := callAPI(t, http.MethodGet, srv.URL+"/api/v1/infra/runs?pr=51", token, nil)
	require.Equal(t, http.StatusOK, status, string(body))
	runs := decode[struct {
		Runs []struct {
			ID int64 `json:"id"`
		} `json:"runs"`
	}](t, body)
	require.Len(t, runs.Runs, 1)
	runURL := fmt.Sprintf("%s/infra/runs/%d", srv.URL, runs.Runs[0].ID)
	held := page.GetByTestId("rollback-held")
	deadline := time.Now().Add(infraWait)
	for {
		open(t, page, runURL, http.StatusOK)
		n, err := held.Count()
		require.NoError(t, err)
		if n == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the rollback never failed for an operator")
		time.Sleep(time.Second)
	}
	section := page.GetByTestId("run-rollback")
	require.NoError(t, expect.Locator(section).ToContainText("1 rollback failed and waits for an operator"))
	require.NoError(t, expect.Locator(page.GetByTestId("rollback-remaining")).ToHaveText("filer_file.single"))
	require.NoError(t, expect.Locator(page.GetByTestId("run-status")).ToContainText("running"))
	require.FileExists(t, filepath.Join(out, "single"))
	require.NoFileExists(t, filepath.Join(out, "counted-0"), "destroyed by the rollback")
	saveScreenshot(t, page, "infra-rollback-held-run")

	require.NoError(t, page.GetByTestId("rollback-link").Click())
	require.NoError(t, expect.Locator(page.Locator("h1")).ToContainText("Rollback of "+infratest.VPC))
	saveScreenshot(t, page, "infra-rollback-execution")
	page.OnDialog(func(d playwright.Dialog) { _ = d.Accept() })
	require.NoError(t, page.GetByTestId("rollback-reason").Fill("removed the file by hand"))
	require.NoError(t, page.GetByTestId("rollback-resolved").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Marked resolved: the run goes on."))
	require.NoError(t, expect.Locator(page.GetByTestId("rollback-resolved-note")).ToContainText("removed the file by hand"))

	deadline = time.Now().Add(infraWait)
	for {
		open(t, page, runURL, http.StatusOK)
		text, err := page.GetByTestId("run-status").TextContent()
		require.NoError(t, err)
		if strings.Contains(text, "failed") {
			break
		}
		require.True(t, time.Now().Before(deadline), "the run is %q", text)
		time.Sleep(time.Second)
	}
	saveScreenshot(t, page, "infra-rollback-resolved-run")
	require.NoError(t, page.GetByTestId("run-rollback").GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "run-51-"}).First().Click())
	require.NoError(t, expect.Locator(page.GetByTestId("new-resources")).ToContainText("filer_file.counted[0]"))
	saveScreenshot(t, page, "infra-rollback-new-resources")
}
