package pipelines_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/models"
)

// TestManyStepsAtOnceAllCompleteOnceWithoutTheSweep registers revisions
// together on a wide pipeline of bookkeeping steps, so that completions
// stream in while progression rounds run: every revision must finish with
// the sweep off (no append's wake-up is lost), and the log must hold every
// step of every revision exactly once.
func TestManyStepsAtOnceAllCompleteOnceWithoutTheSweep(t *testing.T) {
	t.Parallel()
	b := setup(t, true) // workers without the periodic sweep
	def := gantryfile.Pipeline{Name: "wide", Stages: []gantryfile.PipelineStage{
		{Name: "one"}, {Name: "two", After: []string{"one"}},
	}}
	for s := range def.Stages {
		for g := range 4 {
			hg := gantryfile.HostGroup{Name: fmt.Sprintf("g%d", g)}
			for h := range 15 {
				hg.Hosts = append(hg.Hosts, fmt.Sprintf("h%d", h))
			}
			def.Stages[s].HostGroups = append(def.Stages[s].HostGroups, hg)
		}
	}
	// Hosts without commands (gantry.yaml asks for a step): pure bookkeeping.
	raw, err := json.Marshal(def)
	require.NoError(t, err)
	shape, err := def.Shape()
	require.NoError(t, err)
	require.NoError(t, models.UpsertPipeline(b.ctx, b.DB.Bun, &models.Pipeline{Name: "wide", Definition: raw, Events: shape.Events()}))

	revs := []string{"a", "b", "c", "d"}
	for _, r := range revs {
		_, _, err := b.svc.Register(b.ctx, "wide", r, "ci")
		require.NoError(t, err)
	}
	for _, r := range revs {
		b.WaitRevisionFinished(t, "wide", r)
	}
	steps := len(b.planSteps(t, "wide"))
	for _, r := range revs {
		var rows []struct {
			Event, TargetID string
			N               int
		}
		require.NoError(t, b.DB.Bun.NewSelect().Model((*models.LogEntry)(nil)).ColumnExpr("event, target_id, count(*) AS n").
			Where("deployment_id = ?", "pipeline:wide@"+r).GroupExpr("event, target_id").Scan(b.ctx, &rows))
		require.Len(t, rows, steps, "revision %s logged every step", r)
		for _, row := range rows {
			require.Equal(t, 1, row.N, "%s on %s logged %d times for %s", row.Event, row.TargetID, row.N, r)
		}
	}
}

// planSteps are every step of the pipeline, as the revision page lists them.
func (b *bundle) planSteps(t *testing.T, pipeline string) []string {
	t.Helper()
	revs, _, err := b.svc.Revisions(b.ctx, models.RevisionFilter{Pipeline: pipeline, Limit: 1})
	require.NoError(t, err)
	d, err := b.svc.Revision(b.ctx, pipeline, revs[0].Revision)
	require.NoError(t, err)
	out := make([]string, len(d.Steps))
	for i, s := range d.Steps {
		out[i] = s.Step.String()
	}
	return out
}
