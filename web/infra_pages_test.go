package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
	infraview "github.com/gantryhq/gantry/views/pages/infra"
)

// The voters of the test repository's accounts, and people who are not.
const (
	ada    = "ada@example.com"    // approver, voter
	grace  = "grace@example.com"  // approver, voter; votes through her emailed links
	olivia = "olivia@example.com" // operator, not a voter
	vera   = "vera@example.com"   // viewer
)

// pagesBundle is an in-test Gantry with workers and the standard
// Terragrunt repository (vpc → rds → ec2 in account prod, dns in account
// shared, prod after shared) applied at its first commit and registered as
// "live", with ada and grace voting and olivia and vera who do not.
type pagesBundle struct {
	*bundle
	repo *infratest.Repo
}

func setupPages(t *testing.T, minApprovals int) *pagesBundle {
	t.Helper()
	b := setup(t)
	repo, _ := infratest.Standard(t)
	repo.Apply(infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2)
	b.Sync(t, repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{ada, grace}, minApprovals, 1))
	b.user(t, ada, models.RoleApprover)
	b.user(t, grace, models.RoleApprover)
	b.user(t, olivia, models.RoleOperator)
	b.user(t, vera, models.RoleViewer)
	b.StartWorkers(t)
	return &pagesBundle{bundle: b, repo: repo}
}

// deliver hands the pull_request delivery of action on p to the service.
func (b *pagesBundle) deliver(t *testing.T, p infratest.PR, action, mergeSHA string) {
	t.Helper()
	res := b.Deliver(t, "pull_request", b.repo.Event(p, action, mergeSHA))
	require.Equal(t, infra.WebhookAccepted, res.Outcome, res.Message)
}

// merge merges p, delivers the merged event and returns its run.
func (b *pagesBundle) merge(t *testing.T, p infratest.PR) *models.Run {
	t.Helper()
	sha := b.repo.Merge(p.Branch)
	b.deliver(t, p, "closed", sha)
	return b.WaitRunOf(t, "live", sha)
}

// voteLink waits for the vote request about unit sent to voter and returns
// the path of its link.
func (b *pagesBundle) voteLink(t *testing.T, voter, unit string) string {
	t.Helper()
	return "/approvals/link/" + b.VoteMail(t, voter, unit)
}

var graphNodeRe = regexp.MustCompile(`data-testid="graph-node" data-execution="([^"]+)" data-status="([a-z]+)"`)

// graphStatuses reads the run page's graph: execution id → status class.
func graphStatuses(body string) map[string]string {
	out := map[string]string{}
	for _, m := range graphNodeRe.FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// statusesByUnit maps the run's units to their graph status classes.
func (b *pagesBundle) statusesByUnit(t *testing.T, runID int64, body string) map[string]string {
	t.Helper()
	xs, err := models.ExecutionsOfRun(t.Context(), b.db.Bun, runID)
	require.NoError(t, err)
	byID := graphStatuses(body)
	out := map[string]string{}
	for _, x := range xs {
		out[x.CfgPath] = byID[x.ExecutionID]
	}
	return out
}

// getJSON fetches a JSON endpoint with a browser's session.
func (br *browser) getJSON(t *testing.T, path string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("GET", br.base+path, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "application/json")
	res, err := br.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
	return res.StatusCode, out
}

// section cuts the element marked data-testid=id out of a page, roughly:
// from the marker to the next marker of the same kind of element.
func section(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `data-testid="`+id+`"`)
	require.GreaterOrEqual(t, i, 0, "no data-testid=%q on the page", id)
	rest := body[i:]
	if j := strings.Index(rest[1:], "<section"); j >= 0 {
		return rest[:j+1]
	}
	return rest
}

