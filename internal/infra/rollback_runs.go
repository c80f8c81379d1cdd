package infra

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/gitrepo"
	"github.com/gantryhq/gantry/internal/infrarun"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/internal/tfstate"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// Rollbacks (the seed's "Rollback New Provider Resources"). When a run
// fails, each of its executions whose apply recorded resources of new
// providers gets a rollback execution in the same run: a destroy plan
// targeting exactly those addresses, voted on and applied as any plan.
// The run is not over meanwhile (the merge lock stays held). A merge that
// deletes a unit whose new provider resources are still standing (the
// seed's revert) gets rollbacks of them too, run from the last commit
// where the unit existed. A rollback that fails is held for an operator.

// Log events of rollbacks.
const (
	EventRollbackQueued    = "execution-rollback-queued"
	EventRollbackSucceeded = "execution-rollback-finished-successfully"
	EventRollbackFailed    = "execution-rollback-failed"
	EventRollbackRetried   = "execution-rollback-retried"
	EventRollbackResolved  = "execution-rollback-resolved"
)

// What an operator may choose for a failed rollback.
const (
	RollbackChoiceRetry    = "retry"    // plan the destroy again and ask the voters again
	RollbackChoiceResolved = "resolved" // the operator dealt with what is left; the run goes on
)

// RollbackHeldExplanation is what pages say of a failed rollback.
const RollbackHeldExplanation = "The rollback failed: Gantry will not try it again on its own. " +
	"Destroy what is left by hand, or fix the cause and retry; then mark it resolved so the run can go on."

// RollbackStatusContext is the commit status context of the rollback of
// the unit at path, posted on the run's merge commit.
func RollbackStatusContext(path string) string { return "gantry/rollback: " + path }

// RollbackExecutionID is the id of the rollback of executionID: the
// seed's id with "rollback" in place of "run".
func RollbackExecutionID(executionID string) string {
	return "rollback-" + strings.TrimPrefix(executionID, "run-")
}

// destroyPlan is a plan command that destroys addresses: the unit's plan
// command with -destroy and one -target per address added at its end
// (after the presets' `--`, Terragrunt passes them to terraform). Terraform
// also destroys what depends on them: rollbackScope refuses such a plan.
func destroyPlan(plan, addresses []string) []string {
	out := append(slices.Clone(plan), "-destroy")
	for _, a := range addresses {
		out = append(out, "-target="+a)
	}
	return out
}

// rollbackExecution is the rollback of x destroying addresses in run: the
// unit, its dependencies (the engine reverses them), commands, roles and
// voters of x.
func rollbackExecution(run *models.Run, x *models.Execution, addresses []string) *models.Execution {
	return &models.Execution{
		ExecutionID: RollbackExecutionID(x.ExecutionID), RunID: run.ID,
		CfgPath: x.CfgPath, CfgDeps: nonNil(x.CfgDeps), AccountName: x.AccountName, AccountPath: x.AccountPath, AccountDeps: nonNil(x.AccountDeps),
		InitCommand: nonNil(x.InitCommand), PlanCommand: destroyPlan(x.PlanCommand, addresses), ApplyCommand: x.ApplyCommand,
		PlanRoleARN: x.PlanRoleARN, ApplyRoleARN: x.ApplyRoleARN,
		Voters: x.Voters, MinApprovalCount: x.MinApprovalCount, MinRejectionCount: x.MinRejectionCount,
		Status: models.ExecWaiting,
	}
}

