package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/models"
)

var pipeline = models.Granularity{Started: "pipeline-started", Succeeded: "pipeline-finished-successfully", Failed: "pipeline-failed"}
var stage = models.Granularity{Started: "stage-started", Succeeded: "stage-finished-successfully", Failed: "stage-failed"}

func appendAll(t *testing.T, db *models.DB, entries ...models.LogEntry) {
	t.Helper()
	for i := range entries {
		require.NoError(t, models.AppendLog(context.Background(), db.Bun, &entries[i]))
	}
}

func entry(dep, target, rev, event string) models.LogEntry {
	return models.LogEntry{DeploymentID: dep, TargetID: target, Revision: rev, Event: event, Actor: "test"}
}

func TestDeploymentLogRefusesChange(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	appendAll(t, db, entry("d1", "p1", "v1", "pipeline-started"))

	for name, stmt := range map[string]string{
		"update":   "UPDATE deployment_log SET event = 'x'",
		"delete":   "DELETE FROM deployment_log",
		"truncate": "TRUNCATE deployment_log",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := db.Bun.ExecContext(ctx, stmt)
			require.ErrorContains(t, err, "append-only")
		})
	}
	n, err := db.Bun.NewSelect().Model((*models.LogEntry)(nil)).Count(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}

func TestDeploymentLogAppendValidates(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	err := models.AppendLog(context.Background(), db.Bun, &models.LogEntry{TargetID: "p1", Event: "x"})
	require.ErrorContains(t, err, "actor")
}

func TestDeploymentLogQuestions(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	appendAll(t, db,
		entry("d1", "p1", "v1", "pipeline-started"),
		entry("d1", "p1/build", "v1", "stage-started"),
		entry("d1", "p1/build", "v1", "stage-finished-successfully"),
		entry("d1", "p1", "v1", "pipeline-finished-successfully"),
		entry("d2", "p1", "v2", "pipeline-started"),
		entry("d2", "p1/build", "v2", "stage-started"),
		entry("d2", "p1/build", "v2", "stage-failed"),
		entry("d2", "p1", "v2", "pipeline-failed"),
		entry("d3", "p1", "v3", "pipeline-started"),
		entry("d4", "p1", "v4", "pipeline-started"),
		entry("d4", "p1/build", "v4", "stage-started"),
		entry("d3", "p1/build", "v3", "stage-started"),
		entry("d3", "p1/build", "v3", "stage-finished-successfully"),
		entry("x", "p2", "v9", "pipeline-started"),
	)

	t.Run("latest succeeded at each granularity", func(t *testing.T) {
		e, err := models.LatestSucceeded(ctx, db.Bun, "p1", pipeline)
		require.NoError(t, err)
		require.Equal(t, "v1", e.Revision)
		e, err = models.LatestSucceeded(ctx, db.Bun, "p1/build", stage)
		require.NoError(t, err)
		require.Equal(t, "v3", e.Revision, "v3 finished the build stage after v1")
	})
	t.Run("latest failed", func(t *testing.T) {
		e, err := models.LatestFailed(ctx, db.Bun, "p1", pipeline)
		require.NoError(t, err)
		require.Equal(t, "v2", e.Revision)
		_, err = models.LatestFailed(ctx, db.Bun, "p2", pipeline)
		require.ErrorIs(t, err, models.ErrNotFound)
	})
	t.Run("in progress", func(t *testing.T) {
		got, err := models.InProgress(ctx, db.Bun, "p1", pipeline)
		require.NoError(t, err)
		require.Equal(t, []string{"v3", "v4"}, revisions(got))
		got, err = models.InProgress(ctx, db.Bun, "p1/build", stage)
		require.NoError(t, err)
		require.Equal(t, []string{"v4"}, revisions(got))
	})
	t.Run("a revision restarted after it finished is in progress again", func(t *testing.T) {
		db := testdb.New(t)
		appendAll(t, db,
			entry("d1", "h1", "v1", "host-started"),
			entry("d1", "h1", "v1", "host-finished"),
			entry("d9", "h1", "v1", "host-started"),
		)
		got, err := models.InProgress(ctx, db.Bun, "h1", models.Granularity{Started: "host-started", Succeeded: "host-finished", Failed: "host-failed"})
		require.NoError(t, err)
		require.Equal(t, []string{"v1"}, revisions(got))
		require.Equal(t, "d9", got[0].DeploymentID)
	})
}

