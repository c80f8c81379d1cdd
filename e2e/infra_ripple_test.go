package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/github/githubtest"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
)

// TestInfraOutputsRipple: with `scan: plan`, a pull request changing only
// vpc's id runs vpc alone; once it is applied, rds and app (which read
// vpc's outputs) join the run. rds has changes and is voted on (then ec2,
// which reads rds); app has none and is checked. The run page lists the
// ripple, the rds page says why it was added.
func TestInfraOutputsRipple(t *testing.T) {
	t.Parallel()
	const app = "live/prod/app"
	repo, _ := infratest.Standard(t)
	repo.Write(map[string]string{
		app + "/terragrunt.hcl": "include \"root\" {\n  path = find_in_parent_folders(\"root.hcl\")\n}\n\ndependency \"vpc\" {\n  config_path = \"../vpc\"\n}\n",
		app + "/main.tf": repo.Resource(app, "app",
			`length(regex("^vpc-v[0-9]$", data.terraform_remote_state.vpc.outputs.id)) > 0 ? "app ok" : "app no"`, infratest.VPC),
	})
	repo.Commit("app")
	repo.Push(infratest.Trunk)
	repo.Apply(infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2, app)
	smtp := mailtest.New(t)
	gh := githubtest.New(t, githubtest.Options{Repos: []string{infratest.GitHubRepo}})
	yaml := strings.Replace(repo.YAML("live", "INFRA_WEBHOOK_SECRET", "INFRA_GITHUB_TOKEN", []string{"ada@example.com"}, 1, 1),
		"scan: graph", "scan: plan", 1)
	config := filepath.Join(t.TempDir(), "gantry.yaml")
	require.NoError(t, os.WriteFile(config, []byte(yaml), 0o600))
	srv := startServer(t, "GANTRY_CONFIG="+config, "INFRA_WEBHOOK_SECRET="+webhookSecret, "INFRA_GITHUB_TOKEN="+githubtest.Token,
		"GANTRY_SMTP_URL="+smtp.URL(), "GANTRY_MAIL_FROM=Gantry <gantry@example.com>", "GANTRY_GITHUB_API_URL="+gh.URL,
		"GANTRY_WORK_DIR="+t.TempDir())
	ada := srv.createUser(t, "Ada Lovelace", "ada@example.com", "approver")
	bot := srv.createToken(t, "ada@example.com", "vote-bot", "read,vote")

	p := repo.OpenPR(12, map[string]string{infratest.VPC + "/main.tf": repo.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
	mergeSHA := repo.Merge(p.Branch)
	res, err := githubtest.Deliver(t.Context(), http.DefaultClient, srv.URL+"/webhooks/github", webhookSecret, "pull_request",
		fmt.Sprintf("e2e-%d", time.Now().UnixNano()), repo.Event(p, "closed", mergeSHA))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusAccepted, res.StatusCode)

	// The bot approves each unit as it comes up for a vote: vpc, then the
	// ripple's rds, then ec2 (rds's output changed too).
	approve := func(unit string) string {
		t.Helper()
		deadline := time.Now().Add(infraWait)
		for {
			status, body := callAPI(t, http.MethodGet, srv.URL+"/api/v1/approvals", bot, nil)
			require.Equal(t, http.StatusOK, status, string(body))
			waiting := decode[struct {
				Executions []struct {
					ExecutionID string `json:"execution_id"`
					CfgPath     string `json:"cfg_path"`
				} `json:"executions"`
			}](t, body)
			for _, x := range waiting.Executions {
				if x.CfgPath == unit {
					status, body = callAPI(t, http.MethodPost, srv.URL+"/api/v1/infra/executions/"+x.ExecutionID+"/votes", bot,
						map[string]string{"decision": "approve"})
					require.Equal(t, http.StatusOK, status, string(body))
					return x.ExecutionID
				}
			}
			require.True(t, time.Now().Before(deadline), "%s never came up for a vote", unit)
			time.Sleep(300 * time.Millisecond)
		}
	}
	approve(infratest.VPC)
	rdsID := approve(infratest.RDS)
	approve(infratest.EC2)

	page := newPage(t)
	signIn(t, page, srv.URL, ada)
	deadline := time.Now().Add(infraWait)
	for {
		open(t, page, srv.URL+"/infra", http.StatusOK)
		if n, _ := page.GetByTestId("recent-runs").Locator(`[data-status=succeeded]`).Count(); n > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the run did not succeed")
		time.Sleep(300 * time.Millisecond)
	}
	require.NoError(t, page.GetByTestId("recent-runs").Locator("a[href^='/infra/runs/']").First().Click())
	runURL := page.URL()
	require.NoError(t, expect.Locator(page.GetByTestId("graph-node")).ToHaveCount(4))
	ripples := page.GetByTestId("ripple")
	require.NoError(t, expect.Locator(ripples).ToHaveCount(2), "vpc's and rds's applies rippled")
	vpcRipple := page.Locator(`[data-testid=ripple][data-unit="live/prod/vpc"]`)
	require.NoError(t, expect.Locator(vpcRipple.GetByTestId("ripple-changed")).ToContainText(infratest.RDS))
	require.NoError(t, expect.Locator(vpcRipple.GetByTestId("ripple-checked")).ToContainText(app))
	require.NoError(t, expect.Locator(page.GetByTestId("executions-table")).ToContainText("checked · no changes"))
	saveScreenshot(t, page, "infra-run-ripple")

	open(t, page, srv.URL+"/infra/executions/"+rdsID, http.StatusOK)
	require.NoError(t, expect.Locator(page.GetByTestId("ripple-reason")).ToContainText("Added because live/prod/vpc's outputs id changed"))
	saveScreenshot(t, page, "infra-execution-ripple")
	require.Equal(t, "ec2 small on rds in vpc-v2", repo.Output(infratest.EC2))

	require.NoError(t, page.SetViewportSize(390, 844))
	open(t, page, runURL, http.StatusOK)
	saveScreenshot(t, page, "phone-infra-run-ripple")
	_, err = page.GetByTestId("run-ripples").Screenshot(playwright.LocatorScreenshotOptions{Path: playwright.String("screenshots/phone-infra-run-ripple-panel.png")})
	require.NoError(t, err)
	overflow, err := page.Evaluate(`() => document.documentElement.scrollWidth - document.documentElement.clientWidth`)
	require.NoError(t, err)
	assert.EqualValues(t, 0, overflow, "the run page at 390px wide scrolls sideways by %vpx", overflow)
}
