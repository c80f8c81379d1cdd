package pipelines

import (
	"context"
	"errors"
	"fmt"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/progression"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// StepRef names one step of one revision, as operators and the API do.
type StepRef struct {
	Pipeline string
	Revision string
	Event    string
	Target   string
}

// lockFailed locks a step that an operator acts on and checks it failed.
func (s *Service) lockFailed(ctx context.Context, tx jobs.Tx, ref StepRef, action string) (*loaded, *models.PipelineRevision, *models.PipelineStep, error) {
	l, err := s.load(ctx, tx, ref.Pipeline)
	if err != nil {
		return nil, nil, nil, err
	}
	rev, err := models.RevisionByName(ctx, tx, ref.Pipeline, ref.Revision)
	if err != nil {
		return nil, nil, nil, notFound(err, fmt.Sprintf("revision %s in pipeline %s", ref.Revision, ref.Pipeline))
	}
	if ref.Event == "" || ref.Target == "" {
		return nil, nil, nil, apperr.Fields{"event": "the step's event and target are required", "target": "the step's event and target are required"}.Err()
	}
	row, err := models.LockStep(ctx, tx, rev.ID, ref.Event, ref.Target)
	if errors.Is(err, models.ErrNotFound) {
		return nil, nil, nil, apperr.New(apperr.NotFound, "Revision %s has no work for %s on %s.", ref.Revision, ref.Event, ref.Target)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if row.Status != models.StepFailed {
		return nil, nil, nil, apperr.New(apperr.Conflict, "%s on %s is %s; only a failed step is %s.", ref.Event, ref.Target, row.Status, action)
	}
	return l, rev, row, nil
}

// Retry starts a failed step again, as a new attempt, logged with who.
func (s *Service) Retry(ctx context.Context, ref StepRef, actor string) error {
	return s.inTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		l, rev, row, err := s.lockFailed(ctx, tx, ref, "retried")
		if err != nil {
			return err
		}
		if ok, err := models.RetryStep(ctx, tx, row); err != nil || !ok {
			return err
		}
		if info, _ := l.shape.Info(progression.Step{Event: row.Event, Target: row.Target}); info.Kind == progression.Gate {
			// The rejected vote stays in the record; the voters vote anew.
			if err := models.SupersedeApproval(ctx, tx, gateSubject(rev.ID, info.Stage).String()); err != nil {
				return err
			}
		}
		if err := logStep(ctx, tx, rev, row.Target, EventStepRetried, actor, map[string]any{"step": row.Event, "attempt": row.Attempt}); err != nil {
			return err
		}
		if err := tx.Enqueue(ctx, jobs.DoPipelineStepArgs{RevisionID: rev.ID, Event: row.Event, Target: row.Target, Attempt: row.Attempt}, nil); err != nil {
			return err
		}
		return progressTx(ctx, tx, l.row.Name)
	})
}

// Skip lets a revision go on past a failed step as if it had completed,
// logged with who.
func (s *Service) Skip(ctx context.Context, ref StepRef, actor string) error {
	return s.inTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		l, rev, row, err := s.lockFailed(ctx, tx, ref, "skipped")
		if err != nil {
			return err
		}
		if ok, err := models.SkipStep(ctx, tx, row); err != nil || !ok {
			return err
		}
		if err := logStep(ctx, tx, rev, row.Target, EventStepSkipped, actor, map[string]any{"step": row.Event, "reason": row.Reason}); err != nil {
			return err
		}
		return progressTx(ctx, tx, l.row.Name)
	})
}
