package demo_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/demo"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// TestDemoRunSucceeds is the demo's happy path, as a newcomer takes it: the
// demo loads (once) into a real Gantry with workers; its run in progress
// really plans the demo repository (local git, real terraform); each vote
// yes applies the saved plan and moves the run on to what depends on it,
// until the run succeeds with every execution applied or, without changes,
// done without a vote.
func TestDemoRunSucceeds(t *testing.T) {
	t.Parallel()
	s := servertest.New(t, "GANTRY_DATA_DIR="+t.TempDir())
	ctx := t.Context()
	db := s.DB.Bun

	loaded, err := s.App.LoadDemo(ctx)
	require.NoError(t, err)
	require.True(t, loaded)
	count := func() map[string]int {
		n := map[string]int{}
		entries, err := models.ListLog(ctx, db, models.LogFilter{Limit: models.MaxLogPage})
		require.NoError(t, err)
		n["log"] = len(entries)
		runs, err := models.ListRuns(ctx, db, models.RunFilter{})
		require.NoError(t, err)
		n["runs"] = len(runs)
		return n
	}
	before := count()
	loaded, err = s.App.LoadDemo(ctx)
	require.NoError(t, err)
	require.False(t, loaded, "loaded once")
	require.Equal(t, before, count())

	repos, err := models.ListRepositories(ctx, db)
	require.NoError(t, err)
	require.Len(t, repos, 1)
	require.Len(t, repos[0].Accounts, 3)
	require.True(t, strings.HasSuffix(repos[0].URL, "/demo/infra-live.git"), "the demo repository is on the local disk: %s", repos[0].URL)
	require.Equal(t, "terraform", repos[0].PlanCommand[0], "the terraform preset: terragrunt is rarely installed")
	runs, err := models.ListRuns(ctx, db, models.RunFilter{})
	require.NoError(t, err)
	require.Len(t, runs, 4)
	byPR := map[int]models.Run{}
	for _, r := range runs {
		byPR[r.PRNumber] = r
	}
	require.Equal(t, models.RunFailed, byPR[37].Status)
	require.Contains(t, byPR[37].Error, "terragrunt.hcl:2", "the scan failure names file and line")
	require.Equal(t, models.RunSucceeded, byPR[38].Status)
	require.Equal(t, models.RunFailed, byPR[41].Status)
	live := byPR[42]
	require.Equal(t, models.RunQueued, live.Status, "the live run is queued as a merge delivery queues it")
	history, err := models.ExecutionsOfRun(ctx, db, byPR[41].ID)
	require.NoError(t, err)
	states := map[string]bool{}
	for _, x := range history {
		states[x.Status+"/"+x.Step] = true
	}
	require.Equal(t, map[string]bool{"failed/applying": true, "aborted/": true}, states)

	// From here on everything is the workers': git, terraform, the votes.
	s.StartWorkers(t)
	iam := s.WaitExecution(t, live.ID, "live/shared/iam", models.ExecRunning, models.StepVoting)
	require.Contains(t, iam.PlanOutput, "terraform_data.rds_monitoring_role will be updated in-place")
	lock, err := models.MergeLockOf(ctx, db, demoRepo)
	require.NoError(t, err)
	require.NotNil(t, lock)
	require.Equal(t, live.ID, lock.RunID, "the live run holds the merge lock")
	xs, err := models.ExecutionsOfRun(ctx, db, live.ID)
	require.NoError(t, err)
	units := map[string]string{}
	for _, x := range xs {
		units[x.CfgPath] = x.Status
	}
	require.Equal(t, map[string]string{"live/shared/iam": models.ExecRunning, "live/prod/rds": models.ExecWaiting,
		"live/prod/ec2": models.ExecWaiting, "live/prod/monitoring": models.ExecWaiting}, units,
		"what the pull request changed and what depends on it; prod waits for shared")
	waiting, err := models.ExecutionsAwaitingVoter(ctx, db, demo.Approver)
	require.NoError(t, err)
	require.Len(t, waiting, 1)
	require.Equal(t, "live/shared/iam", waiting[0].CfgPath)

	// The first vote through the dev mailbox's link, as a newcomer does.
	client := newClient(t, s)
	token := s.VoteMail(t, demo.Approver, "live/shared/iam")
	page, csrf := client.get(t, "/approvals/link/"+token)
	require.Contains(t, page, "You are voting as <strong>"+demo.Approver)
	client.post(t, "/approvals/link/"+token, url.Values{"_csrf": {csrf}, "decision": {"approve"}})
	s.WaitExecution(t, live.ID, "live/shared/iam", models.ExecSucceeded, models.StepApplying)

	// Then the database, then what reads it: the app servers' input changes
	// (the replica's endpoint), the alarms' does not.
	rds := s.WaitExecution(t, live.ID, "live/prod/rds", models.ExecRunning, models.StepVoting)
	require.Contains(t, rds.PlanOutput, "Plan: 1 to add, 1 to change, 0 to destroy.")
	vote(t, s, rds)
	ec2 := s.WaitExecution(t, live.ID, "live/prod/ec2", models.ExecRunning, models.StepVoting)
	require.Contains(t, ec2.PlanOutput, `prod-main-replica-1.eu-west-1.rds.example:5432`)
	s.WaitExecution(t, live.ID, "live/prod/monitoring", models.ExecSucceeded, models.StepPlanning)
	vote(t, s, ec2)

	run := s.WaitRun(t, live.ID, models.RunSucceeded, models.RunFailed)
	require.Equal(t, models.RunSucceeded, run.Status, run.Error)
	xs, err = models.ExecutionsOfRun(ctx, db, live.ID)
	require.NoError(t, err)
	for _, x := range xs {
		require.Equal(t, models.ExecSucceeded, x.Status, x.CfgPath)
		if x.CfgPath == "live/prod/monitoring" {
			require.False(t, *x.HasChanges, "nothing to change, so no vote")
			continue
		}
		require.Equal(t, models.StepApplying, x.Step, x.CfgPath)
		full, err := models.ExecutionByID(ctx, db, x.ID) // the list leaves the outputs out
		require.NoError(t, err)
		require.Contains(t, full.ApplyOutput, "Apply complete!", x.CfgPath)
	}
	lock, err = models.MergeLockOf(ctx, db, demoRepo)
	require.NoError(t, err)
	require.Nil(t, lock, "the merge lock is released")

	// The device farm's one failure is on purpose, and says so.
	dirty := func() []models.Environment {
		envs, err := models.ListEnvironments(ctx, db, models.EnvironmentFilter{Pool: "device-farm"})
		require.NoError(t, err)
		return slices.DeleteFunc(envs, func(e models.Environment) bool { return e.Status != models.EnvDirty })
	}
	servertest.WaitFor(t, func() (bool, string) {
		envs := dirty()
		return len(envs) == 1, fmt.Sprintf("dirty devices: %v, want pixel-7", envs)
	})
	envs := dirty()
	require.Equal(t, "pixel-7", envs[0].Name())
	require.Contains(t, envs[0].CleanupOutput, "demo: the cleanup of pixel-7 fails on purpose")
	marker, err := models.ListLog(ctx, db, models.LogFilter{Event: "demo-environments-loaded", Limit: 1})
	require.NoError(t, err)
	require.Len(t, marker, 1)
	require.Contains(t, fmt.Sprint(marker[0].Detail["dirty_on_purpose"]), "fails on purpose")
	// The pool's operator is told, by email (the dev mailbox shows it), and
	// the log names whom.
	notice := s.Mail.Wait(t, 30*time.Second, func(m mailtest.Message) bool {
		return strings.Contains(m.Subject, "pixel-7") && slices.Contains(m.To, "olivia.operator@example.com")
	})
	require.Contains(t, notice.Subject, "is dirty")
	var notified []models.LogEntry
	servertest.WaitFor(t, func() (bool, string) {
		notified, err = models.ListLog(ctx, db, models.LogFilter{Event: pools.EventDirtyNotification, Limit: 1})
		require.NoError(t, err)
		return len(notified) == 1, "the dirty-environment notice is logged"
	})
	require.Equal(t, "olivia.operator@example.com", notified[0].Detail["emails"])

	// Every page of the area renders the demo, for the approver.
	client.signIn(t, demo.Approver)
	index := client.mustGet(t, "/infra")
	require.Contains(t, index, `data-testid="plan-chip" data-status="failed"`)
	require.Contains(t, index, `data-testid="pull-plan-error"`)
	client.mustGet(t, "/infra/runs")
	for _, r := range runs {
		page := client.mustGet(t, "/infra/runs/"+strconv.FormatInt(r.ID, 10))
		if r.ID == live.ID {
			require.Equal(t, len(xs), strings.Count(page, `data-testid="graph-node"`))
			require.Contains(t, page, `data-testid="graph-edge-account"`)
		}
		client.mustGet(t, "/infra/infra-live/pulls/"+strconv.Itoa(r.PRNumber))
	}
	for _, r := range []int64{byPR[41].ID, live.ID} {
		xs, err := models.ExecutionsOfRun(ctx, db, r)
		require.NoError(t, err)
		for _, x := range xs {
			require.Contains(t, client.mustGet(t, "/infra/executions/"+x.ExecutionID), infra.ExecutionTarget(x.ExecutionID), "its log entries")
		}
	}
	client.mustGet(t, "/infra/infra-live/pulls/46")
	pr, err := models.PullRequestByNumber(ctx, db, demoRepo, 45)
	require.NoError(t, err)
	plans, err := models.PlansOfPullRequest(ctx, db, demoRepo, 45, pr.HeadSHA)
	require.NoError(t, err)
	require.Len(t, plans, 3)
	for _, p := range plans {
		client.mustGet(t, "/infra/plans/"+strconv.FormatInt(p.ID, 10))
	}
}