// engineStates is what the engine needs of a run's executions: also
// which recorded new provider resources and which rollbacks an operator
// marked resolved.
func engineStates(ctx context.Context, db bun.IDB, runID int64, xs []models.Execution) ([]infrarun.State, error) {
	recs, err := models.NewResourcesOfRun(ctx, db, runID)
	if err != nil {
		return nil, err
	}
	var rbs map[int64]models.Rollback
	if slices.ContainsFunc(xs, func(x models.Execution) bool { return x.RollbackOf != nil }) {
		if rbs, err = models.RollbacksOfRun(ctx, db, runID); err != nil {
			return nil, err
		}
	}
	states := make([]infrarun.State, len(xs))
	for i := range xs {
		x := &xs[i]
		states[i] = infrarun.State{ID: x.ID, CfgPath: x.CfgPath, Account: x.AccountName, CfgDeps: x.CfgDeps, AccountDeps: x.AccountDeps, Status: x.Status,
			NewResources: len(recs[x.ID].Addresses) > 0}
		if x.RollbackOf != nil {
			rb := rbs[x.ID]
			states[i].RollbackOf, states[i].Resolved = *x.RollbackOf, rb.Resolved()
		}
	}
	return states, nil
}

// startRollbacks makes the rollbacks of the executions ids of a run that
// failed (the caller locked it), from its merge commit, where the units
// exist as they were applied.
func (s *Service) startRollbacks(ctx context.Context, tx jobs.Tx, run *models.Run, byID map[int64]*models.Execution, ids []int64, actor string) error {
	recs, err := models.NewResourcesOf(ctx, tx, ids)
	if err != nil {
		return err
	}
	repo, err := models.RepositoryByName(ctx, tx, run.Repository)
	if err != nil {
		return err
	}
	for _, id := range ids {
		rb := &models.Rollback{RollbackOf: id, Reason: models.RollbackRunFailed, Commit: run.MergeCommit, Addresses: recs[id].Addresses}
		if err := s.insertRollback(ctx, tx, repo, run, byID[id], rb, actor); err != nil {
			return err
		}
	}
	// The open pull requests' merge-lock status says the run rolls back.
	return tx.Enqueue(ctx, jobs.RefreshMergeLockArgs{Repository: run.Repository}, nil)
}

// insertRollback records the rollback rb of x in run, logs it and posts
// its pending commit status.
func (s *Service) insertRollback(ctx context.Context, tx jobs.Tx, repo *models.Repository, run *models.Run, x *models.Execution, rb *models.Rollback, actor string) error {
	r := rollbackExecution(run, x, rb.Addresses)
	if err := models.InsertRollback(ctx, tx, r, rb); err != nil {
		return err
	}
	if err := s.log(ctx, tx, run, ExecutionTarget(r.ExecutionID), EventRollbackQueued, actor, map[string]any{
		"cfg_path": r.CfgPath, "rollback_of": x.ExecutionID, "reason": rb.Reason, "commit": rb.Commit, "addresses": rb.Addresses,
	}); err != nil {
		return err
	}
	return s.queueRollbackStatus(ctx, tx, repo, run, r, github.StatePending,
		fmt.Sprintf("rollback queued: destroys %s of new providers", plural(len(rb.Addresses), "resource")))
}

// queueRollbackStatus posts the status of rollback execution r on the
// run's merge commit (a deleted unit's rollback also names the commit it
// runs from on its page).
func (s *Service) queueRollbackStatus(ctx context.Context, tx jobs.Tx, repo *models.Repository, run *models.Run, r *models.Execution, state github.State, description string) error {
	return s.queueStatus(ctx, tx, repo, jobs.PostStatusArgs{
		SHA: run.MergeCommit, Of: jobs.StatusAsGiven, State: string(state), Context: RollbackStatusContext(r.CfgPath),
		Description: description, TargetURL: s.BaseURL + pageurl.Execution(r.ExecutionID),
	})
}

