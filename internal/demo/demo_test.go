package demo_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/demo"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// TestLoad loads the demo twice into a real Gantry: the second time adds
// nothing, and every infrastructure page has something real to show.
func TestLoad(t *testing.T) {
	t.Parallel()
	s := servertest.New(t)
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
	runs, err := models.ListRuns(ctx, db, models.RunFilter{})
	require.NoError(t, err)
	require.Len(t, runs, 3)
	statuses := map[string]*models.Run{}
	for i := range runs {
		statuses[runs[i].Status] = &runs[i]
	}
	require.Contains(t, statuses, models.RunFailed)
	require.Contains(t, statuses[models.RunFailed].Error, "terragrunt.hcl:2", "the scan failure names file and line")
	require.Contains(t, statuses, models.RunSucceeded)
	live := statuses[models.RunRunning]
	require.NotNil(t, live)
	lock, err := models.MergeLockOf(ctx, db, live.Repository)
	require.NoError(t, err)
	require.Equal(t, live.ID, lock.RunID, "the run in progress holds the merge lock")

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

	// Every page of the area renders the demo, for the approver.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Jar: jar}
	get := func(path string) string {
		res, err := client.Get(s.URL + path)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode, "%s:\n%s", path, body)
		return string(body)
	}
	page := get(link[1])
	require.Contains(t, page, "You are voting as <strong>"+demo.Approver)
	require.Contains(t, page, "1 of 2 approvals")
	csrf := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindStringSubmatch(get("/login"))
	require.NotNil(t, csrf)
	res, err := client.PostForm(s.URL+"/login", url.Values{"_csrf": {csrf[1]}, "email": {demo.Approver}, "password": {demo.Password}})
	require.NoError(t, err)
	res.Body.Close()

	index := get("/infra")
	require.Contains(t, index, "locked by #42")
	require.Contains(t, index, `data-testid="plan-chip" data-status="failed"`)
	require.Contains(t, index, `data-testid="pull-plan-error"`)
	require.Contains(t, get("/approvals"), `data-execution="`+waiting[0].ExecutionID+`"`)
	get("/infra/runs")
	for _, r := range runs {
		page := get("/infra/runs/" + strconv.FormatInt(r.ID, 10))
		if r.ID == live.ID {
			require.Equal(t, len(xs), strings.Count(page, `data-testid="graph-node"`))
			require.Contains(t, page, `data-testid="graph-edge-account"`)
		}
		get("/infra/infra-live/pulls/" + strconv.Itoa(r.PRNumber))
	}
	for _, x := range xs {
		page := get("/infra/executions/" + x.ExecutionID)
		if x.Status != models.ExecWaiting {
			require.Contains(t, page, infra.ExecutionTarget(x.ExecutionID), "its log entries")
		}
	}
	get("/infra/infra-live/pulls/45")
	get("/infra/infra-live/pulls/46")
	plans, err := models.PlansOfPullRequest(ctx, db, "infra-live", 45, runsHead(t, s, 45))
	require.NoError(t, err)
	require.Len(t, plans, 3)
	for _, p := range plans {
		get("/infra/plans/" + strconv.FormatInt(p.ID, 10))
	}
}

func runsHead(t *testing.T, s *servertest.Server, number int) string {
	t.Helper()
	pr, err := models.PullRequestByNumber(t.Context(), s.DB.Bun, "infra-live", number)
	require.NoError(t, err)
	return pr.HeadSHA
}