// TestInfraPagesFollowARun drives a real merged pull request through the
// service (real git, real terraform) and reads every page along the way:
// /infra, the pull request and its plans, the run with its graph, the
// executions with their output and votes, /approvals, and the emailed
// voting links as an anonymous browser.
func TestInfraPagesFollowARun(t *testing.T) {
	t.Parallel()
	b := setupPages(t, 2)
	r := b.repo
	asAda, asOlivia, asVera := b.browser(t), b.browser(t), b.browser(t)
	asAda.login(t, ada)
	asOlivia.login(t, olivia)
	asVera.login(t, vera)

	p := b.repo.OpenPR(7, map[string]string{
		infratest.DNS + "/main.tf": r.Resource(infratest.DNS, "zone", `"dns-v2"`),
		infratest.VPC + "/main.tf": r.Resource(infratest.VPC, "vpc", `"vpc-v2"`),
		infratest.EC2 + "/main.tf": r.Resource(infratest.EC2, "ec2", `"ec2 large on ${data.terraform_remote_state.rds.outputs.id}"`, infratest.RDS),
	})
	b.deliver(t, p, "opened", "")
	var plans []models.PRPlan
	servertest.WaitFor(t, func() (bool, string) {
		var err error
		plans, err = models.PlansOfPullRequest(t.Context(), b.db.Bun, "live", 7, p.Head)
		require.NoError(t, err)
		done := 0
		for _, pl := range plans {
			if pl.Status == models.PlanSucceeded {
				done++
			}
		}
		return len(plans) == 3 && done == 3, fmt.Sprintf("%d of %d plans succeeded", done, len(plans))
	})

	t.Run("/infra shows the repository, its accounts, the lock and the pull request's plans", func(t *testing.T) {
		status, page, _ := asVera.get(t, "/infra")
		require.Equal(t, http.StatusOK, status)
		repo := section(t, page, "repositories")
		require.Contains(t, repo, `data-repository="live"`)
		require.Contains(t, repo, r.Remote)
		require.Contains(t, repo, "graph scan")
		require.Regexp(t, `data-testid="merge-lock" data-locked="false"`, repo)
		require.Contains(t, repo, `data-account="prod"`)
		require.Contains(t, repo, `data-account="shared"`)
		require.Contains(t, repo, ada)
		require.Contains(t, repo, "2 of 2 approve to apply · 1 rejection stops it")
		pulls := section(t, page, "open-pulls")
		require.Contains(t, pulls, `href="/infra/live/pulls/7"`)
		require.Equal(t, 3, strings.Count(pulls, `data-testid="plan-chip" data-status="changes"`), pulls)
		require.Contains(t, pulls, "3 units: 3 changes")
		require.Contains(t, section(t, page, "recent-runs"), `data-testid="runs-empty"`)
	})
	t.Run("the pull request's page lists its plans at the head", func(t *testing.T) {
		status, page, _ := asVera.get(t, "/infra/live/pulls/7")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, page, p.Head)
		for _, unit := range []string{infratest.DNS, infratest.VPC, infratest.EC2} {
			require.Contains(t, page, `data-testid="plan-row" data-unit="`+unit+`" data-status="changes"`)
		}
		require.Contains(t, page, `data-testid="pull-runs-empty"`)
		require.Contains(t, page, infra.EventPullRequestPlanned, "its log slice")
		require.NotContains(t, page, `http-equiv="refresh"`, "no plan runs")
	})
	var dnsPlan models.PRPlan
	for _, pl := range plans {
		if pl.Path == infratest.DNS {
			dnsPlan = pl
		}
	}
	t.Run("a plan's page shows its output; its tail pages by offset", func(t *testing.T) {
		status, page, _ := asVera.get(t, "/infra/plans/"+strconv.FormatInt(dnsPlan.ID, 10))
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, page, html.EscapeString(`"dns-v2"`))
		require.Contains(t, page, "Plan: ")
		require.Contains(t, page, "Result: changes to apply.")
		require.NotContains(t, page, "data-tail-src", "a finished plan is not followed")

		status, tail := asVera.getJSON(t, "/infra/plans/"+strconv.FormatInt(dnsPlan.ID, 10)+"/output")
		require.Equal(t, http.StatusOK, status)
		text := tail["text"].(string)
		require.Contains(t, text, `"dns-v2"`)
		require.Equal(t, true, tail["done"])
		next := int(tail["next"].(float64))
		require.Equal(t, len([]rune(text)), next)
		_, tail = asVera.getJSON(t, fmt.Sprintf("/infra/plans/%d/output?offset=%d", dnsPlan.ID, next-10))
		require.Equal(t, string([]rune(text)[next-10:]), tail["text"])
		_, tail = asVera.getJSON(t, fmt.Sprintf("/infra/plans/%d/output?offset=%d", dnsPlan.ID, next))
		require.Equal(t, "", tail["text"])
		require.EqualValues(t, next, tail["next"])
	})

	run := b.merge(t, p)
	runPath := "/infra/runs/" + strconv.FormatInt(run.ID, 10)
	dns := b.WaitExecution(t, run.ID, infratest.DNS, models.ExecRunning, models.StepVoting)
	dnsPath := "/infra/executions/" + dns.ExecutionID

	t.Run("the home page's infrastructure card counts what is going on", func(t *testing.T) {
		status, page, _ := asVera.get(t, "/")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, page, "1 repository · 1 run in progress · 1 execution waiting for votes")
	})

	t.Run("while it runs, the run page draws the graph coloured by status and refreshes", func(t *testing.T) {
		status, page, _ := asVera.get(t, runPath)
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, map[string]string{
			infratest.DNS: "voting", infratest.VPC: "waiting", infratest.RDS: "waiting", infratest.EC2: "waiting",
		}, b.statusesByUnit(t, run.ID, page))
		require.Equal(t, 2, strings.Count(page, `data-testid="graph-edge"`), "vpc → rds → ec2")
		require.Equal(t, 1, strings.Count(page, `data-testid="graph-edge-account"`), "shared's dns before prod's first unit")
		require.Contains(t, page, `href="`+dnsPath+`"`, "nodes link to their executions")
		require.Contains(t, page, `http-equiv="refresh"`)
		require.Regexp(t, `data-testid="merge-lock" data-locked="true"`, page)
		require.Contains(t, page, "held by this run (#7)")
		require.Contains(t, page, p.Head, "the pull request's head commit")
		require.Contains(t, page, run.MergeCommit)
		require.Contains(t, page, infra.EventRunStarted, "the run's log slice")

		_, index, _ := asVera.get(t, "/infra")
		require.Contains(t, index, "locked by #7")
		require.Contains(t, index, `href="`+runPath+`"`)
	})
	t.Run("the execution page shows the seed's fields, the plan and who can vote", func(t *testing.T) {
		status, page, _ := asVera.get(t, dnsPath)
		require.Equal(t, http.StatusOK, status)
		for id, want := range map[string]string{
			"field-execution-id": dns.ExecutionID, "field-cfg-path": infratest.DNS, "field-account-name": "shared",
			"field-min-approvals": "2", "field-approval-voters": "none yet", "field-status": "running · voting",
			"field-commit": run.MergeCommit, "field-head-ref": p.Branch,
		} {
			require.Regexp(t, `data-testid="`+id+`">`+regexp.QuoteMeta(want), page, id)
		}
		require.Contains(t, page, "terraform -chdir={dir} plan -input=false -no-color -detailed-exitcode -out={plan_file}")
		require.Contains(t, section(t, page, "plan-output"), html.EscapeString(`"dns-v2"`))
		require.Contains(t, page, `data-testid="apply-output-empty"`)
		require.Contains(t, page, "0 of 2 approvals · 0 of 1 rejections")
		require.NotContains(t, page, `data-testid="vote-form"`)
		require.Contains(t, page, "Only the voters of account shared vote on it: ada@example.com, grace@example.com.")
		require.Contains(t, page, infra.EventExecutionPlanned, "its log entries")
	})
	t.Run("/approvals lists what waits for the signed-in voter", func(t *testing.T) {
		_, page, _ := asAda.get(t, "/approvals")
		row := section(t, page, "approvals-table")
		require.Contains(t, row, `data-execution="`+dns.ExecutionID+`"`)
		require.Contains(t, row, infratest.DNS)
		require.Regexp(t, `data-testid="approval-summary">Plan: \d+ to add, \d+ to change, \d+ to destroy\.`, row)
		require.Contains(t, row, "0 of 2 approvals")
		require.Contains(t, row, `href="`+dnsPath+`#vote"`)

		_, page, _ = asOlivia.get(t, "/approvals")
		require.Contains(t, page, `data-testid="empty-approvals"`)
		empty := section(t, page, "empty-approvals")
		require.Contains(t, empty, "You are a voter of no infrastructure account")
		require.Contains(t, empty, "voters: [olivia@example.com, …]")
		require.Contains(t, empty, "under gantry dev --demo, by the demo", "names no file as the only place")
		require.Contains(t, empty, "voted on by ada@example.com, grace@example.com.", "who votes for each account")
		require.NotContains(t, empty, "ask whoever maintains")
	})
	t.Run("a non-voter and a viewer cannot vote from the dashboard", func(t *testing.T) {
		_, _, csrf := asOlivia.get(t, dnsPath)
		res, body := asOlivia.post(t, dnsPath+"/vote", url.Values{"_csrf": {csrf}, "decision": {"approve"}})
		require.Equal(t, http.StatusForbidden, res.StatusCode)
		require.Contains(t, body, "Only the voters of account shared vote on "+infratest.DNS+": ada@example.com, grace@example.com.")

		_, _, csrf = asVera.get(t, dnsPath)
		res, body = asVera.post(t, dnsPath+"/vote", url.Values{"_csrf": {csrf}, "decision": {"approve"}})
		require.Equal(t, http.StatusForbidden, res.StatusCode)
		require.Contains(t, body, "This needs the approver role; you are viewer.")
	})
	t.Run("a voter approves from the dashboard", func(t *testing.T) {
		_, page, csrf := asAda.get(t, dnsPath)
		require.Contains(t, page, `data-testid="vote-form"`)
		require.Contains(t, page, `You are voting as <strong data-testid="voter">`+ada)
		res, _ := asAda.post(t, dnsPath+"/vote", url.Values{"_csrf": {csrf}, "decision": {"approve"}, "comment": {"zone looks right"}})
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		require.Equal(t, dnsPath, res.Header.Get("Location"))
		_, page, _ = asAda.get(t, dnsPath)
		require.Contains(t, page, "Recorded your approval: 1 of 2 approvals, 0 of 1 rejections.")
		require.Contains(t, page, `data-testid="vote-row" data-voter="ada@example.com" data-decision="approve"`)
		require.Contains(t, page, "zone looks right")
		require.Contains(t, page, "dashboard")
		require.Regexp(t, `data-testid="waiting-voters">Not voted yet:\s*grace@example.com`, page)
		require.Contains(t, page, "You voted approve at", "she may change it until it is decided")
	})

	var dnsLink string
	t.Run("the emailed link works for an anonymous browser: page, form, vote, tally", func(t *testing.T) {
		dnsLink = b.voteLink(t, grace, infratest.DNS)
		anon := b.browser(t)
		status, page, csrf := anon.get(t, dnsLink)
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, page, `data-testid="link-voter">You are voting as <strong>grace@example.com</strong>`)
		require.Contains(t, page, run.MergeCommit)
		require.Contains(t, page, html.EscapeString(`"dns-v2"`), "the plan")
		changes := section(t, page, "link-changes")
		require.Contains(t, changes, `data-action="update"`, "the summary lists the resources by action before the plan")
		require.Contains(t, changes, `data-testid="link-change">terraform_data.zone</span>`)
		require.Less(t, strings.Index(page, `data-testid="link-changes"`), strings.Index(page, `data-testid="link-plan-text"`), "summary first")
		require.Contains(t, page, "1 of 2 approvals · 0 of 1 rejections", "the votes so far")
		require.Contains(t, page, `data-voter="ada@example.com"`)
		require.Contains(t, page, `data-testid="link-vote-form"`)
		require.NotEmpty(t, csrf, "the form carries the CSRF token the middleware wants")
		require.NotContains(t, page, `data-testid="current-user"`, "nobody is signed in")

		res, _ := anon.post(t, dnsLink, url.Values{"_csrf": {csrf}, "decision": {"approve"}, "comment": {"ship it"}})
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		require.Equal(t, dnsLink, res.Header.Get("Location"))
		_, page, _ = anon.get(t, dnsLink)
		require.Contains(t, page, "Recorded your approval: 2 of 2 approvals, 0 of 1 rejections. That was enough: the plan is being applied.")
		require.Contains(t, page, "2 of 2 approvals · 0 of 1 rejections")
		require.Contains(t, page, `data-voter="grace@example.com" data-decision="approve"`)
		require.NotContains(t, page, `data-testid="link-vote-form"`, "decided: votes are closed")

		events := b.logEvents(t, infra.ExecutionTarget(dns.ExecutionID))
		require.Equal(t, grace, events[infra.EventExecutionApproved])
	})
	t.Run("without the CSRF token an anonymous vote is refused", func(t *testing.T) {
		anon := b.browser(t)
		res, _ := anon.post(t, dnsLink, url.Values{"decision": {"reject"}})
		require.Equal(t, http.StatusForbidden, res.StatusCode)
	})

	b.WaitExecution(t, run.ID, infratest.DNS, models.ExecSucceeded, models.StepApplying)
	b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)

	t.Run("the applied execution shows its apply output", func(t *testing.T) {
		_, page, _ := asVera.get(t, dnsPath)
		require.Contains(t, page, `data-testid="execution-status"><span class="badge ok">succeeded`)
		require.Contains(t, section(t, page, "apply-output"), "Apply complete!")
		require.Contains(t, page, "approval_voters")
		require.Regexp(t, `data-testid="field-approval-voters">ada@example.com, grace@example.com`, page)

		status, tail := asVera.getJSON(t, dnsPath+"/output?step=applying")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, tail["text"], "Apply complete!")
		require.Equal(t, true, tail["done"])
		require.Equal(t, models.ExecSucceeded, tail["status"])
		status, tail = asVera.getJSON(t, dnsPath+"/output?step=planning&offset=5")
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, true, tail["done"])
	})
	t.Run("a browser with fetch metadata rejects through its link", func(t *testing.T) {
		link := b.voteLink(t, grace, infratest.VPC)
		anon := b.browser(t)
		req, _ := http.NewRequest("GET", anon.base+link, nil)
		req.Header.Set("Sec-Fetch-Site", "none") // opened from the mail client
		res, err := anon.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Equal(t, "no-store", res.Header.Get("Cache-Control"))
		form := url.Values{"_csrf": {"_echo_csrf_using_sec_fetch_site_"}, "decision": {"reject"}, "comment": {"not during the freeze"}}
		req, _ = http.NewRequest("POST", anon.base+link, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("Origin", anon.base)
		res, err = anon.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusSeeOther, res.StatusCode)

		_, page, _ := anon.get(t, link)
		require.Contains(t, page, "Recorded your rejection: 0 of 2 approvals, 1 of 1 rejections. That was enough")
		require.Contains(t, page, "not during the freeze")

		t.Run("voting again on a decided approval says so", func(t *testing.T) {
			_, _, csrf := anon.get(t, "/login") // a page loaded before the decision had the same token
			res, _ := anon.post(t, link, url.Values{"_csrf": {csrf}, "decision": {"approve"}})
			require.Equal(t, http.StatusSeeOther, res.StatusCode)
			_, page, _ := anon.get(t, link)
			require.Contains(t, page, `data-testid="flash">`)
			require.Contains(t, page, "votes are closed")
		})
		t.Run("a cross-site post is refused", func(t *testing.T) {
			req, _ := http.NewRequest("POST", anon.base+link, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", "cross-site")
			res, err := anon.Do(req)
			require.NoError(t, err)
			res.Body.Close()
			require.Equal(t, http.StatusForbidden, res.StatusCode)
		})
	})

	b.WaitRun(t, run.ID, models.RunFailed)

	t.Run("when the run is over the graph shows how it ended and the lock is free", func(t *testing.T) {
		_, page, _ := asVera.get(t, runPath)
		require.Equal(t, map[string]string{
			infratest.DNS: "succeeded", infratest.VPC: "failed", infratest.RDS: "aborted", infratest.EC2: "aborted",
		}, b.statusesByUnit(t, run.ID, page))
		require.Contains(t, page, `data-testid="run-status"><span class="badge bad">failed`)
		require.NotContains(t, page, `http-equiv="refresh"`)
		require.Regexp(t, `data-testid="merge-lock" data-locked="false"`, page)
		require.Contains(t, page, "rejected by grace@example.com")
		require.Contains(t, page, `<li class="st-aborted"><span class="swatch" aria-hidden="true"></span>aborted <strong>2</strong>`, "the legend counts")
		require.Contains(t, page, infra.EventRunFailed)
	})
	t.Run("/infra/runs lists it and filters", func(t *testing.T) {
		_, page, _ := asVera.get(t, "/infra/runs")
		require.Contains(t, page, `data-testid="run-row" data-run="Run `+strconv.FormatInt(run.ID, 10)+`" data-status="failed"`)
		_, page, _ = asVera.get(t, "/infra/runs?status=failed&repository=live&pr=7")
		require.Equal(t, 1, strings.Count(page, `data-testid="run-row"`))
		_, page, _ = asVera.get(t, "/infra/runs?status=succeeded")
		require.Contains(t, page, `data-testid="runs-empty"`)
		require.Contains(t, page, "No run matches these filters")
	})
	t.Run("nothing waits for ada any more", func(t *testing.T) {
		_, page, _ := asAda.get(t, "/approvals")
		require.Contains(t, page, `data-testid="empty-approvals"`)
		require.Contains(t, page, "You vote for account shared of live")
	})
	t.Run("an expired link names its execution and offers to sign in", func(t *testing.T) {
		token, err := b.Infra.Approvals.Signer().Sign(approval.Claims{Subject: infra.ExecutionTarget(dns.ExecutionID), Voter: grace, Expires: time.Now().Add(-time.Hour)})
		require.NoError(t, err)
		status, page, _ := b.browser(t).get(t, "/approvals/link/"+token)
		require.Equal(t, http.StatusForbidden, status)
		require.Contains(t, page, "This voting link has expired. Sign in and vote from the dashboard.")
		require.Contains(t, page, `data-testid="link-expired-execution">`+dns.ExecutionID)
		require.Contains(t, page, infratest.DNS)
		require.Contains(t, page, `href="/login?next=%2Finfra%2Fexecutions%2F`+dns.ExecutionID+`"`)

		anon := b.browser(t)
		_, _, csrf := anon.get(t, "/login") // the page loaded before the link expired had the same token
		res, body := anon.post(t, "/approvals/link/"+token, url.Values{"_csrf": {csrf}, "decision": {"approve"}})
		require.Equal(t, http.StatusForbidden, res.StatusCode, "an expired link cannot vote")
		require.Contains(t, body, "This voting link has expired.")
	})
	t.Run("an invalid link is a 403 page", func(t *testing.T) {
		tampered := strings.TrimPrefix(dnsLink, "/approvals/link/") + "x"
		status, page, _ := b.browser(t).get(t, "/approvals/link/"+tampered)
		require.Equal(t, http.StatusForbidden, status)
		require.Contains(t, page, "This voting link is not valid.")
		require.Contains(t, page, `data-testid="link-sign-in"`)
		require.NotContains(t, page, `data-testid="link-expired"`)
	})
	t.Run("unknown ids are 404s", func(t *testing.T) {
		for _, path := range []string{
			"/infra/runs/999999", "/infra/runs/abc", "/infra/executions/run-1-dead-prod-vpc-000", "/infra/plans/999999", "/infra/plans/x",
			"/infra/live/pulls/999", "/infra/live/pulls/x", "/infra/nope/pulls/7",
		} {
			status, page, _ := asVera.get(t, path)
			require.Equal(t, http.StatusNotFound, status, path)
			require.Contains(t, page, `data-testid="error-page"`, path)
		}
		status, _ := asVera.getJSON(t, "/infra/executions/nope/output?step=planning")
		require.Equal(t, http.StatusNotFound, status)
		status, _ = asVera.getJSON(t, "/infra/plans/999999/output")
		require.Equal(t, http.StatusNotFound, status)
		status, body := asVera.getJSON(t, dnsPath+"/output?step=voting")
		require.Equal(t, http.StatusBadRequest, status)
		require.Contains(t, errorFields(body), "step")
		status, body = asVera.getJSON(t, dnsPath+"/output?step=planning&offset=-1")
		require.Equal(t, http.StatusBadRequest, status)
		require.Contains(t, errorFields(body), "offset")
	})
}

