package pipelines

import (
	"context"
	"errors"
	"slices"

	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/progression"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// errNotCaughtUp rolls back a job's completion when an append arrived.
var errNotCaughtUp = errors.New("an append arrived during the round")

// Progress runs progression rounds for pipeline until a round read every
// append made before it ended. Each append leaves a wake-up row in its
// transaction, and inserts a progression job, which is dropped as a
// duplicate while this one runs (unique per pipeline). So the last check
// completes this job first (complete) and then looks for wake-ups, in one
// transaction: an append whose job insert was dropped holds this job's row
// (River's insert locks the duplicate) until it commits, so its wake-up is
// seen; one that inserts later finds this job completed and starts another.
func (s *Service) Progress(ctx context.Context, pipeline string, complete func(ctx context.Context, tx jobs.Tx) error) error {
	// No bound on the rounds: appends that found this job running count on
	// it to read them. Under a steady stream of completions it runs on,
	// each round taking all that arrived during the one before.
	for ctx.Err() == nil {
		if err := models.TakeWakeups(ctx, s.Queue.DB(), pipeline); err != nil {
			return err
		}
		if err := s.round(ctx, pipeline); err != nil {
			return err
		}
		err := s.inTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			if complete != nil {
				if err := complete(ctx, tx); err != nil {
					return err
				}
			}
			more, err := models.HasWakeups(ctx, tx, pipeline)
			if err == nil && more {
				return errNotCaughtUp
			}
			return err
		})
		if !errors.Is(err, errNotCaughtUp) {
			return err
		}
	}
	return ctx.Err()
}

// round is the seed's loop for every revision in flight, in one
// transaction: compute the frontier and the doable steps; write the
// doable bookkeeping steps (markers: doing them is writing them) to the
// log at once and compute again, until only steps that do work are
// doable; then start each of those (its record and its `do` job). The
// steps that do work run in their own jobs, as the seed's "Handles and
// threads" asks; a marker in a job of its own would cost a River fetch,
// a transaction and a completion to write one row (docs/areas/pipelines.md).
func (s *Service) round(ctx context.Context, pipeline string) error {
	return s.inTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		l, err := s.load(ctx, tx, pipeline)
		if apperr.CodeOf(err) == apperr.NotFound {
			return nil // removed from gantry.yaml: it stops moving
		}
		if err != nil {
			return err
		}
		revs, err := models.InFlightRevisions(ctx, tx, pipeline)
		if err != nil || len(revs) == 0 {
			return err
		}
		st, err := s.state(ctx, tx, l, revs)
		if err != nil {
			return err
		}
		if err := s.healArtifacts(ctx, tx, l, st); err != nil {
			return err
		}
		plan := progression.New(l.shape, st.revisions, st.intro)
		for {
			wrote, err := s.writeMarkers(ctx, tx, l, st, plan.Doable)
			if err != nil {
				return err
			}
			if !wrote {
				break
			}
			plan = progression.New(l.shape, st.revisions, st.intro)
		}
		var want []models.PipelineStep
		for _, w := range plan.Doable {
			if info, _ := l.shape.Info(w.Step); info.Kind != progression.Marker {
				want = append(want, models.PipelineStep{RevisionID: st.byName[w.Revision].ID, Event: w.Step.Event, Target: w.Step.Target})
			}
		}
		started, err := models.StartSteps(ctx, tx, want)
		if err != nil {
			return err
		}
		start := make([]river.InsertManyParams, len(started))
		for i, w := range started {
			start[i] = river.InsertManyParams{Args: jobs.DoPipelineStepArgs{RevisionID: w.RevisionID, Event: w.Event, Target: w.Target, Attempt: 1}}
		}
		for _, rp := range plan.Revisions {
			if rp.Finished {
				if err := models.FinishRevision(ctx, tx, st.byName[rp.Name].ID); err != nil {
					return err
				}
			}
		}
		return tx.EnqueueMany(ctx, start)
	})
}

// writeMarkers does the doable markers: each is recorded done and
// appended to the log in tx, unless another transaction recorded it
// first (the same guard as a step's work record: a step is written once
// however many rounds plan it). st learns what was written, and that the
// others are under way elsewhere. It reports whether any was doable.
func (s *Service) writeMarkers(ctx context.Context, tx jobs.Tx, l *loaded, st *progressState, doable []progression.Work) (bool, error) {
	var want []models.PipelineStep
	for _, w := range doable {
		if info, _ := l.shape.Info(w.Step); info.Kind == progression.Marker {
			want = append(want, models.PipelineStep{RevisionID: st.byName[w.Revision].ID, Event: w.Step.Event, Target: w.Step.Target})
		}
	}
	if len(want) == 0 {
		return false, nil
	}
	written, err := models.WriteSteps(ctx, tx, slices.Clone(want))
	if err != nil {
		return false, err
	}
	byID := make(map[int64]*progression.Revision, len(st.revisions))
	for i := range st.revisions {
		byID[st.revisions[i].Seq] = &st.revisions[i]
	}
	type key struct {
		rev           int64
		event, target string
	}
	isWritten := make(map[key]bool, len(written))
	for _, w := range written {
		isWritten[key{w.RevisionID, w.Event, w.Target}] = true
	}
	actor := Actor(l.row.Name)
	entries := make([]models.LogEntry, 0, len(written))
	for _, w := range want {
		r, step := byID[w.RevisionID], progression.Step{Event: w.Event, Target: w.Target}
		if !isWritten[key{w.RevisionID, w.Event, w.Target}] {
			r.Running[step] = true
			continue
		}
		r.Done[step] = true
		entries = append(entries, models.LogEntry{DeploymentID: DeploymentID(l.row.Name, r.Name), TargetID: w.Target,
			Revision: r.Name, Event: w.Event, Actor: actor})
	}
	return true, models.AppendLogs(ctx, tx, entries)
}