// rollbackEnded logs how a rollback execution ended (finish, under the
// run's lock) and posts its status. A failed rollback keeps what is left:
// read from the state after a failed apply (rollbackLeft), or every
// address when nothing was applied (its plan failed or was rejected).
func (s *Service) rollbackEnded(ctx context.Context, tx jobs.Tx, run *models.Run, x *models.Execution, succeeded bool, actor string) error {
	rb, err := models.RollbackByExecution(ctx, tx, x.ID)
	if err != nil {
		return err
	}
	repo, err := models.RepositoryByName(ctx, tx, run.Repository)
	if err != nil {
		return err
	}
	detail := map[string]any{"cfg_path": x.CfgPath, "addresses": rb.Addresses}
	if succeeded {
		rb.Remaining, rb.RemainingError = []string{}, ""
		if err := models.UpdateRollback(ctx, tx, rb, "remaining", "remaining_error"); err != nil {
			return err
		}
		if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventRollbackSucceeded, actor, detail); err != nil {
			return err
		}
		return s.queueRollbackStatus(ctx, tx, repo, run, x, github.StateSuccess,
			fmt.Sprintf("rolled back: %s of new providers destroyed", plural(len(rb.Addresses), "resource")))
	}
	if rb.Remaining == nil && rb.RemainingError == "" && x.ApplyStartedAt == nil {
		rb.Remaining = rb.Addresses // nothing was applied
		if err := models.UpdateRollback(ctx, tx, rb, "remaining"); err != nil {
			return err
		}
	}
	detail["error"], detail["remaining"] = x.Error, rb.Remaining
	if rb.RemainingError != "" {
		detail["remaining_error"] = rb.RemainingError
	}
	if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventRollbackFailed, actor, detail); err != nil {
		return err
	}
	if err := tx.Enqueue(ctx, jobs.NotifyRollbackHeldArgs{ExecutionID: x.ID}, nil); err != nil {
		return err
	}
	left := "what is left is unknown"
	if rb.Remaining != nil {
		left = plural(len(rb.Remaining), "resource") + " left"
	}
	return s.queueRollbackStatus(ctx, tx, repo, run, x, github.StateFailure, "rollback failed ("+left+"): an operator must retry it or mark it resolved")
}

// rollbackLeft reads, after a rollback's apply failed, which of the
// addresses it was to destroy are still in the unit's state (terraform
// show -json in a fresh checkout of the rollback's commit, through the
// unit's init and apply role). A state that cannot be read is recorded as
// such: the page then says what is left is unknown.
func (s *Service) rollbackLeft(ctx context.Context, ws string, x *models.Execution, repo *models.Repository, commit string) (remaining []string, why string) {
	state, err := s.showState(ctx, ws, x, repo, commit)
	var rs []tfstate.Resource
	if err == nil {
		rs, err = tfstate.StateResources(state)
	}
	if err != nil {
		return nil, "reading what is left in the state: " + err.Error()
	}
	rb, err := models.RollbackByExecution(ctx, s.Queue.DB(), x.ID)
	if err != nil {
		return nil, "reading what is left in the state: " + err.Error()
	}
	remaining = []string{}
	for _, r := range rs {
		if slices.Contains(rb.Addresses, r.Address) {
			remaining = append(remaining, r.Address)
		}
	}
	slices.Sort(remaining)
	return remaining, ""
}

// recordRollbackLeft stores what rollbackLeft read, in the transaction
// that fails the rollback.
func recordRollbackLeft(ctx context.Context, tx bun.IDB, id int64, remaining []string, why string) error {
	rb, err := models.RollbackByExecution(ctx, tx, id)
	if err != nil {
		return err
	}
	rb.Remaining, rb.RemainingError = remaining, why
	return models.UpdateRollback(ctx, tx, rb, "remaining", "remaining_error")
}

// showState runs the unit's init and `show -json` in a checkout of commit
// (on ECS, as a task: capturedOnECS).
func (s *Service) showState(ctx context.Context, ws string, x *models.Execution, repo *models.Repository, commit string) ([]byte, error) {
	return s.showAt(ctx, ws, "left", x, x.ApplyRoleARN, repo, commit, "")
}