// syncRepositories registers repositories (no git behind them) so that rows
// written through the models have one to belong to.
func (b *bundle) syncRepositories(t *testing.T, names ...string) {
	t.Helper()
	var yaml strings.Builder
	yaml.WriteString("repositories:\n")
	for _, name := range names {
		fmt.Fprintf(&yaml, "  - name: %s\n    url: https://git.example.com/%s.git\n    webhook_secret_env: %s\n    accounts:\n      - {name: prod, path: live/prod/, voters: [%s], min_approvals: 1, min_rejections: 1}\n",
			name, name, servertest.WebhookSecretEnv, ada)
	}
	b.Sync(t, yaml.String())
}

// TestInfraOutputIsFollowedLive checks the live tail with rows written the
// way the workers write them: an execution planning, its output growing,
// then its step moving on; and a pull request's plan likewise.
func TestInfraOutputIsFollowedLive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, vera, models.RoleViewer)
	br := b.browser(t)
	br.login(t, vera)
	ctx := t.Context()
	db := b.db.Bun
	b.syncRepositories(t, "live")

	run := b.insertRun(t, models.RunRunning)
	now := time.Now()
	x := newExecution(run, "run-3-f00d-prod-vpc-123", "vpc", models.ExecRunning, models.StepPlanning)
	x.PlanOutput, x.StartedAt, x.PlanStartedAt = "Initializing…\n", &now, &now
	require.NoError(t, models.InsertExecutions(ctx, db, []*models.Execution{x}))
	path := "/infra/executions/" + x.ExecutionID

	_, page, _ := br.get(t, path)
	require.Contains(t, section(t, page, "execution-deps"), "<h2>Waits for</h2>", "not \"Runs after\", which reads both ways")
	require.Contains(t, page, `data-tail-src="`+html.EscapeString(path+"/output?step=planning")+`" data-tail-offset="14"`, "14 characters shown: the tail starts after them")
	require.Contains(t, page, "<noscript><meta http-equiv=\"refresh\" content=\"5\"></noscript>", "without scripts the page refreshes")
	require.NotContains(t, section(t, page, "apply-output"), "data-tail-src", "only the running step is followed")

	_, tail := br.getJSON(t, path+"/output?step=planning&offset=14")
	require.Equal(t, "", tail["text"])
	require.Equal(t, false, tail["done"])
	require.NoError(t, models.AppendExecutionOutput(ctx, db, x.ID, models.StepPlanning, "Plan: 1 to add, 0 to change, 0 to destroy.\n"))
	_, tail = br.getJSON(t, path+"/output?step=planning&offset=14")
	require.Equal(t, "Plan: 1 to add, 0 to change, 0 to destroy.\n", tail["text"])
	require.EqualValues(t, 14+43, tail["next"])
	require.Equal(t, false, tail["done"])
	_, tail = br.getJSON(t, path+"/output?step=applying")
	require.Equal(t, false, tail["done"], "applying is still to come")

	x.Step = models.StepVoting
	require.NoError(t, models.UpdateExecution(ctx, db, x, "step"))
	_, tail = br.getJSON(t, path+"/output?step=planning&offset=57")
	require.Equal(t, true, tail["done"], "planning is over once it votes")
	_, page, _ = br.get(t, path)
	require.NotContains(t, page, "data-tail-src", "nothing runs while it waits for votes")

	x.Step = models.StepApplying
	require.NoError(t, models.UpdateExecution(ctx, db, x, "step"))
	_, page, _ = br.get(t, path)
	require.Contains(t, page, `data-tail-src="`+html.EscapeString(path+"/output?step=applying")+`" data-tail-offset="0"`)

	t.Run("a pull request's plan", func(t *testing.T) {
		_, err := models.UpsertPullRequest(ctx, db, &models.PullRequest{Repository: "live", Number: 4, Title: "Replica", HeadSHA: "abc123", State: models.PROpen})
		require.NoError(t, err)
		queued, err := models.InsertPRPlans(ctx, db, []*models.PRPlan{{Repository: "live", PRNumber: 4, HeadSHA: "abc123", Path: "live/prod/rds", Status: models.PlanQueued}})
		require.NoError(t, err)
		p := queued[0]
		planPath := "/infra/plans/" + strconv.FormatInt(p.ID, 10)
		_, page, _ := br.get(t, planPath)
		require.Contains(t, page, `data-tail-src="`+planPath+`/output" data-tail-offset="0"`)
		require.Contains(t, page, "Queued: the plan starts as soon as a worker is free")
		ok, err := models.StartPRPlan(ctx, db, p.ID, p.Generation)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, models.AppendPRPlanOutput(ctx, db, p.ID, "Refreshing state…\n"))
		_, tail := br.getJSON(t, planPath+"/output")
		require.Equal(t, "Refreshing state…\n", tail["text"])
		require.Equal(t, false, tail["done"])
		p.Status = models.PlanSucceeded
		finished, err := models.FinishPRPlan(ctx, db, p)
		require.NoError(t, err)
		require.True(t, finished)
		_, tail = br.getJSON(t, planPath+"/output?offset=18")
		require.Equal(t, "", tail["text"])
		require.Equal(t, true, tail["done"])

		// Past what PostgreSQL's substr takes: a 400, not a 500.
		status, tail := br.getJSON(t, planPath+"/output?offset=2147483647")
		require.Equal(t, http.StatusBadRequest, status, tail)
		status, _ = br.getJSON(t, path+"/output?step=planning&offset=99999999999")
		require.Equal(t, http.StatusBadRequest, status)
	})
}

