package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

func TestJobsPageRetriesAndCancels(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, "root@example.com", models.RoleAdmin)
	ctx := context.Background()
	require.NoError(t, b.queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		return tx.Enqueue(ctx, jobs.PruneSessionsArgs{}, nil)
	}))
	var id int64
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT id FROM river_job").Scan(&id))

	br := b.browser(t)
	br.login(t, "root@example.com")
	status, body, csrf := br.get(t, "/admin/jobs")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "available (1)")
	require.Contains(t, body, "prune_sessions")

	res, _ := br.post(t, "/admin/jobs/"+itoa(int(id))+"/cancel", url.Values{"_csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/admin/jobs", res.Header.Get("Location"), "no tab given: no empty ?state=")
	_, body, _ = br.get(t, "/admin/jobs?state=cancelled")
	require.Contains(t, body, "cancelled (1)")
	require.Contains(t, body, `data-testid="job-retry"`)

	// The only job is cancelled: the page opens on that tab, not on an
	// empty "available (0)".
	_, body, _ = br.get(t, "/admin/jobs")
	require.Regexp(t, `aria-current="page">cancelled \(1\)`, body)
	require.Contains(t, body, `/admin/jobs/`+itoa(int(id))+`/retry?state=cancelled"`, "the form carries the tab it is on")

	res, _ = br.post(t, "/admin/jobs/"+itoa(int(id))+"/retry?state=cancelled", url.Values{"_csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/admin/jobs?state=cancelled", res.Header.Get("Location"), "back to the tab the retry was made on")
	var state string
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT state FROM river_job WHERE id = $1", id).Scan(&state))
	require.Equal(t, "available", state)

	res, _ = br.post(t, "/admin/jobs/424242/retry", url.Values{"_csrf": {csrf}})
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	status, _, _ = br.get(t, "/admin/jobs?state=sleeping")
	require.Equal(t, http.StatusBadRequest, status)

	entries, err := models.ListLog(ctx, b.db.Bun, models.LogFilter{Target: "job:" + itoa(int(id))})
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.Equal(t, "job-retried", entries[0].Event)
	require.Equal(t, "job-cancelled", entries[1].Event)
}

func TestRiverUIIsMountedForAdmins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, "root@example.com", models.RoleAdmin)
	b.user(t, "ops@example.com", models.RoleOperator)
	ctx := context.Background()
	require.NoError(t, b.queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		return tx.Enqueue(ctx, jobs.PruneSessionsArgs{}, nil)
	}))

	ops := b.browser(t)
	ops.login(t, "ops@example.com")
	status, _, _ := ops.get(t, "/admin/river")
	require.Equal(t, http.StatusForbidden, status)

	br := b.browser(t)
	br.login(t, "root@example.com")
	req, _ := http.NewRequest("GET", b.srv.URL+"/admin/river/jobs", nil)
	req.Header.Set("Accept", "text/html") // River UI serves its page only to browsers
	res, err := br.Do(req)
	require.NoError(t, err)
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(page), "<title>River</title>")
	status, body, _ := br.get(t, "/admin/river/api/jobs?state=available")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "prune_sessions", "River UI reads the jobs through River v0.41")

	var id string
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT id::text FROM river_job").Scan(&id))
	req, _ = http.NewRequest("POST", b.srv.URL+"/admin/river/api/jobs/cancel", strings.NewReader(`{"ids":["`+id+`"]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin") // what the browser sends for River UI's own fetches
	res, err = br.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	var state string
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT state FROM river_job").Scan(&state))
	require.Equal(t, "cancelled", state)

	logged, err := models.ListLog(ctx, b.db.Bun, models.LogFilter{Event: "river-ui-action"})
	require.NoError(t, err)
	require.Len(t, logged, 1)
	require.Equal(t, "/api/jobs/cancel", logged[0].Detail["path"])
	require.Equal(t, "user:root@example.com", logged[0].Actor)
}

// TestRetryingAJobWhoseWorkEndedSaysSo: the apply job of a failed execution
// would, run again, do nothing at all (the workers act only on an execution
// still applying). Retrying it from /admin/jobs says so instead of quietly
// queueing a no-op; the job of an execution still applying is retried.
func TestRetryingAJobWhoseWorkEndedSaysSo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, "root@example.com", models.RoleAdmin)
	ctx := t.Context()
	db := b.db.Bun
	b.syncRepositories(t, "live")
	run := b.insertRun(t, models.RunFailed)
	failed := newExecution(run, "run-3-f00d-prod-vpc-1", "vpc", models.ExecFailed, models.StepApplying)
	applying := newExecution(run, "run-3-f00d-prod-rds-2", "rds", models.ExecRunning, models.StepApplying)
	require.NoError(t, models.InsertExecutions(ctx, db, []*models.Execution{failed, applying}))
	jobOf := func(x *models.Execution) int64 {
		var id int64
		require.NoError(t, b.queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			var err error
			id, err = tx.EnqueueJob(ctx, jobs.ApplyExecutionArgs{ExecutionID: x.ID}, nil)
			return err
		}))
		_, err := b.db.Pool.Exec(ctx, "UPDATE river_job SET state = 'discarded', finalized_at = now() WHERE id = $1", id)
		require.NoError(t, err)
		return id
	}
	failedJob, applyingJob := jobOf(failed), jobOf(applying)

	br := b.browser(t)
	br.login(t, "root@example.com")
	_, _, csrf := br.get(t, "/admin/jobs?state=discarded")
	res, _ := br.post(t, "/admin/jobs/"+itoa(int(failedJob))+"/retry?state=discarded", url.Values{"_csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, page, _ := br.get(t, res.Header.Get("Location"))
	require.Contains(t, page, "Not retried: execution run-3-f00d-prod-vpc-1 failed, so its apply job would do nothing if run again")
	var state string
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT state FROM river_job WHERE id = $1", failedJob).Scan(&state))
	require.Equal(t, "discarded", state, "left as it was")

	res, _ = br.post(t, "/admin/jobs/"+itoa(int(applyingJob))+"/retry?state=discarded", url.Values{"_csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT state FROM river_job WHERE id = $1", applyingJob).Scan(&state))
	require.Equal(t, "available", state, "an execution still applying gets its job again")
}