// showAt runs the unit's init and `show -json` (of planFile when given)
// through role in a checkout of commit under ws/name, or on ECS as a task
// storing its output at <execution_id>/show-<name>.json.
func (s *Service) showAt(ctx context.Context, ws, name string, x *models.Execution, role string, repo *models.Repository, commit, planFile string) ([]byte, error) {
	show, err := showCommand(x.ApplyCommand)
	if err != nil {
		return nil, err
	}
	if repo.ECS != nil {
		c := unitCommand{RepoURL: repo.URL, Commit: commit, Unit: x.CfgPath, Init: x.InitCommand, Main: show,
			Role: role, Session: x.ExecutionID, ECS: repo.ECS, OutputObject: x.ExecutionID + "/show-" + name + ".json"}
		if planFile != "" { // the task fetches the plan the plan step stored, checked by its SHA-256
			c.Main, c.PlanFile, c.PlanObject = append(slices.Clone(show), "{plan_file}"), planFile, planObject(x)
		}
		return s.capturedOnECS(ctx, c)
	}
	mirror, err := s.Git.Fetch(ctx, repo.URL, commit)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", commit, err)
	}
	checkout := filepath.Join(ws, name)
	if err := mirror.Checkout(ctx, commit, checkout); err != nil {
		return nil, err
	}
	defer func() { _ = mirror.RemoveCheckout(context.WithoutCancel(ctx), checkout) }()
	deadline := time.Now().Add(s.commandTimeout())
	c := unitCommand{Unit: x.CfgPath, Main: x.InitCommand, PlanFile: planFile, Role: role, Session: x.ExecutionID}
	if len(c.Main) > 0 {
		if _, err := s.captured(ctx, checkout, c, deadline); err != nil {
			return nil, err
		}
	}
	c.Main = show
	if planFile != "" {
		c.Main = append(show, "{plan_file}")
	}
	return s.captured(ctx, checkout, c, deadline)
}

// executionCommit is the commit an execution plans and applies: its run's
// merge commit, or for a rollback the commit recorded with it.
func executionCommit(ctx context.Context, db bun.IDB, x *models.Execution, run *models.Run) (string, error) {
	if x.RollbackOf == nil {
		return run.MergeCommit, nil
	}
	rb, err := models.RollbackByExecution(ctx, db, x.ID)
	if err != nil {
		return "", fmt.Errorf("reading the rollback of %s: %w", x.ExecutionID, err)
	}
	return rb.Commit, nil
}

// deletedRollback is a rollback to make for a unit a merge deleted.
type deletedRollback struct {
	of     models.Execution
	commit string
	addrs  []string
}

// deletedUnitRollbacks finds, for the units run's merge deleted, the new
// provider resources earlier runs recorded there and never rolled back,
// and the last commit where each unit existed: the merge's base (the
// trunk before it) when the unit is there, else the merge commit of the
// run that recorded them, checked with git. A unit found in neither is
// an error naming it: the rollback would have no configuration to run.
func (s *Service) deletedUnitRollbacks(ctx context.Context, repo *models.Repository, run *models.Run, deleted []string) ([]deletedRollback, error) {
	db := s.Queue.DB()
	xs, err := models.StandingNewResources(ctx, db, repo.Name, run.ID, deleted)
	if err != nil || len(xs) == 0 {
		return nil, err
	}
	ids, runIDs := make([]int64, len(xs)), make([]int64, len(xs))
	for i := range xs {
		ids[i], runIDs[i] = xs[i].ID, xs[i].RunID
	}
	recs, err := models.NewResourcesOf(ctx, db, ids)
	if err != nil {
		return nil, err
	}
	runs, err := models.RunsByIDs(ctx, db, runIDs)
	if err != nil {
		return nil, err
	}
	merged := make(map[int64]string, len(runs))
	for _, r := range runs {
		merged[r.ID] = r.MergeCommit
	}
	out := make([]deletedRollback, 0, len(xs))
	for _, x := range xs {
		var commit string
		for _, c := range []string{run.BaseCommit, merged[x.RunID]} {
			ok, err := s.unitExistsAt(ctx, repo, c, x.CfgPath)
			if err != nil {
				return nil, err
			}
			if ok {
				commit = c
				break
			}
		}
		if commit == "" {
			return nil, fmt.Errorf("%w: %s was deleted with resources of new providers in its state (%s), but Gantry finds it neither at %s nor at %s to destroy them from",
				errScan, x.CfgPath, strings.Join(recs[x.ID].Addresses, ", "), run.BaseCommit, merged[x.RunID])
		}
		out = append(out, deletedRollback{of: x, commit: commit, addrs: recs[x.ID].Addresses})
	}
	return out, nil
}

