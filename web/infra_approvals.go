package web

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/models"
	approvalsview "github.com/gantryhq/gantry/views/pages/approvals"
	infraview "github.com/gantryhq/gantry/views/pages/infra"
)

// executionLinkView is the infrastructure area's voting link page: the run,
// the unit, what was applied before it, the votes so far and the plan.
func (s *infraHandlers) executionLinkView(ctx context.Context, id, voter string, a *models.Approval, votes []models.Vote) (approvalsview.LinkView, error) {
	db := s.DB.Bun
	x, err := models.ExecutionByExecutionID(ctx, db, id)
	if errors.Is(err, models.ErrNotFound) {
		return approvalsview.LinkView{}, apperr.New(apperr.NotFound, "Execution %s, which this link votes on, no longer exists.", id)
	}
	if err != nil {
		return approvalsview.LinkView{}, err
	}
	run, err := models.RunByID(ctx, db, x.RunID)
	if err != nil {
		return approvalsview.LinkView{}, err
	}
	siblings, err := models.ExecutionsOfRun(ctx, db, run.ID)
	if err != nil {
		return approvalsview.LinkView{}, err
	}
	pr := "#" + strconv.Itoa(run.PRNumber)
	link := infraview.VoteLink{
		Repository: run.Repository, PR: pr, PRTitle: run.PRTitle, MergeCommit: run.MergeCommit,
		Unit: x.CfgPath, Account: x.AccountName, ExecutionID: x.ExecutionID, Deps: infraDepsOf(x, siblings),
		Summary: infra.PlanSummary(x.PlanOutput), Changes: infraPlanChangeGroups(infra.PlanChanges(x.PlanOutput)),
		Plan: x.PlanOutput,
	}
	votesOf := infraVotesView(x, infra.TallyVotes(a, votes))
	v := approvalsview.LinkView{
		Label: "Infrastructure vote", Title: x.CfgPath, Status: infraview.StateBadge(infraExecState(x)),
		Lead:   fmt.Sprintf("Account %s · %s %s %s", x.AccountName, run.Repository, pr, run.PRTitle),
		Before: infraview.LinkRun(link), After: infraview.LinkPlan(link),
		Votes: approvalsview.Votes{Tally: votesOf.Tally, Outcome: votesOf.Outcome, OutcomeTone: votesOf.OutcomeTone,
			Rows: votesOf.Rows, Note: votesOf.Note},
		Open:        votesOf.Open,
		Consequence: "Approving applies exactly the plan above; rejecting fails this execution and aborts what depends on it.",
		URL:         pageurl.Execution(x.ExecutionID), URLText: "See this execution in Gantry →",
	}
	switch {
	case v.Open && !(approval.Policy{Voters: x.Voters}).IsVoter(voter):
		v.Open = false
		v.Votes.Note = fmt.Sprintf("%s is no longer one of the voters of account %s (%s), so this link cannot vote.", voter, x.AccountName, strings.Join(x.Voters, ", "))
	case v.Open:
		if mine := yourVote(v.Votes.Rows, voter); mine != "" {
			v.Votes.Note = mine
		}
	}
	return v, nil
}

// infraPlanChangeGroups groups a plan's resources by action, in the order a
// voter weighs them: what goes away first, what is only read last.
func infraPlanChangeGroups(changes []infra.PlanChange) []infraview.ChangeGroup {
	order := []infraview.ChangeGroup{
		{Action: infra.PlanActionDestroy, Label: "to destroy", Tone: "bad"},
		{Action: infra.PlanActionReplace, Label: "to replace", Tone: "bad"},
		{Action: infra.PlanActionUpdate, Label: "to change", Tone: "warn"},
		{Action: infra.PlanActionCreate, Label: "to add", Tone: "ok"},
		{Action: infra.PlanActionRead, Label: "to read"},
	}
	var out []infraview.ChangeGroup
	for _, g := range order {
		for _, c := range changes {
			if c.Action == g.Action {
				g.Addresses = append(g.Addresses, c.Address)
			}
		}
		if len(g.Addresses) > 0 {
			out = append(out, g)
		}
	}
	return out
}
