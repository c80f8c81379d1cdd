package pipelines

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/internal/progression"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// GateKind is the kind of subject a pipeline gate is to the approvals
// service. Its votes are logged as stage-voted, stage-approved and
// stage-rejected on the stage, in the revision's deployment: stage-approved
// is the gate step's own completion.
const GateKind = "stage"

// gateSubject is the approvals' subject of stage's gate for a revision:
// "stage:<revision id>/<stage>".
func gateSubject(revisionID int64, stage string) approvals.Subject {
	return approvals.Subject{Kind: GateKind, ID: strconv.FormatInt(revisionID, 10) + "/" + stage}
}

// ApprovalKind is how the approvals service reaches pipeline gates.
func (s *Service) ApprovalKind() approvals.Kind { return gateKind{s} }

type gateKind struct{ s *Service }

func (gateKind) Name() string { return GateKind }

// gate is a gate subject resolved.
type gate struct {
	l     *loaded
	rev   *models.PipelineRevision
	stage string
	step  progression.Step
}

func (k gateKind) resolve(ctx context.Context, db bun.IDB, id string) (*gate, error) {
	revID, stage, ok := strings.Cut(id, "/")
	n, err := strconv.ParseInt(revID, 10, 64)
	if !ok || err != nil {
		return nil, apperr.New(apperr.NotFound, "No pipeline gate %s.", id)
	}
	rev, err := models.RevisionByID(ctx, db, n)
	if err != nil {
		return nil, notFound(err, "pipeline gate "+id)
	}
	l, err := k.s.load(ctx, db, rev.Pipeline)
	if err != nil {
		return nil, err
	}
	if st := l.def.Stage(stage); st == nil || st.Approval == nil {
		return nil, apperr.New(apperr.NotFound, "Pipeline %s has no gate at stage %s.", rev.Pipeline, stage)
	}
	return &gate{l: l, rev: rev, stage: stage, step: progression.Step{Event: progression.StageApproved, Target: l.shape.StageTarget(stage)}}, nil
}

// Lock locks the gate step's work and takes votes while it waits for them.
func (k gateKind) Lock(ctx context.Context, tx jobs.Tx, id string) (approvals.Ballot, error) {
	g, err := k.resolve(ctx, tx, id)
	if err != nil {
		return approvals.Ballot{}, err
	}
	a, err := models.ApprovalBySubject(ctx, tx, gateSubject(g.rev.ID, g.stage).String())
	if err != nil {
		return approvals.Ballot{}, apperr.New(apperr.Conflict, "Revision %s has not reached the gate of %s yet.", g.rev.Revision, g.stage)
	}
	b := approvals.Ballot{ApprovalID: a.ID, Log: models.LogEntry{
		DeploymentID: DeploymentID(g.rev.Pipeline, g.rev.Revision), TargetID: g.step.Target, Revision: g.rev.Revision,
	}}
	row, err := models.LockStep(ctx, tx, g.rev.ID, g.step.Event, g.step.Target)
	switch {
	case errors.Is(err, models.ErrNotFound):
		b.Closed = apperr.New(apperr.Conflict, "Revision %s has not reached the gate of %s yet.", g.rev.Revision, g.stage)
	case err != nil:
		return approvals.Ballot{}, err
	case row.Status != models.StepRunning:
		b.Closed = apperr.New(apperr.Conflict, "The gate of %s for revision %s is %s.", g.stage, g.rev.Revision, row.Status)
	}
	return b, nil
}

// Decided lets the revision through the gate, or fails the gate (the
// revision waits for an operator to retry the vote or skip the gate).
func (k gateKind) Decided(ctx context.Context, tx jobs.Tx, id string, res approval.Result, actor string) error {
	g, err := k.resolve(ctx, tx, id)
	if err != nil {
		return err
	}
	row, err := models.LockStep(ctx, tx, g.rev.ID, g.step.Event, g.step.Target)
	if err != nil {
		return err
	}
	switch res.State {
	case approval.Approved:
		// The approvals service wrote stage-approved, the step's entry.
		if _, err := models.EndStep(ctx, tx, row, models.StepDone, "approved by "+strings.Join(approvals.VotersWith(res, approval.Approve), ", "), ""); err != nil {
			return err
		}
		return progressTx(ctx, tx, g.l.row.Name)
	case approval.Rejected:
		info, _ := g.l.shape.Info(g.step)
		return k.s.fail(ctx, tx, g.l, g.rev, row, info, "rejected by "+strings.Join(approvals.VotersWith(res, approval.Reject), ", "), "")
	}
	return nil
}