func TestListLogFiltersAndPages(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	for i := 0; i < 7; i++ {
		e := entry("d1", "p1", "v1", "step")
		if i%2 == 0 {
			e.Actor = "user:ada@example.com"
		}
		appendAll(t, db, e)
	}
	appendAll(t, db, entry("d2", "p2", "v2", "other"))

	page1, err := models.ListLog(ctx, db.Bun, models.LogFilter{Target: "p1", Limit: 3})
	require.NoError(t, err)
	require.Len(t, page1, 3)
	require.Greater(t, page1[0].ID, page1[1].ID, "newest first")
	page2, err := models.ListLog(ctx, db.Bun, models.LogFilter{Target: "p1", Limit: 3, BeforeID: page1[2].ID})
	require.NoError(t, err)
	require.Len(t, page2, 3)
	require.Less(t, page2[0].ID, page1[2].ID)

	byActor, err := models.ListLog(ctx, db.Bun, models.LogFilter{Actor: "user:ada@example.com"})
	require.NoError(t, err)
	require.Len(t, byActor, 4)

	byEvent, err := models.ListLog(ctx, db.Bun, models.LogFilter{Event: "other", Revision: "v2"})
	require.NoError(t, err)
	require.Len(t, byEvent, 1)

	none, err := models.ListLog(ctx, db.Bun, models.LogFilter{Since: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, none)

	tail, err := models.ListLog(ctx, db.Bun, models.LogFilter{AfterID: page1[0].ID})
	require.NoError(t, err)
	require.Len(t, tail, 1, "only the p2 entry is newer")
	require.Equal(t, "p2", tail[0].TargetID)
}

// TestListLogFilterMatchesAsPeopleType covers the filters a person types
// on /log: part of an event name, and a person's email whichever way their
// entries were written (user:<email> for sign-ins, the bare email for votes,
// token:<id>:<email> for their tokens).
func TestListLogFilterMatchesAsPeopleType(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	withActor := func(e models.LogEntry, actor string) models.LogEntry { e.Actor = actor; return e }
	appendAll(t, db,
		withActor(entry("", "user:1", "", "user-logged-in"), "user:ada@example.com"),
		withActor(entry("live#7", "execution:3", "abc", "execution-voted"), "ada@example.com"),
		withActor(entry("", "p-web", "v1", "build-registered"), "token:4:ada@example.com"),
		withActor(entry("live#7", "execution:3", "abc", "execution-approved"), "bob@example.com"),
		withActor(entry("live#7", "run:1", "abc", "run-started"), "gantry"),
		withActor(entry("", "token:9", "", "token-created"), "token:9:notada@example.com"),
	)
	events := func(f models.LogFilter) []string {
		t.Helper()
		entries, err := models.ListLog(ctx, db.Bun, f)
		require.NoError(t, err)
		out := make([]string, len(entries))
		for i, e := range entries {
			out[i] = e.Event
		}
		return out
	}

	t.Run("an email finds the person's sign-ins, votes and tokens", func(t *testing.T) {
		want := []string{"build-registered", "execution-voted", "user-logged-in"}
		require.Equal(t, want, events(models.LogFilter{Actor: "ada@example.com"}))
		require.Equal(t, want, events(models.LogFilter{Actor: "user:ada@example.com"}))
		require.Equal(t, want, events(models.LogFilter{Actor: " ada@example.com "}))
	})
	t.Run("other actors match exactly", func(t *testing.T) {
		require.Equal(t, []string{"run-started"}, events(models.LogFilter{Actor: "gantry"}))
		require.Equal(t, []string{"build-registered"}, events(models.LogFilter{Actor: "token:4:ada@example.com"}))
		require.Empty(t, events(models.LogFilter{Actor: "gant"}))
	})
	t.Run("part of an event name finds every event containing it", func(t *testing.T) {
		require.Equal(t, []string{"execution-approved", "execution-voted"}, events(models.LogFilter{Event: "execution"}))
		require.Equal(t, []string{"execution-approved"}, events(models.LogFilter{Event: "Approved"}))
		require.Equal(t, []string{"run-started"}, events(models.LogFilter{Event: "run-started"}))
		require.Equal(t, []string{"execution-voted"}, events(models.LogFilter{Event: "execution", Actor: "ada@example.com"}), "filters combine")
	})
}

func revisions(entries []models.LogEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Revision
	}
	return out
}

