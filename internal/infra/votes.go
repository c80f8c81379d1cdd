package infra

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// ExecutionKind is the kind of subject an execution's plan is to the
// approvals service: its subjects are "execution:<execution_id>", which is
// also the execution's log target.
const ExecutionKind = "execution"

// ExecutionSubject is the approvals' subject of an execution.
func ExecutionSubject(executionID string) approvals.Subject {
	return approvals.Subject{Kind: ExecutionKind, ID: executionID}
}

// ApprovalKind is how the approvals service reaches executions: it locks
// them for votes, applies or fails them on a decision, and describes them.
func (s *Service) ApprovalKind() approvals.Kind { return executionKind{s} }

type executionKind struct{ s *Service }

func (executionKind) Name() string { return ExecutionKind }

// Lock locks the execution's run, as everything that changes an execution
// does, and takes votes while its plan waits for them.
func (k executionKind) Lock(ctx context.Context, tx jobs.Tx, id string) (approvals.Ballot, error) {
	x, err := models.ExecutionByExecutionID(ctx, tx, id)
	if err != nil {
		return approvals.Ballot{}, notFound(err, "execution "+id)
	}
	run, err := models.LockRun(ctx, tx, x.RunID)
	if err != nil {
		return approvals.Ballot{}, err
	}
	if x, err = models.ExecutionByID(ctx, tx, x.ID); err != nil {
		return approvals.Ballot{}, err
	}
	switch {
	case x.Ended():
		return approvals.Ballot{}, votesClosed(x)
	case x.ApprovalID == nil:
		return approvals.Ballot{}, apperr.New(apperr.Conflict, "Execution %s is %s; it takes votes once its plan is ready.", x.ExecutionID, describe(x))
	}
	b := approvals.Ballot{ApprovalID: *x.ApprovalID, Log: models.LogEntry{
		DeploymentID: DeploymentID(run), TargetID: ExecutionTarget(x.ExecutionID), Revision: run.MergeCommit,
	}}
	if x.Status != models.ExecRunning || x.Step != models.StepVoting {
		b.Closed = votesClosed(x)
	}
	return b, nil
}

// Decided applies the saved plan the voters approved, or fails the
// execution they rejected and aborts what depends on it.
func (k executionKind) Decided(ctx context.Context, tx jobs.Tx, id string, res approval.Result, actor string) error {
	x, err := models.ExecutionByExecutionID(ctx, tx, id)
	if err != nil {
		return err
	}
	switch res.State {
	case approval.Approved:
		x.Step = models.StepApplying
		if err := models.UpdateExecution(ctx, tx, x, "step"); err != nil {
			return err
		}
		args := jobs.ApplyExecutionArgs{ExecutionID: x.ID}
		if x.ApprovalID != nil {
			args.ApprovalID = *x.ApprovalID
		}
		return tx.Enqueue(ctx, args, nil)
	case approval.Rejected:
		run, err := models.LockRun(ctx, tx, x.RunID)
		if err != nil {
			return err
		}
		return k.s.finish(ctx, tx, run, x, false, "rejected by "+strings.Join(approvals.VotersWith(res, approval.Reject), ", "), actor)
	}
	return nil
}

// Describe names executions by unit, account and pull request, with the
// plan's verdict; the vote request mail is the seed's.
func (k executionKind) Describe(ctx context.Context, db bun.IDB, ids []string) (map[string]approvals.Summary, error) {
	xs, err := models.ExecutionsByExecutionIDs(ctx, db, ids)
	if err != nil {
		return nil, err
	}
	runIDs := make([]int64, len(xs))
	for i := range xs {
		runIDs[i] = xs[i].RunID
	}
	runs, err := models.RunsByIDs(ctx, db, runIDs)
	if err != nil {
		return nil, err
	}
	runOf := make(map[int64]*models.Run, len(runs))
	for i := range runs {
		runOf[runs[i].ID] = &runs[i]
	}
	xIDs := make([]int64, len(xs))
	for i := range xs {
		xIDs[i] = xs[i].ID
	}
	ripples, err := models.RipplesOf(ctx, db, xIDs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]approvals.Summary, len(xs))
	for i := range xs {
		x := &xs[i]
		run := runOf[x.RunID]
		if run == nil {
			continue
		}
		pr := "#" + strconv.Itoa(run.PRNumber)
		text := planSummary(x.PlanOutput)
		if text == "" {
			text = "The plan has changes; open it to read them."
		}
		url := pageurl.Execution(x.ExecutionID)
		var why *models.Ripple // a ripple says why the run gained it
		if r, ok := ripples[x.ID]; ok {
			why = &r
		}
		out[x.ExecutionID] = approvals.Summary{
			Label: "Infrastructure vote", Title: x.CfgPath, URL: url, VoteURL: url + "#vote", Detail: "account " + x.AccountName,
			Context: approvals.Context{Text: run.Repository, LinkText: pr, LinkURL: pageurl.Pull(run.Repository, run.PRNumber), Note: run.PRTitle},
			Text:    text,
			Facts: []approvals.Fact{
				{Label: "Unit", Value: x.CfgPath, Mono: true}, {Label: "Account", Value: x.AccountName},
				{Label: "Repository", Value: run.Repository + " " + pr},
			},
			Approved: "the plan is being applied.",
			Rejected: "the execution failed and what depends on it is aborted.",
			Mail:     voteRequest(run, x, RippleReason(why)),
		}
		if why != nil {
			sum := out[x.ExecutionID]
			sum.Facts = append(sum.Facts, approvals.Fact{Label: "Why", Value: RippleReason(why)})
			out[x.ExecutionID] = sum
		}
		if x.RollbackOf != nil {
			out[x.ExecutionID] = rollbackSummary(out[x.ExecutionID], run, x) // rollback_runs.go
		}
	}
	return out, nil
}