// Describe names gates by pipeline, stage and revision.
func (k gateKind) Describe(ctx context.Context, db bun.IDB, ids []string) (map[string]approvals.Summary, error) {
	out := make(map[string]approvals.Summary, len(ids))
	for _, id := range ids {
		g, err := k.resolve(ctx, db, id)
		if apperr.CodeOf(err) == apperr.NotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		p, rev := g.rev.Pipeline, g.rev.Revision
		url := pageurl.PipelineRevision(p, rev)
		var after []string
		if st := g.l.def.Stage(g.stage); st != nil {
			after = st.After
		}
		text := fmt.Sprintf("Revision %s passed %s; approving lets it into %s.", rev, orNone(after), g.stage)
		var body strings.Builder
		fmt.Fprintf(&body, "Your vote is needed before revision %s of pipeline %s goes on.\n\n", rev, p)
		fmt.Fprintf(&body, "Pipeline:  %s\nStage:     %s (after %s)\nRevision:  %s\n\n", p, g.stage, orNone(after), rev)
		out[id] = approvals.Summary{
			Label: "Pipeline gate", Title: p + " → " + g.stage, URL: url, VoteURL: url + "#vote",
			Detail:   "revision " + rev,
			Context:  approvals.Context{Text: "pipeline", LinkText: p, LinkURL: pageurl.Pipeline(p)},
			Text:     text,
			Facts:    []approvals.Fact{{Label: "Pipeline", Value: p}, {Label: "Stage", Value: g.stage}, {Label: "Revision", Value: rev, Mono: true}},
			Approved: "the revision moves on to " + g.stage + ".",
			Rejected: "the revision stops before " + g.stage + " until an operator retries the vote or skips the gate.",
			Mail:     approvals.Mail{Subject: fmt.Sprintf("Vote: %s revision %s into %s", p, rev, g.stage), Body: body.String(), Review: "See where the revision stands and vote"},
		}
	}
	return out, nil
}

// openGate opens the gate's vote and asks each voter, once: a job run
// again finds the vote open and leaves it.
func (s *Service) openGate(ctx context.Context, l *loaded, rev *models.PipelineRevision, row *models.PipelineStep, info progression.StepInfo) error {
	st := l.def.Stage(info.Stage)
	if st == nil || st.Approval == nil {
		return nil
	}
	subject := gateSubject(rev.ID, info.Stage)
	return s.inTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		locked, err := models.LockStep(ctx, tx, rev.ID, row.Event, row.Target)
		if err != nil || locked.Status != models.StepRunning || locked.Attempt != row.Attempt {
			return err
		}
		if _, err := models.ApprovalBySubject(ctx, tx, subject.String()); err == nil {
			return nil // already open
		} else if !errors.Is(err, models.ErrNotFound) {
			return err
		}
		a, err := s.Approvals.Open(ctx, tx, subject, st.Approval.Policy())
		if err != nil {
			return err
		}
		for _, v := range a.Voters {
			if err := tx.Enqueue(ctx, jobs.RequestApprovalVoteArgs{Subject: subject.String(), Voter: v, ApprovalID: a.ID}, nil); err != nil {
				return err
			}
		}
		return logStep(ctx, tx, rev, row.Target, "stage-vote-opened", Actor(l.row.Name),
			map[string]any{"voters": a.Voters, "min_approvals": a.MinApprovals, "min_rejections": a.MinRejections})
	})
}

// Vote records voter's vote on the gate of stage for a revision, cast from
// Gantry's pages or API.
func (s *Service) Vote(ctx context.Context, pipeline, revision, stage string, in approvals.VoteInput) (approvals.Outcome, approvals.Summary, error) {
	rev, err := models.RevisionByName(ctx, s.Queue.DB(), pipeline, revision)
	if err != nil {
		return approvals.Outcome{}, approvals.Summary{}, notFound(err, fmt.Sprintf("revision %s in pipeline %s", revision, pipeline))
	}
	in.Subject = gateSubject(rev.ID, stage)
	out, err := s.Approvals.Vote(ctx, in)
	if err != nil {
		return out, approvals.Summary{}, err
	}
	sum, _, err := s.Approvals.Describe(ctx, in.Subject)
	return out, sum, err
}
