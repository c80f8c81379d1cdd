package pipelines_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/progression"
	"github.com/gantryhq/gantry/models"
)

// A progression round writes the bookkeeping steps itself, iterating in
// its own transaction until only work is left. A round that fails part
// way (here the database refuses the third level of markers, after two
// were written in the same transaction) leaves nothing behind; the next
// round writes them all; rounds running side by side, or delivered again,
// write none twice; and the revision then goes through with each step in
// the log exactly once.
func TestInlineStepsAreNeitherLostNorWrittenTwiceWhenARoundFails(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	mark := b.mark(t)
	b.Sync(t, fmt.Sprintf(`pipelines:
  - name: inline
    stages:
      - name: beta
        host_groups:
          - {name: east, hosts: [e1, e2]}
          - {name: west, hosts: [w1]}
        steps:
          - {name: deployed, run: [%q, deployed, "{host}", "{revision}"]}
      - name: prod
        after: [beta]
`, mark))
	// The fault: while a row is in inline_fault, appending host-started
	// fails, as a worker dying mid-round would end the transaction.
	_, err := b.DB.Bun.ExecContext(b.ctx, `CREATE TABLE inline_fault (on_event text);
		CREATE FUNCTION inline_fault() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF EXISTS (SELECT 1 FROM inline_fault WHERE on_event = NEW.event) THEN
				RAISE EXCEPTION 'the round dies at %', NEW.event;
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER inline_fault BEFORE INSERT ON deployment_log FOR EACH ROW EXECUTE FUNCTION inline_fault();
		INSERT INTO inline_fault VALUES ('host-started')`)
	require.NoError(t, err)

	_, _, err = b.svc.Register(b.ctx, "inline", "v1", "ci")
	require.NoError(t, err)
	entries := func(rev string) map[string]int {
		var rows []struct {
			Event, TargetID string
			N               int
		}
		require.NoError(t, b.DB.Bun.NewSelect().Model((*models.LogEntry)(nil)).ColumnExpr("event, target_id, count(*) AS n").
			Where("deployment_id = ?", "pipeline:inline@"+rev).GroupExpr("event, target_id").Scan(b.ctx, &rows))
		out := map[string]int{}
		for _, r := range rows {
			out[r.Event+"@"+r.TargetID] = r.N
		}
		return out
	}
	steps := func(rev string) map[string]string {
		r, err := models.RevisionByName(b.ctx, b.DB.Bun, "inline", rev)
		require.NoError(t, err)
		ss, err := models.StepsOf(b.ctx, b.DB.Bun, r.ID)
		require.NoError(t, err)
		out := map[string]string{}
		for _, s := range ss {
			out[s.Event+"@"+s.Target] = s.Status
		}
		return out
	}

	err = b.svc.Progress(b.ctx, "inline", nil)
	require.ErrorContains(t, err, "the round dies at host-started")
	require.Equal(t, map[string]int{"pipeline-started@inline": 1}, entries("v1"), "the failed round wrote nothing to the log")
	require.Empty(t, steps("v1"), "nor any step's record")

	_, err = b.DB.Bun.ExecContext(b.ctx, `DELETE FROM inline_fault`)
	require.NoError(t, err)
	require.NoError(t, b.svc.Progress(b.ctx, "inline", nil))
	wantInline := map[string]int{
		"pipeline-started@inline": 1, "stage-started@inline/beta": 1,
		"host-group-started@inline/beta/east": 1, "host-group-started@inline/beta/west": 1,
		"host-started@inline/beta/east/e1": 1, "host-started@inline/beta/east/e2": 1, "host-started@inline/beta/west/w1": 1,
	}
	require.Equal(t, wantInline, entries("v1"), "the next round wrote every marker up to the commands, once")
	st := steps("v1")
	require.Equal(t, models.StepDone, st["host-started@inline/beta/west/w1"])
	require.Equal(t, models.StepRunning, st["host-deployed@inline/beta/west/w1"], "the commands wait for their jobs")

	// A second revision, its rounds run side by side, and again after.
	_, _, err = b.svc.Register(b.ctx, "inline", "v2", "ci")
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = b.svc.Progress(b.ctx, "inline", nil) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, b.svc.Progress(b.ctx, "inline", nil))
	require.Equal(t, wantInline, entries("v1"))
	wantV2 := map[string]int{}
	for k := range wantInline {
		wantV2[k] = 1
	}
	require.Equal(t, wantV2, entries("v2"), "rounds side by side wrote each marker once")

	// The workers take it from there: each step once, in the log and on
	// the hosts.
	b.StartWorkers(t)
	for _, rev := range []string{"v1", "v2"} {
		b.WaitRevisionFinished(t, "inline", rev)
		got := entries(rev)
		require.Len(t, got, len(b.planSteps(t, "inline")), "revision %s logged every step", rev)
		for k, n := range got {
			require.Equal(t, 1, n, "%s logged %d times for %s", k, n, rev)
		}
		for _, h := range []string{"e1", "e2", "w1"} {
			require.Equal(t, 1, b.count(t, "deployed:"+h+":"+rev))
		}
	}
}