// progressState is what the log and the work records say of revisions, as
// the engine takes it.
type progressState struct {
	revisions []progression.Revision
	byName    map[string]*models.PipelineRevision
	intro     progression.Introductions
	open      []models.PipelineStep
}

// state reads revs' log entries and their work under way or failed.
func (s *Service) state(ctx context.Context, db bun.IDB, l *loaded, revs []models.PipelineRevision) (*progressState, error) {
	st := &progressState{byName: make(map[string]*models.PipelineRevision, len(revs))}
	ids := make([]int64, len(revs))
	deployments := make([]string, len(revs))
	byDeployment := make(map[string]int, len(revs))
	for i := range revs {
		r := &revs[i]
		ids[i], deployments[i] = r.ID, DeploymentID(r.Pipeline, r.Revision)
		byDeployment[deployments[i]] = i
		st.byName[r.Revision] = r
		st.revisions = append(st.revisions, progression.Revision{Name: r.Revision, Seq: r.ID,
			Done: map[progression.Step]bool{}, Running: map[progression.Step]bool{}, Failed: map[progression.Step]string{}})
	}
	entries, err := models.DeploymentLogs(ctx, db, deployments)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		r := &st.revisions[byDeployment[e.DeploymentID]]
		event := e.Event
		if event == EventStepSkipped {
			// A step an operator skipped counts as complete.
			event, _ = e.Detail["step"].(string)
		}
		r.Done[progression.Step{Event: event, Target: e.TargetID}] = true
	}
	if st.open, err = models.OpenSteps(ctx, db, ids); err != nil {
		return nil, err
	}
	index := make(map[int64]int, len(revs))
	for i := range revs {
		index[revs[i].ID] = i
	}
	for _, o := range st.open {
		r := &st.revisions[index[o.RevisionID]]
		step := progression.Step{Event: o.Event, Target: o.Target}
		if o.Status == models.StepFailed {
			r.Failed[step] = o.Reason
		} else {
			r.Running[step] = true
		}
	}
	intro, err := models.StepIntroductions(ctx, db, l.row.Name)
	if err != nil {
		return nil, err
	}
	st.intro = progression.Introductions(intro)
	return st, nil
}

// healArtifacts completes the build steps waiting for an artifact that
// was registered while their wait was being recorded (the two
// transactions did not see each other).
func (s *Service) healArtifacts(ctx context.Context, tx jobs.Tx, l *loaded, st *progressState) error {
	type waiting struct {
		step models.PipelineStep
		arch string
	}
	var waits []waiting
	var ids []int64
	for _, o := range st.open {
		info, ok := l.shape.Info(progression.Step{Event: o.Event, Target: o.Target})
		if ok && info.Kind == progression.Artifact && o.Status == models.StepRunning {
			waits = append(waits, waiting{o, info.Name})
			ids = append(ids, o.RevisionID)
		}
	}
	if len(waits) == 0 {
		return nil
	}
	as, err := models.ArtifactsOfRevisions(ctx, tx, ids)
	if err != nil {
		return err
	}
	type key struct {
		rev  int64
		arch string
	}
	registered := make(map[key]*models.PipelineArtifact, len(as))
	for i := range as {
		registered[key{as[i].RevisionID, as[i].Arch}] = &as[i]
	}
	byID := make(map[int64]int, len(st.revisions))
	for i, r := range st.revisions {
		byID[r.Seq] = i
	}
	for _, w := range waits {
		a := registered[key{w.step.RevisionID, w.arch}]
		if a == nil {
			continue
		}
		r := &st.revisions[byID[w.step.RevisionID]]
		if err := s.complete(ctx, tx, l, st.byName[r.Name], &w.step, a.RegisteredBy, map[string]any{"location": a.Location}, ""); err != nil {
			return err
		}
		step := progression.Step{Event: w.step.Event, Target: w.step.Target}
		delete(r.Running, step)
		r.Done[step] = true
	}
	return nil
}

// Sweep wakes every pipeline with revisions in flight.
func (s *Service) Sweep(ctx context.Context) error {
	names, err := models.PipelinesInFlight(ctx, s.Queue.DB())
	if err != nil || len(names) == 0 {
		return err
	}
	return s.inTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		params := make([]river.InsertManyParams, len(names))
		for i, n := range names {
			params[i] = river.InsertManyParams{Args: jobs.ProgressPipelineArgs{Pipeline: n}}
		}
		return tx.EnqueueMany(ctx, params)
	})
}