// TestInfraPagesWithNothingConfigured checks the empty states say what will
// appear and how to set it up.
func TestInfraPagesWithNothingConfigured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, ada, models.RoleApprover)
	br := b.browser(t)
	br.login(t, ada)

	status, page, _ := br.get(t, "/infra")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, `data-testid="empty-infra"`)
	require.Contains(t, page, `data-testid="webhook-url">`+servertest.BaseURL+`/webhooks/github`)
	require.Contains(t, page, "application/json")
	require.Contains(t, page, "webhook_secret_env")
	require.Contains(t, page, "Pull requests")
	require.Contains(t, page, html.EscapeString("depends_on: [shared]"))
	f, err := gantryfile.Parse("gantry.yaml", []byte(infraview.ExampleConfig), func(string) (string, bool) { return "x", true })
	require.NoError(t, err, "the example gantry.yaml is valid")
	require.Len(t, f.Repositories, 1)

	_, page, _ = br.get(t, "/infra/runs")
	require.Contains(t, page, `data-testid="runs-empty"`)
	require.Contains(t, page, "No infrastructure repository is configured.")

	_, page, _ = br.get(t, "/approvals")
	require.Contains(t, page, `data-testid="empty-approvals"`)
	require.Contains(t, page, "No infrastructure repository is configured, so nothing takes votes yet.")

	status, _, _ = br.get(t, "/dev/mailbox")
	require.Equal(t, http.StatusNotFound, status, "the dev mailbox exists only under gantry dev")
	require.NotContains(t, page, `href="/dev/mailbox"`, "and is not in the navigation")
}