const demoRepo = "infra-live"

// vote approves x as the demo approver from the dashboard.
func vote(t *testing.T, s *servertest.Server, x *models.Execution) {
	t.Helper()
	out, err := s.Infra.Vote(t.Context(), infra.VoteInput{ExecutionID: x.ExecutionID, Voter: demo.Approver, Decision: "approve", Via: approvals.ViaDashboard})
	require.NoError(t, err)
	require.True(t, out.Decided(), "one approval applies the plan")
}

// TestDemoWithoutTerraform: on a machine without terraform the demo says so
// and loads its rows only, the run in progress included, with a vote
// request in the mailbox.
func TestDemoWithoutTerraform(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := servertest.New(t, "GANTRY_DATA_DIR="+dir)
	ctx := t.Context()
	db := s.DB.Bun
	var logged bytes.Buffer
	_, err := demo.Base(ctx, db)
	require.NoError(t, err)
	noTerraform := func(name string) (string, error) {
		if name == "terraform" {
			return "", errors.New("not found")
		}
		return "/usr/bin/" + name, nil
	}
	loaded, err := demo.Infra(ctx, s.Infra, demo.InfraOptions{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logged, nil)), LookPath: noTerraform})
	require.NoError(t, err)
	require.True(t, loaded)
	require.Contains(t, logged.String(), "terraform not found on PATH, so the infrastructure demo is rows only")

	repos, err := models.ListRepositories(ctx, db)
	require.NoError(t, err)
	require.Len(t, repos, 1)
	require.Equal(t, "https://github.com/acme/infra-live.git", repos[0].URL)
	runs, err := models.ListRuns(ctx, db, models.RunFilter{})
	require.NoError(t, err)
	require.Len(t, runs, 3)
	var live *models.Run
	for i := range runs {
		if runs[i].Status == models.RunRunning {
			live = &runs[i]
		}
	}
	require.NotNil(t, live)
	lock, err := models.MergeLockOf(ctx, db, live.Repository)
	require.NoError(t, err)
	require.Equal(t, live.ID, lock.RunID, "the run in progress holds the merge lock")
	require.WithinDuration(t, *live.StartedAt, lock.LockedAt, time.Second, "it took the lock when it started, not when the demo loaded")
	// A finished run's page does not say the lock is its: it released it.
	viewer := newClient(t, s)
	viewer.signIn(t, demo.Approver)
	for _, r := range runs {
		if r.ID == live.ID {
			continue
		}
		page := viewer.mustGet(t, "/infra/runs/"+strconv.FormatInt(r.ID, 10))
		require.NotContains(t, page, "locked by #42", "run %d", r.ID)
		require.Contains(t, page, "released by this run", "run %d", r.ID)
	}
	xs, err := models.ExecutionsOfRun(ctx, db, live.ID)
	require.NoError(t, err)
	states := map[string]bool{}
	for _, x := range xs {
		states[x.Status+"/"+x.Step] = true
	}
	for _, want := range []string{"waiting/", "running/voting", "succeeded/planning", "succeeded/applying", "failed/applying", "aborted/"} {
		require.True(t, states[want], "an execution %s (have %v)", want, states)
	}
	// A step under way needs a job working it; without one the reconcile
	// sweep fails it, so the demo has none.
	require.False(t, states["running/planning"] || states["running/applying"], "no step under way without its job (have %v)", states)
	waiting, err := models.ExecutionsAwaitingVoter(ctx, db, demo.Approver)
	require.NoError(t, err)
	require.Len(t, waiting, 1)
	require.Equal(t, "live/prod/rds", waiting[0].CfgPath)
	m := s.Mail.Wait(t, 10*time.Second, func(m mailtest.Message) bool { return len(m.To) == 1 && m.To[0] == demo.Approver })
	link := regexp.MustCompile(`http://gantry\.test(/approvals/link/\S+)`).FindStringSubmatch(m.Text)
	require.NotNil(t, link, "the approver was sent a voting link:\n%s", m.Text)
	page, _ := newClient(t, s).get(t, link[1])
	require.Contains(t, page, "1 of 2 approvals")
}

// client is a browser's cookies and the CSRF token of the last page.
type client struct {
	*http.Client
	base string
}

func newClient(t *testing.T, s *servertest.Server) *client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &client{Client: &http.Client{Jar: jar}, base: s.URL}
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// get fetches path, which must answer 200, and returns the page and its
// CSRF token.
func (c *client) get(t *testing.T, path string) (string, string) {
	t.Helper()
	res, err := c.Get(c.base + path)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s:\n%s", path, body)
	csrf := ""
	if m := csrfField.FindSubmatch(body); m != nil {
		csrf = string(m[1])
	}
	return string(body), csrf
}

func (c *client) mustGet(t *testing.T, path string) string {
	t.Helper()
	page, _ := c.get(t, path)
	return page
}

func (c *client) post(t *testing.T, path string, form url.Values) string {
	t.Helper()
	res, err := c.PostForm(c.base+path, form)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Less(t, res.StatusCode, 400, "%s:\n%s", path, body)
	return string(body)
}

func (c *client) signIn(t *testing.T, email string) {
	t.Helper()
	_, csrf := c.get(t, "/login")
	c.post(t, "/login", url.Values{"_csrf": {csrf}, "email": {email}, "password": {demo.Password}})
}
