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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/github/githubtest"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
)

const (
	webhookSecret = "It's a Secret to Everybody"
	infraWait     = conditionWait // plans and applies run real terraform
)

// TestInfrastructureDelivery is seed 000 against the real binary: a
// repository whose units form vpc → rds → ec2 in account prod, with dns in
// account shared, on which prod depends. A pull request changing dns, vpc
// and ec2 is planned per unit with commit statuses; its merge, delivered
// through the signed webhook, starts a run; the vote requests arrive on a
// real SMTP server; Chromium follows the emailed links and approves dns and
// vpc without signing in, a signed-in approver approves rds from the
// dashboard (its plan shows the vpc output applied moments before), and a
// bot approves ec2 through the API. The applies happen in dependency order
// and the run page draws the graph, all green.
func TestInfrastructureDelivery(t *testing.T) {
	t.Parallel()
	repo, _ := infratest.Standard(t)
	repo.Apply(infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2)
	smtp := mailtest.New(t)
	gh := githubtest.New(t, githubtest.Options{Repos: []string{infratest.GitHubRepo}})

	config := filepath.Join(t.TempDir(), "gantry.yaml")
	require.NoError(t, os.WriteFile(config, []byte(repo.YAML("live", "INFRA_WEBHOOK_SECRET", "INFRA_GITHUB_TOKEN",
		[]string{"ada@example.com", "grace@example.com"}, 1, 1)), 0o600))
	srv := startServer(t, "GANTRY_CONFIG="+config, "INFRA_WEBHOOK_SECRET="+webhookSecret, "INFRA_GITHUB_TOKEN="+githubtest.Token,
		"GANTRY_SMTP_URL="+smtp.URL(), "GANTRY_MAIL_FROM=Gantry <gantry@example.com>", "GANTRY_GITHUB_API_URL="+gh.URL,
		"GANTRY_WORK_DIR="+t.TempDir())
	ada := srv.createUser(t, "Ada Lovelace", "ada@example.com", "approver")
	srv.createUser(t, "Grace Hopper", "grace@example.com", "approver")
	bot := srv.createToken(t, "grace@example.com", "vote-bot", "read,vote")

	deliver := func(event string, body []byte) int {
		t.Helper()
		res, err := githubtest.Deliver(t.Context(), http.DefaultClient, srv.URL+"/webhooks/github", webhookSecret, event,
			fmt.Sprintf("e2e-%d", time.Now().UnixNano()), body)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	waitStatus := func(sha, context, state string) githubtest.Status {
		t.Helper()
		deadline := time.Now().Add(infraWait)
		for {
			st, ok := gh.Latest(sha, context)
			if ok && st.State == state {
				return st
			}
			require.True(t, time.Now().Before(deadline), "%s on %s is %+v, want %s", context, sha, st, state)
			time.Sleep(100 * time.Millisecond)
		}
	}

	// A bad signature is refused.
	p := repo.OpenPR(7, map[string]string{
		infratest.DNS + "/main.tf": repo.Resource(infratest.DNS, "zone", `"dns-v2"`),
		infratest.VPC + "/main.tf": repo.Resource(infratest.VPC, "vpc", `"vpc-v2"`),
		infratest.EC2 + "/main.tf": repo.Resource(infratest.EC2, "ec2", `"ec2 large on ${data.terraform_remote_state.rds.outputs.id}"`, infratest.RDS),
	})
	opened := repo.Event(p, "opened", "")
	res, err := githubtest.Deliver(t.Context(), http.DefaultClient, srv.URL+"/webhooks/github", "wrong secret", "pull_request", "e2e-bad", opened)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)

	// Opened: a plan and a status per changed unit, linking to its page.
	require.Equal(t, http.StatusAccepted, deliver("pull_request", opened))
	var planURL string
	for _, unit := range []string{infratest.DNS, infratest.VPC, infratest.EC2} {
		st := waitStatus(p.Head, github.PlanContext(unit), "success")
		require.True(t, strings.HasPrefix(st.TargetURL, srv.URL+"/infra/plans/"), st.TargetURL)
		if unit == infratest.VPC {
			planURL = st.TargetURL
		}
	}
	waitStatus(p.Head, github.ContextMergeLock, "success")

	page := newPage(t)
	signIn(t, page, srv.URL, ada)
	open(t, page, planURL, http.StatusOK)
	require.NoError(t, expect.Locator(page.GetByTestId("plan-fields")).ToContainText(infratest.VPC))
	require.NoError(t, expect.Locator(page.Locator("pre")).ToContainText(`"vpc-v2"`))
	saveScreenshot(t, page, "infra-pull-request-plan")

	// Merged: the run starts; dns (the shared account) is planned first.
	mergeSHA := repo.Merge(p.Branch)
	require.Equal(t, http.StatusAccepted, deliver("pull_request", repo.Event(p, "closed", mergeSHA)))

	mailLink := regexp.MustCompile(regexp.QuoteMeta(srv.URL) + `/approvals/link/\S+`)
	linkFor := func(voter, unit string) string {
		t.Helper()
		m := smtp.Wait(t, infraWait, func(m mailtest.Message) bool {
			return slices.Contains(m.To, voter) && strings.Contains(m.Subject, "Vote on "+unit+" ")
		})
		link := mailLink.FindString(m.Text)
		require.NotEmpty(t, link, "no voting link in:\n%s", m.Text)
		return link
	}
	voteByLink := func(unit, shot string) {
		t.Helper()
		anon := newPage(t) // whoever opens the email need not be signed in
		link := linkFor("ada@example.com", unit)
		open(t, anon, link, http.StatusOK)
		require.NoError(t, expect.Locator(anon.GetByTestId("link-voter")).ToContainText("ada@example.com"))
		require.NoError(t, expect.Locator(anon.GetByTestId("link-run")).ToContainText(mergeSHA))
		require.NoError(t, expect.Locator(anon.GetByTestId("link-plan-text")).ToContainText("Plan: 0 to add, 1 to change, 0 to destroy."))
		require.NoError(t, expect.Locator(anon.GetByTestId("link-changes")).ToContainText("to change"))
		saveScreenshot(t, anon, shot)

		// On a phone, where the email is opened, the changes come first and
		// the page does not scroll sideways (the plan's own box does).
		require.NoError(t, anon.SetViewportSize(390, 844))
		box, err := anon.GetByTestId("link-changes").BoundingBox()
		require.NoError(t, err)
		require.Less(t, box.Y, 2*844.0, "the summary is within the first two screens")
		overflow, err := anon.Evaluate(`() => document.documentElement.scrollWidth - document.documentElement.clientWidth`)
		require.NoError(t, err)
		require.EqualValues(t, 0, overflow, "the vote page at 390px wide scrolls sideways")
		saveScreenshot(t, anon, "phone-"+shot)
		require.NoError(t, anon.SetViewportSize(1280, 900))
		require.NoError(t, anon.GetByTestId("vote-comment").Fill("checked from the email"))
		require.NoError(t, anon.GetByTestId("vote-approve").Click())
		require.NoError(t, expect.Locator(anon.GetByTestId("flash")).ToContainText("Recorded your approval"))
		require.NoError(t, expect.Locator(anon.GetByTestId("tally")).ToContainText("1 of 1"))
		require.NoError(t, expect.Locator(anon.GetByTestId("link-vote-form")).ToHaveCount(0), "a decided execution takes no more votes")
		token := link[strings.LastIndex(link, "/")+1:]
		require.NotContains(t, srv.proc.stderr(), token, "a voting link is a credential: the request log leaves it out")
	}
	voteByLink(infratest.DNS, "infra-vote-link")

	// vpc waited for the shared account; then rds waits for vpc.
	voteByLink(infratest.VPC, "infra-vote-link-vpc")

	// rds from the dashboard: it was planned after vpc was applied.
	linkFor("ada@example.com", infratest.RDS)
	open(t, page, srv.URL+"/approvals", http.StatusOK)
	row := page.GetByTestId("approval-row")
	require.NoError(t, expect.Locator(row).ToHaveCount(1))
	require.NoError(t, expect.Locator(row).ToContainText(infratest.RDS))
	saveScreenshot(t, page, "infra-approvals")
	require.NoError(t, row.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: infratest.RDS}).Click())
	require.NoError(t, expect.Locator(page.Locator("pre").First()).ToContainText(`"rds in vpc-v2"`), "the child's plan shows its parent's output applied in this run")
	require.NoError(t, expect.Locator(page.GetByTestId("voter")).ToHaveText("ada@example.com"))
	saveScreenshot(t, page, "infra-execution-voting")
	require.NoError(t, page.GetByTestId("vote-approve").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Recorded your approval"))
	rdsURL := page.URL()

	// ec2 by a bot, through the API.
	linkFor("grace@example.com", infratest.EC2)
	status, body := callAPI(t, http.MethodGet, srv.URL+"/api/v1/approvals", bot, nil)
	require.Equal(t, http.StatusOK, status, string(body))
	waiting := decode[struct {
		Executions []struct {
			ExecutionID string `json:"execution_id"`
			CfgPath     string `json:"cfg_path"`
		} `json:"executions"`
	}](t, body)
	require.Len(t, waiting.Executions, 1)
	require.Equal(t, infratest.EC2, waiting.Executions[0].CfgPath)
	status, body = callAPI(t, http.MethodPost, srv.URL+"/api/v1/infra/executions/"+waiting.Executions[0].ExecutionID+"/votes", bot,
		map[string]string{"decision": "approve", "comment": "the bot agrees"})
	require.Equal(t, http.StatusOK, status, string(body))

	// The run ends green, in order, and the lock is released.
	var runURL string
	deadline := time.Now().Add(infraWait)
	for {
		open(t, page, srv.URL+"/infra", http.StatusOK)
		if n, _ := page.GetByTestId("recent-runs").Locator(`[data-status=succeeded]`).Count(); n > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the run did not succeed")
		time.Sleep(300 * time.Millisecond)
	}
	require.NoError(t, expect.Locator(page.GetByTestId("merge-lock")).ToContainText("free"))
	saveScreenshot(t, page, "infra-index")
	require.NoError(t, page.GetByTestId("recent-runs").Locator("a[href^='/infra/runs/']").First().Click())
	runURL = page.URL()
	nodes := page.GetByTestId("graph-node")
	require.NoError(t, expect.Locator(nodes).ToHaveCount(4))
	require.NoError(t, expect.Locator(page.Locator(`[data-testid=graph-node][data-status=succeeded]`)).ToHaveCount(4))
	require.NoError(t, expect.Locator(page.GetByTestId("run-status")).ToContainText("succeeded"))
	saveScreenshot(t, page, "infra-run")
	open(t, page, rdsURL, http.StatusOK)
	require.NoError(t, expect.Locator(page.GetByTestId("execution-status")).ToContainText("succeeded"))
	require.NoError(t, expect.Locator(page.GetByTestId("votes-table")).ToContainText("ada@example.com"))
	require.NoError(t, expect.Locator(page.GetByTestId("entity-log")).ToContainText("execution-finished-successfully"))
	saveScreenshot(t, page, "infra-execution-applied")

	require.Equal(t, "ec2 large on rds in vpc-v2", repo.Output(infratest.EC2), "applied in dependency order with real state")
	require.Equal(t, "dns-v2", repo.Output(infratest.DNS))

	// At phone width the pages fit the screen.
	require.NoError(t, page.SetViewportSize(390, 844))
	for _, p := range []struct{ url, shot string }{
		{srv.URL + "/infra", "phone-infra"},
		{runURL, "phone-infra-run"},
		{rdsURL, "phone-infra-execution"},
		{srv.URL + "/approvals", "phone-approvals"},
	} {
		open(t, page, p.url, http.StatusOK)
		saveScreenshot(t, page, p.shot)
		overflow, err := page.Evaluate(`() => document.documentElement.scrollWidth - document.documentElement.clientWidth`)
		require.NoError(t, err)
		assert.EqualValues(t, 0, overflow, "%s at 390px wide scrolls sideways by %vpx", p.url, overflow)
	}
}