// TestRunsPageFiltersAndPages lists many runs recorded through the models.
func TestRunsPageFiltersAndPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, vera, models.RoleViewer)
	br := b.browser(t)
	br.login(t, vera)
	ctx := context.Background()
	b.syncRepositories(t, "live", "network")
	for i := 1; i <= 60; i++ {
		repo, status := "live", models.RunSucceeded
		if i%3 == 0 {
			repo = "network"
		}
		if i%4 == 0 {
			status = models.RunFailed
		}
		require.NoError(t, models.InsertRun(ctx, b.db.Bun, &models.Run{Repository: repo, PRNumber: 100 + i, PRTitle: fmt.Sprintf("Change %d", i),
			MergeCommit: fmt.Sprintf("%040d", i), Scan: "graph", Status: status}))
	}
	rowRe := regexp.MustCompile(`data-testid="run-row" data-run="Run (\d+)"`)
	rows := func(page string) []int {
		var ids []int
		for _, m := range rowRe.FindAllStringSubmatch(page, -1) {
			n, _ := strconv.Atoi(m[1])
			ids = append(ids, n)
		}
		return ids
	}

	_, page, _ := br.get(t, "/infra/runs")
	first := rows(page)
	require.Len(t, first, 50)
	require.Equal(t, 60, first[0], "newest first")
	require.Contains(t, page, "50 runs on this page, newest first.")
	older := olderRe.FindStringSubmatch(page)
	require.NotNil(t, older)
	_, page, _ = br.get(t, html.UnescapeString(older[1]))
	second := rows(page)
	require.Equal(t, []int{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, second, "the rest, without gaps or repeats")
	require.Contains(t, page, `data-testid="page-newer"`)
	require.NotContains(t, page, `data-testid="page-older"`)

	_, page, _ = br.get(t, "/infra/runs?repository=network&status=failed")
	require.Equal(t, []int{60, 48, 36, 24, 12}, rows(page))
	require.Contains(t, page, "5 runs of network, failed, newest first.")
	require.Contains(t, page, `<option value="network" selected>`)
	_, page, _ = br.get(t, "/infra/runs?pr=%23142")
	require.Equal(t, []int{42}, rows(page))

	for _, q := range []string{"status=melted", "pr=abc", "before=-4"} {
		status, page, _ := br.get(t, "/infra/runs?"+q)
		require.Equal(t, http.StatusBadRequest, status, q)
		require.Contains(t, page, `data-testid="error-page"`)
	}
}