// The engine's properties hold for the steps a round writes itself: in
// one round that takes three revisions through a pipeline of bookkeeping
// only, a fan-in stage starts after both stages before it finished, a
// host group finishes after its hosts, and a stage that is a batch holds
// one revision at a time (the log's order is the order of the writes).
func TestInlineStepsKeepFanInAndBatches(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	hosts := gantryfile.HostGroup{Name: "g", Hosts: []string{"h1", "h2", "h3"}}
	def := gantryfile.Pipeline{Name: "order", Stages: []gantryfile.PipelineStage{
		{Name: "a", HostGroups: []gantryfile.HostGroup{hosts}},
		{Name: "b"},
		{Name: "c", After: []string{"a", "b"}, HostGroups: []gantryfile.HostGroup{hosts}, BatchSpec: &progression.BatchSpec{}},
	}}
	raw, err := json.Marshal(def)
	require.NoError(t, err)
	shape, err := def.Shape()
	require.NoError(t, err)
	require.NoError(t, models.UpsertPipeline(b.ctx, b.DB.Bun, &models.Pipeline{Name: "order", Definition: raw, Events: shape.Events()}))
	revs := []string{"r1", "r2", "r3"}
	for _, r := range revs {
		_, _, err := b.svc.Register(b.ctx, "order", r, "ci")
		require.NoError(t, err)
	}
	require.NoError(t, b.svc.Progress(b.ctx, "order", nil))

	var entries []models.LogEntry
	require.NoError(t, b.DB.Bun.NewSelect().Model(&entries).Where("starts_with(deployment_id, 'pipeline:order@')").OrderExpr("id").Scan(b.ctx))
	at := map[string]int{} // "rev event@target" → position in the log
	for i, e := range entries {
		at[e.Revision+" "+e.Event+"@"+e.TargetID] = i
	}
	pos := func(rev, step string) int {
		i, ok := at[rev+" "+step]
		require.True(t, ok, "%s has %s in the log", rev, step)
		return i
	}
	for _, r := range revs {
		require.Less(t, pos(r, "stage-finished-successfully@order/a"), pos(r, "stage-started@order/c"))
		require.Less(t, pos(r, "stage-finished-successfully@order/b"), pos(r, "stage-started@order/c"))
		for _, h := range hosts.Hosts {
			require.Less(t, pos(r, "host-finished-successfully@order/c/g/"+h), pos(r, "host-group-finished-successfully@order/c/g"))
		}
		require.Less(t, pos(r, "stage-finished-successfully@order/c"), pos(r, "pipeline-finished-successfully@order"))
		rev, err := models.RevisionByName(b.ctx, b.DB.Bun, "order", r)
		require.NoError(t, err)
		require.Equal(t, models.RevisionFinished, rev.Status)
	}
	for i := 1; i < len(revs); i++ {
		require.Less(t, pos(revs[i-1], "stage-finished-successfully@order/c"), pos(revs[i], "stage-started@order/c"),
			"%s enters the batch c after %s left it, oldest first", revs[i], revs[i-1])
	}
	require.Len(t, entries, len(revs)*len(b.planSteps(t, "order")), "each step once")
}