// TestInfraRunSurvivesARestart: the process running an execution's plan is
// stopped (a deploy of Gantry itself) while the plan runs; the plan's
// command is stopped with it, and the new process plans again and carries
// the run to its end. Nothing was kept in memory.
func TestInfraRunSurvivesARestart(t *testing.T) {
	t.Parallel()
	repo, _ := infratest.Standard(t)
	config := filepath.Join(t.TempDir(), "gantry.yaml")
	yaml := strings.Replace(repo.YAML("live", "INFRA_WEBHOOK_SECRET", "INFRA_GITHUB_TOKEN", []string{"ada@example.com"}, 1, 1),
		"runner: terraform\n", `runner: custom
    commands:
      plan: ["sh", "-c", "echo planning; sleep 4; echo planned; touch \"$1\"", "plan", "{plan_file}"]
      apply: ["sh", "-c", "echo applied", "apply", "{plan_file}"]
      destroy: ["true"]
`, 1)
	require.NoError(t, os.WriteFile(config, []byte(yaml), 0o600))
	srv := startServer(t, "GANTRY_CONFIG="+config, "INFRA_WEBHOOK_SECRET="+webhookSecret, "INFRA_GITHUB_TOKEN=unused",
		"GANTRY_WORK_DIR="+t.TempDir(), "GANTRY_SHUTDOWN_GRACE=1s", "GANTRY_API_RATE=200", "GANTRY_API_BURST=200")
	srv.createUser(t, "Ada Lovelace", "ada@example.com", "approver")
	token := srv.createToken(t, "ada@example.com", "ada-cli", "read,vote")

	p := repo.OpenPR(3, map[string]string{infratest.DNS + "/main.tf": repo.Resource(infratest.DNS, "zone", `"dns-v2"`)})
	sha := repo.Merge(p.Branch)
	res, err := githubtest.Deliver(t.Context(), http.DefaultClient, srv.URL+"/webhooks/github", webhookSecret, "pull_request", "e2e-restart", repo.Event(p, "closed", sha))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusAccepted, res.StatusCode)

	type execution struct {
		ExecutionID string `json:"execution_id"`
		Status      string `json:"status"`
		Step        string `json:"step"`
		PlanOutput  string `json:"plan_output"`
		ApplyOutput string `json:"apply_output"`
	}
	waitExecution := func(cond func(execution) bool, what string) execution {
		t.Helper()
		deadline := time.Now().Add(infraWait)
		for {
			status, body := callAPI(t, http.MethodGet, srv.URL+"/api/v1/infra/runs?repository=live", token, nil)
			require.Equal(t, http.StatusOK, status, string(body))
			runs := decode[struct {
				Runs []struct {
					ID int64 `json:"id"`
				} `json:"runs"`
			}](t, body)
			if len(runs.Runs) == 1 {
				status, body = callAPI(t, http.MethodGet, fmt.Sprintf("%s/api/v1/infra/runs/%d", srv.URL, runs.Runs[0].ID), token, nil)
				require.Equal(t, http.StatusOK, status, string(body))
				xs := decode[struct {
					Executions []execution `json:"executions"`
				}](t, body).Executions
				if len(xs) == 1 {
					status, body = callAPI(t, http.MethodGet, srv.URL+"/api/v1/infra/executions/"+xs[0].ExecutionID, token, nil)
					require.Equal(t, http.StatusOK, status, string(body))
					if x := decode[execution](t, body); cond(x) {
						return x
					}
				}
			}
			require.True(t, time.Now().Before(deadline), "gave up waiting for %s", what)
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitExecution(func(x execution) bool {
		return strings.Contains(x.PlanOutput, "planning") && !strings.Contains(x.PlanOutput, "planned")
	},
		"the plan to be under way")

	srv.restart(t)
	x := waitExecution(func(x execution) bool { return x.Step == "voting" }, "the plan to be made again after the restart")
	require.Contains(t, x.PlanOutput, "planned")
	status, body := callAPI(t, http.MethodPost, srv.URL+"/api/v1/infra/executions/"+x.ExecutionID+"/votes", token, map[string]string{"decision": "approve"})
	require.Equal(t, http.StatusOK, status, string(body))
	x = waitExecution(func(x execution) bool { return x.Status == "succeeded" }, "the apply")
	require.Contains(t, x.ApplyOutput, "applied")
}