// TestMalformedTerragruntOnThePages: a terragrunt.hcl that does not parse is
// named, with its line, on the pull request's page (in its log too, and
// without a note that plans may still come) and on the failed run's.
func TestMalformedTerragruntOnThePages(t *testing.T) {
	t.Parallel()
	b := setupPages(t, 1)
	p := b.repo.OpenPR(33, map[string]string{infratest.RDS + "/terragrunt.hcl": "dependency \"vpc\" {\n  config_path = \n}\n"})
	b.deliver(t, p, "opened", "")
	b.WaitStatus(t, p.Head, "gantry/plan", "error")
	br := b.browser(t)
	br.login(t, vera)
	status, page, _ := br.get(t, "/infra/live/pulls/33")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, section(t, page, "plan-error"), infratest.RDS+"/terragrunt.hcl:2")
	// The plans panel and the log agree with the error: no plan is coming,
	// and the failed scan is logged.
	plans := section(t, page, "pull-plans")
	require.Contains(t, plans, `data-testid="plans-scan-failed"`)
	require.NotContains(t, plans, "No plan at this commit: either")
	log := section(t, page, "entity-log")
	require.NotContains(t, log, `data-testid="log-empty"`)
	require.Contains(t, log, `data-event="pull-request-scan-failed"`)
	require.Contains(t, log, "terragrunt.hcl:2")
	status, page, _ = br.get(t, "/infra")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, `data-testid="pull-plan-error"`)

	// Merged, the unit fails on its own (not the whole repository): the
	// run names it, and its execution's page says why, with the line.
	run := b.merge(t, p)
	b.WaitRun(t, run.ID, models.RunFailed)
	status, page, _ = br.get(t, fmt.Sprintf("/infra/runs/%d", run.ID))
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, section(t, page, "run-error"), infratest.RDS)
	require.Contains(t, section(t, page, "run-lock"), "released")
	xs, err := models.ExecutionsOfRun(t.Context(), b.db.Bun, run.ID)
	require.NoError(t, err)
	require.Len(t, xs, 2, "rds fails, ec2 (which depends on it) is aborted")
	for _, x := range xs {
		status, page, _ = br.get(t, pageurl.Execution(x.ExecutionID))
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, page, infratest.RDS+"/terragrunt.hcl:2", x.CfgPath)
	}
}