// unitExistsAt reports whether commit has the unit at path (its
// terragrunt.hcl).
func (s *Service) unitExistsAt(ctx context.Context, repo *models.Repository, commit, path string) (bool, error) {
	if commit == "" || commit == gitrepo.EmptyTree {
		return false, nil
	}
	mirror, err := s.Git.Fetch(ctx, repo.URL, commit)
	if err != nil {
		return false, fmt.Errorf("fetching %s: %w", commit, err)
	}
	for _, name := range []string{"terragrunt.hcl", "terragrunt.hcl.json"} {
		_, err := mirror.ReadFileAt(ctx, commit, path+"/"+name)
		switch {
		case err == nil:
			return true, nil
		case !errors.Is(err, gitrepo.ErrNotFound):
			return false, err
		}
	}
	return false, nil
}

// insertDeletedRollbacks records the rollbacks deletedUnitRollbacks found,
// with the run's executions.
func (s *Service) insertDeletedRollbacks(ctx context.Context, tx jobs.Tx, repo *models.Repository, run *models.Run, found []deletedRollback) error {
	for i := range found {
		d := &found[i]
		rb := &models.Rollback{RollbackOf: d.of.ID, Reason: models.RollbackUnitDeleted, Commit: d.commit, Addresses: d.addrs}
		if err := s.insertRollback(ctx, tx, repo, run, withCurrentPolicy(repo, d.of), rb, "gantry"); err != nil {
			return err
		}
	}
	return nil
}

// ResolveRollback is an operator's choice for a failed rollback:
// RollbackChoiceRetry plans the destroy again (the old votes set aside,
// the voters asked again), RollbackChoiceResolved marks it resolved (the
// operator dealt with what is left) so the rollbacks waiting for it go on
// and the run can end. The choice is logged with who made it and why.
func (s *Service) ResolveRollback(ctx context.Context, executionID, choice, actor, reason string) error {
	if choice != RollbackChoiceRetry && choice != RollbackChoiceResolved {
		return apperr.Field("choice", fmt.Sprintf("must be %s or %s", RollbackChoiceRetry, RollbackChoiceResolved))
	}
	return s.operatorChoice(ctx, executionID, reason, func(ctx context.Context, tx jobs.Tx, run *models.Run, x *models.Execution, reason string) error {
		if x.RollbackOf == nil {
			return apperr.New(apperr.Conflict, "Execution %s is not a rollback.", x.ExecutionID)
		}
		rb, err := models.RollbackByExecution(ctx, tx, x.ID)
		if err != nil {
			return err
		}
		if x.Status != models.ExecFailed || rb.Resolved() {
			state := describe(x)
			if rb.Resolved() {
				state = "marked resolved by " + rb.ResolvedBy
			}
			return apperr.New(apperr.Conflict, "Rollback %s is %s: only a failed rollback waits for this choice.", x.ExecutionID, state)
		}
		if run.Ended() {
			return apperr.New(apperr.Conflict, "Run %d is %s: what its rollbacks left is an operator's to deal with by hand.", run.ID, run.Status)
		}
		if choice == RollbackChoiceResolved {
			rb.ResolvedBy, rb.ResolvedReason, rb.ResolvedAt = actor, reason, ptr(s.now())
			if err := models.UpdateRollback(ctx, tx, rb, "resolved_by", "resolved_reason", "resolved_at"); err != nil {
				return err
			}
			if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventRollbackResolved, actor,
				map[string]any{"cfg_path": x.CfgPath, "reason": reason, "remaining": rb.Remaining}); err != nil {
				return err
			}
			if err := s.rollbackStatus(ctx, tx, run, x, github.StateSuccess, "rollback marked resolved by "+actor); err != nil {
				return err
			}
			return s.advance(ctx, tx, run, actor)
		}
		// What was left stays recorded until the retry's apply says otherwise.
		retried, err := s.logged(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventRollbackRetried, actor,
			map[string]any{"cfg_path": x.CfgPath, "reason": reason, "error": x.Error})
		if err != nil {
			return err
		}
		x.Status, x.Error, x.FinishedAt, x.ReadyAt, x.StartedAt = models.ExecRunning, "", nil, ptr(s.now()), ptr(s.now())
		if err := models.UpdateExecution(ctx, tx, x, "status", "error", "finished_at", "ready_at", "started_at"); err != nil {
			return err
		}
		if err := s.rollbackStatus(ctx, tx, run, x, github.StatePending, "rollback retried by "+actor+": planning the destroy again"); err != nil {
			return err
		}
		return s.planAgain(ctx, tx, run, x, actor, retried)
	})
}

