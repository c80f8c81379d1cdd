package pipelines

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// SyncResult says what a sync changed.
type SyncResult struct {
	Registered []string
	Changed    []string
	Removed    []string
}

// Sync makes the pipelines those of f. A changed pipeline takes effect for
// the revisions in flight at once (the normal case, not an error): each
// kind of step it introduces is recorded with the latest revision
// registered, so that the step is never run first deep in the pipeline
// for a revision already past it (docs/areas/pipelines.md). A removed
// pipeline keeps its history and stops moving.
func (s *Service) Sync(ctx context.Context, f *gantryfile.File, actor string) (SyncResult, error) {
	var res SyncResult
	defs := gantryfile.SectionOf[[]gantryfile.Pipeline](f, gantryfile.PipelinesKey)
	err := s.inTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		res = SyncResult{}
		if err := models.LockConfigSync(ctx, tx); err != nil {
			return err
		}
		before, err := models.ListPipelines(ctx, tx)
		if err != nil {
			return err
		}
		keep := make([]string, 0, len(defs))
		for _, def := range defs {
			keep = append(keep, def.Name)
			if err := s.syncOne(ctx, tx, def, before, actor, &res); err != nil {
				return err
			}
		}
		removed, err := models.RemovePipelinesExcept(ctx, tx, keep)
		if err != nil {
			return err
		}
		for _, name := range removed {
			res.Removed = append(res.Removed, name)
			if err := models.AppendLog(ctx, tx, &models.LogEntry{TargetID: name, Event: EventPipelineRemoved, Actor: actor}); err != nil {
				return err
			}
		}
		return nil
	})
	return res, err
}

func (s *Service) syncOne(ctx context.Context, tx jobs.Tx, def gantryfile.Pipeline, before []models.Pipeline, actor string, res *SyncResult) error {
	shape, err := def.Shape()
	if err != nil {
		return fmt.Errorf("pipeline %s: %w", def.Name, err)
	}
	raw, err := json.Marshal(def)
	if err != nil {
		return err
	}
	row := &models.Pipeline{Name: def.Name, Definition: raw, Events: shape.Events()}
	i := slices.IndexFunc(before, func(b models.Pipeline) bool { return b.Name == def.Name })
	if i >= 0 && string(before[i].Definition) == string(raw) {
		return nil
	}
	if err := models.UpsertPipeline(ctx, tx, row); err != nil {
		return err
	}
	if i < 0 {
		res.Registered = append(res.Registered, def.Name)
		return models.AppendLog(ctx, tx, &models.LogEntry{TargetID: def.Name, Event: EventPipelineRegistered, Actor: actor,
			Detail: map[string]any{"stages": len(def.Stages)}})
	}
	// New kinds of step, introduced now: the revisions registered so far
	// take them only where they have not yet passed what follows them.
	var introduced []string
	for _, e := range row.Events {
		if !slices.Contains(before[i].Events, e) {
			introduced = append(introduced, e)
		}
	}
	latest, err := models.LatestRevisionID(ctx, tx, def.Name)
	if err != nil {
		return err
	}
	if latest > 0 && len(introduced) > 0 {
		if err := models.IntroduceSteps(ctx, tx, def.Name, introduced, latest); err != nil {
			return err
		}
	}
	res.Changed = append(res.Changed, def.Name)
	if err := models.AppendLog(ctx, tx, &models.LogEntry{TargetID: def.Name, Event: EventPipelineChanged, Actor: actor,
		Detail: map[string]any{"introduced": introduced, "revision_after": latest}}); err != nil {
		return err
	}
	// The revisions in flight move on under the new shape.
	return progressTx(ctx, tx, def.Name)
}