// voteRequest is the mail asking a voter to vote on x (ripple: why the
// run gained it, if it did); the approvals service adds the voter's link.
func voteRequest(run *models.Run, x *models.Execution, ripple string) approvals.Mail {
	summary := planSummary(x.PlanOutput)
	var b strings.Builder
	fmt.Fprintf(&b, "Your vote is needed before Gantry applies this plan.\n\n")
	fmt.Fprintf(&b, "Repository:  %s (pull request #%d: %s)\n", run.Repository, run.PRNumber, run.PRTitle)
	fmt.Fprintf(&b, "Unit:        %s\nAccount:     %s\nExecution:   %s\nCommit:      %s\n", x.CfgPath, x.AccountName, x.ExecutionID, run.MergeCommit)
	if ripple != "" {
		fmt.Fprintf(&b, "Why:         %s (the pull request did not touch it)\n", ripple)
	}
	fmt.Fprintf(&b, "Approvals:   at least %d of %d voters apply it; %d rejection(s) stop it.\n\n", x.MinApprovalCount, len(x.Voters), x.MinRejectionCount)
	if summary != "" {
		fmt.Fprintf(&b, "%s\n\n", summary)
	}
	return approvals.Mail{
		Subject: fmt.Sprintf("[Gantry] Vote on %s (%s) for %s#%d", x.CfgPath, x.AccountName, run.Repository, run.PRNumber),
		Body:    b.String(),
		Review:  "Review the plan and vote",
	}
}

// VoteInput is one vote on an execution's plan.
type VoteInput struct {
	ExecutionID string
	Voter       string // email address
	Decision    string // approve or reject
	Comment     string
	Via         string // approvals.ViaDashboard, ViaAPI, ViaLink
}

// Vote records a vote on an execution waiting for votes. On the minimum
// approvals the saved plan is applied; on the minimum rejections the
// execution fails and what depends on it is aborted. A voter may change
// their vote until then.
func (s *Service) Vote(ctx context.Context, in VoteInput) (approvals.Outcome, error) {
	return s.Approvals.Vote(ctx, approvals.VoteInput{
		Subject: ExecutionSubject(in.ExecutionID), Voter: in.Voter, Decision: in.Decision, Comment: in.Comment, Via: in.Via,
	})
}

// RequestVote emails one voter a signed link to the execution's approval
// page; the link votes as that voter without a login.
func (s *Service) RequestVote(ctx context.Context, id int64, voter string) error {
	x, err := models.ExecutionByID(ctx, s.Queue.DB(), id)
	if err != nil {
		return err
	}
	if x.Status != models.ExecRunning || x.Step != models.StepVoting {
		return nil // decided (or aborted) before this mail went out
	}
	return s.Approvals.RequestVote(ctx, ExecutionSubject(x.ExecutionID), voter)
}

// closeVotes closes the votes on an execution that ends without their
// decision (aborted, or failed while they were open).
func (s *Service) closeVotes(ctx context.Context, tx jobs.Tx, x *models.Execution) error {
	if x.ApprovalID == nil {
		return nil
	}
	return s.Approvals.Close(ctx, tx, ExecutionSubject(x.ExecutionID))
}

// votesClosed says why x takes no more votes, as people say it:
// "Execution … failed, so its votes are closed."
func votesClosed(x *models.Execution) error {
	state := "is " + describe(x)
	switch x.Status {
	case models.ExecSucceeded, models.ExecFailed:
		state = x.Status
	case models.ExecAborted:
		state = "was aborted"
	}
	return apperr.New(apperr.Conflict, "Execution %s %s, so its votes are closed.", x.ExecutionID, state)
}

func describe(x *models.Execution) string {
	if x.Status == models.ExecRunning && x.Step != "" {
		return x.Step
	}
	return x.Status
}

// ExecutionVotes is where the votes on an execution's plan stand.
type ExecutionVotes struct {
	Approval *models.Approval // nil until its plan goes to the voters
	Votes    []models.Vote    // every vote as cast, changed ones included
	Result   approval.Result  // the tally; zero without an approval
	// Approvers and Rejecters are the voters whose latest vote (up to the
	// decision) approves or rejects.
	Approvers, Rejecters []string
}

// TallyVotes adds up an execution's approval and its votes (nil when its
// plan has not gone to the voters).
func TallyVotes(a *models.Approval, votes []models.Vote) ExecutionVotes {
	if a == nil {
		return ExecutionVotes{}
	}
	res := approvals.Tally(a, votes)
	return ExecutionVotes{Approval: a, Votes: votes, Result: res,
		Approvers: approvals.VotersWith(res, approval.Approve), Rejecters: approvals.VotersWith(res, approval.Reject)}
}

// ExecutionVotes loads and tallies the votes on x's plan.
func (s *Service) ExecutionVotes(ctx context.Context, x *models.Execution) (ExecutionVotes, error) {
	if x.ApprovalID == nil {
		return ExecutionVotes{}, nil
	}
	a, votes, err := s.Approvals.Approval(ctx, ExecutionSubject(x.ExecutionID))
	if err != nil {
		return ExecutionVotes{}, fmt.Errorf("loading the votes on %s: %w", x.ExecutionID, err)
	}
	return TallyVotes(a, votes), nil
}