// plural is "1 resource", "2 resources".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// rollbackSummary marks the vote on a rollback execution as such, on the
// vote pages, /approvals and in the vote request mail.
func rollbackSummary(sum approvals.Summary, run *models.Run, x *models.Execution) approvals.Summary {
	sum.Label = "Infrastructure rollback vote"
	sum.Title = "Roll back " + x.CfgPath
	sum.Detail = "rollback · account " + x.AccountName
	sum.Approved = "the rollback is being applied: the resources of new providers are being destroyed."
	sum.Rejected = "the rollback failed and waits for an operator."
	sum.Facts = append([]approvals.Fact{{Label: "Rollback", Value: "destroys the resources of providers this unit's deployment introduced"}}, sum.Facts...)
	var b strings.Builder
	fmt.Fprintf(&b, "ROLLBACK. Your vote is needed before Gantry destroys the resources of new providers that a deployment of %s introduced: ", x.CfgPath)
	fmt.Fprintf(&b, "its run failed, or a later merge deleted the unit.\n\n")
	fmt.Fprintf(&b, "Repository:  %s (pull request #%d: %s)\n", run.Repository, run.PRNumber, run.PRTitle)
	fmt.Fprintf(&b, "Unit:        %s\nAccount:     %s\nExecution:   %s\n", x.CfgPath, x.AccountName, x.ExecutionID)
	fmt.Fprintf(&b, "Destroys:    %s\n", strings.Join(targets(x.PlanCommand), ", "))
	fmt.Fprintf(&b, "Approvals:   at least %d of %d voters apply it; %d rejection(s) stop it.\n\n", x.MinApprovalCount, len(x.Voters), x.MinRejectionCount)
	if summary := planSummary(x.PlanOutput); summary != "" {
		fmt.Fprintf(&b, "%s\n\n", summary)
	}
	sum.Mail = approvals.Mail{
		Subject: fmt.Sprintf("[Gantry] Vote to roll back %s (%s) for %s#%d", x.CfgPath, x.AccountName, run.Repository, run.PRNumber),
		Body:    b.String(),
		Review:  "Review the destroy plan and vote",
	}
	return sum
}

// targets are the addresses a rollback's plan command targets.
func targets(plan []string) []string {
	var out []string
	for _, a := range plan {
		if t, ok := strings.CutPrefix(a, "-target="); ok {
			out = append(out, t)
		}
	}
	return out
}

// rollbackLockStatus says so in the merge-lock status of the pull requests
// kept waiting while the lock's run rolls back.
func rollbackLockStatus(ctx context.Context, db bun.IDB, lock *models.MergeLock, st *github.Status) error {
	rolling, err := models.RunRollingBack(ctx, db, lock.RunID)
	if err != nil || !rolling {
		return err
	}
	st.Description = fmt.Sprintf("locked by run %d: it rolls back resources of new providers", lock.RunID)
	if lock.PRNumber != 0 {
		st.Description = fmt.Sprintf("locked by #%d: its deployment is rolling back", lock.PRNumber)
	}
	return nil
}
