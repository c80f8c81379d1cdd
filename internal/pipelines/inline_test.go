package pipelines_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

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