// TestLogFilterMatchesAgreesWithListLog checks the in-memory matcher the live
// log uses against the SQL of ListLog, filter by filter, over the same entries.
func TestLogFilterMatchesAgreesWithListLog(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	entries := []models.LogEntry{
		{DeploymentID: "d1", TargetID: "p-web", Revision: "v1", Event: "pipeline-started", Actor: "user:ada@example.com"},
		{DeploymentID: "d1", TargetID: "p-web", Revision: "v1", Event: "Execution-Started", Actor: "ada@example.com"},
		{DeploymentID: "d2", TargetID: "p-api", Revision: "v2", Event: "execution-failed", Actor: "token:7:ada@example.com"},
		{DeploymentID: "d2", TargetID: "p-api", Revision: "v2", Event: "stage-finished-successfully", Actor: "token:2:ci@example.com"},
		{DeploymentID: "", TargetID: "p-web ", Revision: "", Event: "x", Actor: "gantry"},
		{DeploymentID: "d3", TargetID: "p-api", Revision: "V2", Event: "pipeline-failed", Actor: "cli:root"},
		{DeploymentID: "d3", TargetID: "P-API", Revision: "v3", Event: "vote", Actor: "token:9:bob@example.com:x"},
		{DeploymentID: "d3", TargetID: "p-api", Revision: "v3", Event: "vote", Actor: "user:bob@example.com"},
		{DeploymentID: "d3", TargetID: "p-api", Revision: "v3", Event: "vote", Actor: "tokenx:1:bob@example.com"},
	}
	appendAll(t, db, entries...)
	all, err := models.ListLog(ctx, db.Bun, models.LogFilter{Limit: models.MaxLogPage})
	require.NoError(t, err)
	require.Len(t, all, len(entries))
	// Times the entries straddle: between the third and fourth, and later.
	mid := all[len(all)-4].CreatedAt.Add(time.Nanosecond * 500) // finer than PostgreSQL keeps
	first, last := all[len(all)-1], all[0]

	filters := map[string]models.LogFilter{
		"none":                     {},
		"target":                   {Target: "p-api"},
		"target exact":             {Target: "p-web"},
		"target with space":        {Target: "p-web "},
		"event part":               {Event: "execution"},
		"event case and spaces":    {Event: "  STARTED "},
		"event spaces only":        {Event: "   "},
		"event none":               {Event: "nothing"},
		"revision":                 {Revision: "v2"},
		"revision empty":           {Revision: ""},
		"deployment":               {Deployment: "d3"},
		"actor email":              {Actor: "ada@example.com"},
		"actor user form":          {Actor: " user:ada@example.com "},
		"actor bob":                {Actor: "bob@example.com"},
		"actor token exact":        {Actor: "token:2:ci@example.com"},
		"actor other":              {Actor: "cli:root"},
		"actor gantry":             {Actor: "gantry"},
		"actor blank":              {Actor: "  "},
		"since":                    {Since: mid},
		"until":                    {Until: mid},
		"since first":              {Since: first.CreatedAt},
		"until last":               {Until: last.CreatedAt},
		"after":                    {AfterID: first.ID + 2},
		"before":                   {BeforeID: first.ID + 2},
		"after and before":         {AfterID: first.ID, BeforeID: last.ID},
		"combined":                 {Target: "p-api", Event: "vote", Actor: "bob@example.com", Revision: "v3"},
		"combined with deployment": {Deployment: "d2", Actor: "ada@example.com", Event: "fail"},
	}
	for name, f := range filters {
		t.Run(name, func(t *testing.T) {
			f.Limit = models.MaxLogPage
			fromSQL, err := models.ListLog(ctx, db.Bun, f)
			require.NoError(t, err)
			want := map[int64]bool{}
			for _, e := range fromSQL {
				want[e.ID] = true
			}
			for _, e := range all {
				require.Equal(t, want[e.ID], f.Matches(&e), "entry %d (%s %s %s %s %s)", e.ID, e.TargetID, e.Event, e.Revision, e.Actor, e.DeploymentID)
			}
		})
	}
}
