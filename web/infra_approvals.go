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
		Unit: x.CfgPath, Account: x.AccountName, ExecutionID: x.ExecutionID, Deps: infraExecutionDeps(x, siblings),
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
	if x.RollbackOf != nil {
		markRollbackLink(&v, x) // infra_rollback.go
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

// infraVoterHelp says what would make infrastructure plans wait for voter:
// an account that lists them.
func (s *infraHandlers) infraVoterHelp(ctx context.Context, email string) (approvalsview.Empty, error) {
	repos, err := models.ListRepositories(ctx, s.DB.Bun)
	if err != nil {
		return approvalsview.Empty{}, err
	}
	const where = "Repositories, their accounts and each account's voters are set in gantry.yaml (or, under gantry dev --demo, by the demo)."
	if len(repos) == 0 {
		return approvalsview.Empty{Body: "No infrastructure repository is configured, so nothing takes votes yet. " + where +
			" Once there is one, each plan of an account that lists you among its voters waits here (and in an email with a voting link) until enough voters approve or reject it."}, nil
	}
	var mine, others []string
	for _, r := range repos {
		for _, a := range r.Accounts {
			if (approval.Policy{Voters: a.Voters}).IsVoter(email) {
				mine = append(mine, fmt.Sprintf("You vote for account %s of %s (%s).", a.Name, r.Name, thresholds(a.MinApprovals, a.MinRejections, len(a.Voters))))
			} else {
				others = append(others, fmt.Sprintf("Account %s of %s: voted on by %s.", a.Name, r.Name, orNone(strings.Join(a.Voters, ", "), "nobody yet")))
			}
		}
	}
	if len(mine) > 0 {
		return approvalsview.Empty{Body: "When a merged pull request changes a unit of an account you vote for, its plan waits here (and you get an email with a voting link) until enough voters approve or reject it.",
			Steps: mine}, nil
	}
	return approvalsview.Empty{Body: "You are a voter of no infrastructure account, so no plan waits for your vote. Each account's plans wait for the voters it lists; once an account lists you (voters: [" +
		email + ", …]), its plans wait here for you. " + where, Steps: others}, nil
}
