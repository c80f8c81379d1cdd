package web

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/models"
	infraview "github.com/gantryhq/gantry/views/pages/infra"
)

// The pages of the infrastructure area (seed 000): repositories with their
// open pull requests and recent runs, every run, one run with the picture
// of its execution graph, one execution with its plan, votes and apply
// (output followed live), a pull request's plans and one plan. The voting
// link and /approvals are in approvals.go; the JSON in infra_api.go.

const (
	infraRecentRuns   = 10 // runs on /infra
	infraRunsPageSize = 50 // runs per page of /infra/runs
	infraPullRuns     = 20 // runs on a pull request's page
	infraLogSize      = 50 // log entries on a run's, execution's or pull request's page
)

var infraRunStatuses = []string{models.RunQueued, models.RunScanning, models.RunRunning, models.RunSucceeded, models.RunFailed}

// infraPage is /infra.
func (s *infraHandlers) infraPage(c echo.Context) error {
	o, err := models.LoadInfraOverview(c.Request().Context(), s.DB.Bun, infraRecentRuns)
	if err != nil {
		return err
	}
	v := infraview.IndexView{Setup: infraview.Setup{Example: infraview.ExampleConfig, WebhookURL: s.webhookURL()}}
	for i := range o.Repositories {
		v.Repos = append(v.Repos, infraRepoView(&o.Repositories[i]))
	}
	for i := range o.PullRequests {
		v.Pulls = append(v.Pulls, infraPullRow(&o.PullRequests[i]))
	}
	v.Runs, v.MoreRuns = infraRunRows(o.Runs.Runs), o.Runs.More
	if v.Drift, err = s.infraDriftSection(c.Request().Context(), o.Repositories, principalOf(c).User.Role.Includes(models.RoleOperator)); err != nil {
		return err
	}
	return s.render(c, http.StatusOK, infraview.Index(v))
}

func (s *infraHandlers) webhookURL() string {
	return strings.TrimRight(s.Config.BaseURL.String(), "/") + "/webhooks/github"
}

func infraRepoView(r *models.RepositoryWithLock) infraview.Repo {
	scan := "graph scan"
	if r.Scan == "plan" {
		scan = "plan scan"
	}
	v := infraview.Repo{
		Name: r.Name, URL: r.URL, Trunk: r.Trunk, Scan: scan, GitHub: r.GitHubFullName,
		Lock: infraLockView(r.MergeLock, 0), RunsURL: "/infra/runs?" + url.Values{"repository": {r.Name}}.Encode(),
	}
	for _, a := range r.Accounts {
		v.Accounts = append(v.Accounts, infraview.Account{
			Name: a.Name, Path: a.Path, DependsOn: strings.Join(a.DependsOn, ", "), Voters: a.Voters,
			Thresholds: thresholds(a.MinApprovals, a.MinRejections, len(a.Voters)),
			PlanRole:   a.PlanRole, ApplyRole: a.ApplyRole,
		})
	}
	return v
}

// infraLockView describes a repository's merge lock; self is the run whose page
// it is on (0 elsewhere).
func infraLockView(lock *models.MergeLock, self int64) infraview.Lock {
	if lock == nil {
		return infraview.Lock{Text: "free", Tone: "ok", Note: "No deployment is in progress: pull requests may merge."}
	}
	since := clock(lock.LockedAt) + " UTC"
	if lock.RunID == self {
		text := fmt.Sprintf("held by this run (#%d)", lock.PRNumber)
		if lock.PRNumber == 0 { // a reconcile run: no pull request
			text = "held by this run"
		}
		return infraview.Lock{Held: true, Text: text,
			Note: "Since " + since + ". Other pull requests get a failing merge-lock status until this run ends."}
	}
	if lock.PRNumber == 0 {
		return infraview.Lock{Held: true, Text: fmt.Sprintf("locked by run %d", lock.RunID), Tone: "warn", URL: pageurl.Run(lock.RunID),
			Note: fmt.Sprintf("Since %s: run %d is reconciling a drifted unit; merges wait for it.", since, lock.RunID)}
	}
	return infraview.Lock{Held: true, Text: fmt.Sprintf("locked by #%d", lock.PRNumber), Tone: "warn", URL: pageurl.Run(lock.RunID),
		Note: fmt.Sprintf("Since %s: run %d is deploying pull request #%d; other merges wait for it.", since, lock.RunID, lock.PRNumber)}
}

func infraPullRow(pr *models.PullRequestWithPlans) infraview.PullRow {
	plans := pr.Plans
	row := infraview.PullRow{
		Repository: pr.Repository, Number: "#" + strconv.Itoa(pr.Number), Title: pr.Title, Author: pr.Author,
		URL: pageurl.Pull(pr.Repository, pr.Number), GitHubURL: pr.HTMLURL, HeadRef: pr.HeadRef, Head: shortSHA(pr.HeadSHA),
		PlanError: pr.PlanError, Updated: clock(pr.UpdatedAt), UpdatedISO: iso(pr.UpdatedAt),
	}
	counts := map[string]int{}
	for i := range plans {
		st := infraPlanState(&plans[i])
		counts[st.Text]++
		row.Plans = append(row.Plans, infraview.PlanChip{Path: plans[i].Path, State: st, URL: pageurl.Plan(plans[i].ID)})
	}
	switch {
	case len(plans) == 0 && pr.PlanError == "":
		row.Summary = "No unit planned at this head yet (or it changes no unit)."
	case len(plans) > 0:
		var parts []string
		for _, label := range []string{"changes", "no changes", "running", "queued", "failed", "canceled"} {
			if counts[label] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", counts[label], label))
			}
		}
		row.Summary = plural(len(plans), "unit", "units") + ": " + strings.Join(parts, ", ")
	}
	return row
}

// infraRunRows turns runs into listing rows.
func infraRunRows(runs []models.RunListing) []infraview.RunRow {
	rows := make([]infraview.RunRow, len(runs))
	for i := range runs {
		rows[i] = infraRunRow(&runs[i])
	}
	return rows
}

func infraRunRow(r *models.RunListing) infraview.RunRow {
	row := infraview.RunRow{
		ID: r.ID, Title: infraRunTitle(r.ID), URL: pageurl.Run(r.ID), Repository: r.Repository,
		PR: infraRunPR(&r.Run), PRURL: infraRunPRURL(&r.Run), PRTitle: r.PRTitle,
		MergeCommit: shortSHA(r.MergeCommit), State: infraRunState(r.Status), Counts: infraExecCounts(r.ExecutionCounts),
	}
	row.Started, row.StartedISO = clockPtr(r.StartedAt)
	row.Finished, row.FinishedISO = clockPtr(r.FinishedAt)
	return row
}

// infraExecCounts orders counts of executions by status as the legend does.
func infraExecCounts(counts map[string]int) []infraview.Count {
	var out []infraview.Count
	for _, status := range []string{models.ExecWaiting, models.ExecRunning, models.ExecSucceeded, models.ExecFailed, models.ExecAborted} {
		if counts[status] > 0 {
			out = append(out, infraview.Count{State: infraExecState(&models.Execution{Status: status}), N: counts[status]})
		}
	}
	return out
}

// runsPage is /infra/runs: every run, filtered and paged.
func (s *infraHandlers) runsPage(c echo.Context) error {
	ctx := c.Request().Context()
	db := s.DB.Bun
	q := c.QueryParams()
	form := infraview.RunsFilter{Repository: strings.TrimSpace(q.Get("repository")), Status: q.Get("status"), PR: strings.TrimSpace(q.Get("pr"))}
	f := models.RunFilter{Repository: form.Repository, Status: form.Status, Limit: infraRunsPageSize}
	bad := apperr.Fields{}
	if form.Status != "" && !slices.Contains(infraRunStatuses, form.Status) {
		bad.Add("status", "must be one of "+strings.Join(infraRunStatuses, ", "))
	}
	if form.PR != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(form.PR, "#"))
		if err != nil || n <= 0 {
			bad.Add("pr", "must be a pull request number")
		}
		f.PRNumber = n
	}
	if v := q.Get("before"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			bad.Add("before", "must be a run id")
		}
		f.BeforeID = id
	}
	if err := bad.Err(); err != nil {
		return err
	}
	page, err := models.ListRunPage(ctx, db, f)
	if err != nil {
		return err
	}
	names, err := models.RepositoryNames(ctx, db)
	if err != nil {
		return err
	}

	v := infraview.RunsView{Filter: form, Filtered: form != (infraview.RunsFilter{}), NoRepository: len(names) == 0}
	if form.Repository != "" {
		names = append(names, form.Repository)
	}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		v.Repositories = append(v.Repositories, infraview.Option{Value: name, Label: name, Selected: name == form.Repository})
	}
	v.Statuses = append(v.Statuses, infraview.Option{Value: "", Label: "any status", Selected: form.Status == ""})
	for _, st := range infraRunStatuses {
		v.Statuses = append(v.Statuses, infraview.Option{Value: st, Label: st, Selected: st == form.Status})
	}
	runs := page.Runs
	if page.More {
		v.OlderURL = "/infra/runs?" + withParam(q, "before", strconv.FormatInt(runs[len(runs)-1].ID, 10))
	}
	if f.BeforeID > 0 {
		v.NewerURL = "/infra/runs?" + withParam(q, "before", "")
	}
	v.Rows = infraRunRows(runs)
	v.Summary = infraRunsSummary(form, len(runs), f.BeforeID > 0 || page.More)
	return s.render(c, http.StatusOK, infraview.Runs(v))
}

func infraRunsSummary(f infraview.RunsFilter, n int, paged bool) string {
	count := plural(n, "run", "runs")
	if paged {
		count += " on this page"
	}
	var what []string
	if f.Repository != "" {
		what = append(what, "of "+f.Repository)
	}
	if f.PR != "" {
		what = append(what, "of pull request #"+strings.TrimPrefix(f.PR, "#"))
	}
	if f.Status != "" {
		what = append(what, f.Status)
	}
	if len(what) == 0 {
		return count + ", newest first."
	}
	return count + " " + strings.Join(what, ", ") + ", newest first."
}

// runPage is one run: what it deploys, its merge lock, the picture of its
// executions, their table and the run's log. It refreshes itself until
// the run is over.
func (s *infraHandlers) runPage(c echo.Context) error {
	ctx := c.Request().Context()
	db := s.DB.Bun
	run, err := s.runParam(c)
	if err != nil {
		return err
	}
	xs, err := models.ExecutionsOfRun(ctx, db, run.ID)
	if err != nil {
		return err
	}
	lock, err := models.MergeLockOf(ctx, db, run.Repository)
	if err != nil {
		return err
	}
	entries, err := models.ListLog(ctx, db, models.LogFilter{Deployment: infra.DeploymentID(run), Limit: infraLogSize})
	if err != nil {
		return err
	}

	v := infraview.RunView{
		ID: run.ID, Title: infraRunTitle(run.ID), Repository: run.Repository,
		PR: infraRunPR(run), PRURL: infraRunPRURL(run), PRTitle: run.PRTitle,
		State: infraRunState(run.Status), Live: !run.Ended(), Error: run.Error, Deleted: run.DeletedUnits,
		Lock: infraRunLock(run, lock), Log: logRows(entries),
		LogURL: "/log?" + url.Values{"deployment": {infra.DeploymentID(run)}}.Encode(),
	}
	v.Fields = infraRunFields(run)
	if lock != nil && lock.RunID == run.ID && !run.Ended() {
		beats, err := s.Infra.ExecutionHeartbeats(ctx, xs)
		if err != nil {
			return err
		}
		v.Lock.Why = infraLockWhy(run, xs, beats, s.Infra.QuietAfter())
	}
	if principalOf(c).User.Role.Includes(models.RoleOperator) && (run.Status == models.RunQueued || run.Status == models.RunRunning) {
		v.AbortURL = pageurl.Run(run.ID) + "/abort"
	}
	if v.Rollback, err = infraRollbackSection(ctx, db, run, xs, principalOf(c).User); err != nil { // infra_rollback.go
		return err
	}
	if lock != nil && lock.RunID == run.ID && !run.Ended() {
		v.Lock.Why = append(v.Lock.Why, heldRollbacksWhy(v.Rollback)...)
	}
	for i := range xs {
		if xs[i].Status == models.ExecRunning && xs[i].Step == models.StepInterrupted {
			v.Interrupted = append(v.Interrupted, infraInterruptedView(&xs[i], principalOf(c).User))
		}
	}
	ripples, changes, err := models.RipplesOfRun(ctx, db, run.ID)
	if err != nil {
		return err
	}
	if xs, _ = splitRollbacks(xs); len(xs) > 0 { // rollbacks are in their own section
		rs := newInfraRipples(xs, ripples, changes)
		v.Ripples = rs.rows(xs)
		v.Graph = infraRunGraph(xs)
		for i := range xs {
			row := infraExecRow(&xs[i])
			rs.row(&row, &xs[i])
			v.Executions = append(v.Executions, row)
		}
	}
	return s.render(c, http.StatusOK, infraview.Run(v))
}

// infraInterruptedChoices are an operator's choices for an interrupted
// apply, by the path of their action under the execution.
var infraInterruptedChoices = []struct {
	Path, Choice, Label, Hint, Class, Confirm, Done string
}{
	{"mark-failed", infra.ChoiceFailed, "Mark as failed", "it failed: what depends on it is aborted", "danger",
		"Mark this apply as failed? What depends on it is aborted.", "Marked as failed: what depends on it is aborted."},
	{"mark-applied", infra.ChoiceApplied, "Mark as applied", "it was applied in full: what depends on it starts", "",
		"Mark this apply as applied? What depends on it starts.", "Marked as applied: what depends on it starts."},
	{"plan-again", infra.ChoicePlanAgain, "Plan again", "plan afresh at the merge commit; the voters are asked again", "",
		"Plan again? The old votes are set aside and the voters are asked again.", "Planning again: the voters are asked again once the plan is ready."},
}

// infraInterruptedView explains an interrupted apply; operators get the
// choices, anyone else is told who chooses.
func infraInterruptedView(x *models.Execution, user *models.User) infraview.Interrupted {
	v := infraview.Interrupted{Unit: x.CfgPath, URL: pageurl.Execution(x.ExecutionID), Explanation: infra.InterruptedExplanation}
	if !user.Role.Includes(models.RoleOperator) {
		v.Note = "An operator chooses: mark it as failed, mark it as applied, or plan it again for a new vote. The run waits meanwhile."
		return v
	}
	for _, c := range infraInterruptedChoices {
		v.Choices = append(v.Choices, infraview.Choice{Action: v.URL + "/" + c.Path, Label: c.Label, Hint: c.Hint,
			Class: c.Class, TestID: c.Path, Confirm: c.Confirm})
	}
	return v
}

// executionChoiceForm answers an operator's choice on an execution's page
// (an interrupted apply, a failed rollback): resolve carries it out, and the
// page says done, or why it was refused.
func (s *infraHandlers) executionChoiceForm(choice, done string, resolve func(ctx context.Context, executionID, choice, actor, reason string) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		x, err := s.executionParam(c)
		if err != nil {
			return err
		}
		to := pageurl.Execution(x.ExecutionID)
		err = resolve(c.Request().Context(), x.ExecutionID, choice, principalOf(c).Actor(), c.FormValue("reason"))
		if err != nil {
			var ae *apperr.Error
			if errors.As(err, &ae) && ae.Code != apperr.Internal {
				return s.redirectWithFlash(c, to, false, ae.Error())
			}
			return err
		}
		return s.redirectWithFlash(c, to, true, done)
	}
}

// abortRunForm is an operator aborting a run from its page.
func (s *infraHandlers) abortRunForm(c echo.Context) error {
	run, err := s.runParam(c)
	if err != nil {
		return err
	}
	err = s.Infra.AbortRun(c.Request().Context(), run.ID, principalOf(c).Actor(), c.FormValue("reason"))
	if err != nil {
		var ae *apperr.Error
		if errors.As(err, &ae) && ae.Code != apperr.Internal {
			return s.redirectWithFlash(c, pageurl.Run(run.ID), false, ae.Error())
		}
		return err
	}
	return s.redirectWithFlash(c, pageurl.Run(run.ID), true, fmt.Sprintf("Aborted run %d: the merge lock is released.", run.ID))
}

// lockHolder names the run holding a merge lock and what it deploys.
func lockHolder(lock *models.MergeLock) string {
	if lock.PRNumber == 0 { // a reconcile run: no pull request
		return fmt.Sprintf("run %d (reconciling a drifted unit)", lock.RunID)
	}
	return fmt.Sprintf("run %d (pull request #%d)", lock.RunID, lock.PRNumber)
}

// infraRunLock says what the repository's merge lock means for this run.
func infraRunLock(run *models.Run, lock *models.MergeLock) infraview.Lock {
	l := infraLockView(lock, run.ID)
	switch {
	case run.Status == models.RunQueued && lock != nil && lock.RunID != run.ID:
		l.Note = fmt.Sprintf("This run waits for it: %s holds it since %s UTC, and this one starts when that one ends.", lockHolder(lock), clock(lock.LockedAt))
	case run.Ended() && lock == nil:
		l.Note = "This run released it when it ended; no deployment is in progress now."
	case run.Ended():
		// The badge is about this run, which holds nothing now; the run that
		// took the lock since is named in the note.
		l = infraview.Lock{Held: true, Text: "released by this run", Tone: "muted",
			Note: fmt.Sprintf("This run released it when it ended. Since %s UTC %s holds it; other merges wait for it.",
				clock(lock.LockedAt), lockHolder(lock))}
	}
	return l
}

// infraLockWhy says what keeps a run holding its repository's merge lock:
// the scan, or each execution under way — planning or applying since when,
// with its worker's last heartbeat; waiting for votes; or interrupted,
// which only an operator's choice moves on.
func infraLockWhy(run *models.Run, xs []models.Execution, beats map[int64]models.JobHeartbeat, quiet time.Duration) []infraview.LockWhy {
	if run.Status == models.RunScanning {
		return []infraview.LockWhy{{Unit: "the merge", Step: "scanning", Tone: "warn", Text: "The run is working out which units the merge changed."}}
	}
	var out []infraview.LockWhy
	for i := range xs {
		x := &xs[i]
		if x.Status != models.ExecRunning {
			continue
		}
		w := infraview.LockWhy{Unit: x.CfgPath, URL: pageurl.Execution(x.ExecutionID), Step: x.Step, Tone: "warn"}
		if x.RollbackOf != nil {
			w.Unit = "rollback of " + x.CfgPath
		}
		switch x.Step {
		case models.StepInterrupted:
			w.Tone, w.Text = "bad", "The apply was interrupted (its worker stopped) and the state is unknown: an operator chooses on its page — mark it failed or applied, or plan it again."
		case models.StepVoting:
			w.Text = fmt.Sprintf("Waits for votes: %d approval(s) apply it, %d rejection(s) stop it.", x.MinApprovalCount, x.MinRejectionCount)
		case models.StepPlanning, models.StepApplying:
			since, doing, queued := x.PlanStartedAt, "Planning", "Queued to plan"
			if x.Step == models.StepApplying {
				since, doing, queued = x.ApplyStartedAt, "Applying", "Queued to apply"
			}
			w.Text = queued
			if since != nil {
				w.Text = fmt.Sprintf("%s since %s UTC", doing, clock(*since))
			}
			if hb, ok := beats[x.ID]; ok {
				w.Text += fmt.Sprintf("; its worker %s last reported at %s UTC.", hb.Worker, hb.BeatAt.UTC().Format(time.TimeOnly))
			} else {
				w.Text += "; no worker reports on it at the moment."
			}
			w.Text += fmt.Sprintf(" A worker silent for %s is taken for dead by the next sweep (each minute): an apply under way is then interrupted for an operator, a plan runs again.", quiet)
		}
		out = append(out, w)
	}
	return out
}

func infraRunFields(run *models.Run) []infraview.Field {
	var out []infraview.Field
	add := func(label, value string, mono bool, testID string) {
		if value != "" {
			out = append(out, infraview.Field{Label: label, Value: value, Mono: mono, TestID: testID})
		}
	}
	add("Repository", run.Repository, false, "field-repository")
	if run.ReconcileCheckID != nil {
		out = append(out, infraReconcileRunFields(run)...)
	} else {
		add("Pull request", fmt.Sprintf("#%d %s", run.PRNumber, run.PRTitle), false, "field-pr")
		add("Merged", run.HeadRef+" → "+run.BaseRef, true, "field-refs")
		add("Merge commit", run.MergeCommit, true, "field-merge-commit")
		add("Compared with", run.BaseCommit, true, "field-base-commit")
		add("Head commit", run.HeadSHA, true, "field-head-commit")
		scan := "graph: the units whose files changed, and everything that depends on them"
		if run.Scan == "plan" {
			scan = "plan: every unit planned, those with changes collected"
		}
		add("Scan", scan, false, "field-scan")
	}
	add("Queued", clock(run.CreatedAt)+" UTC", false, "field-created")
	if run.StartedAt != nil {
		add("Started", clock(*run.StartedAt)+" UTC", false, "field-started")
	}
	if run.FinishedAt != nil {
		took := ""
		if run.StartedAt != nil {
			took = ", after " + shortDuration(run.FinishedAt.Sub(*run.StartedAt))
		}
		add("Finished", clock(*run.FinishedAt)+" UTC"+took, false, "field-finished")
	}
	return out
}

func infraExecRow(x *models.Execution) infraview.ExecRow {
	row := infraview.ExecRow{
		ExecutionID: x.ExecutionID, URL: pageurl.Execution(x.ExecutionID), Unit: x.CfgPath, Account: x.AccountName,
		State: infraExecState(x), Deps: infraAfterList(x), Error: truncate(x.Error, 160),
	}
	row.Started, row.StartedISO = clockPtr(x.StartedAt)
	row.Finished, row.FinishedISO = clockPtr(x.FinishedAt)
	if x.StartedAt != nil && x.FinishedAt != nil {
		row.Duration = shortDuration(x.FinishedAt.Sub(*x.StartedAt))
	}
	return row
}

// infraAfterList is what an execution waits for, in words.
func infraAfterList(x *models.Execution) []string {
	parts := slices.Clone(x.CfgDeps)
	for _, a := range x.AccountDeps {
		parts = append(parts, "account "+a)
	}
	return parts
}

// executionPage is one execution: the seed's fields, what it waits for,
// its plan and apply output (followed live while a step runs), its votes
// with a form for a voter, and its log entries.
func (s *infraHandlers) executionPage(c echo.Context) error {
	ctx := c.Request().Context()
	db := s.DB.Bun
	x, err := s.executionParam(c)
	if err != nil {
		return err
	}
	run, err := models.RunByID(ctx, db, x.RunID)
	if err != nil {
		return err
	}
	siblings, err := models.ExecutionsOfRun(ctx, db, run.ID)
	if err != nil {
		return err
	}
	votes, err := s.Infra.ExecutionVotes(ctx, x)
	if err != nil {
		return err
	}
	entries, err := models.ListLog(ctx, db, models.LogFilter{Target: infra.ExecutionTarget(x.ExecutionID), Limit: infraLogSize})
	if err != nil {
		return err
	}

	self := pageurl.Execution(x.ExecutionID)
	v := infraview.ExecutionView{
		ExecutionID: x.ExecutionID, Unit: x.CfgPath, Account: x.AccountName, Repository: run.Repository,
		RunURL: pageurl.Run(run.ID), RunTitle: infraRunTitle(run.ID), PR: infraRunPR(run), PRURL: infraRunPRURL(run),
		State: infraExecState(x), Summary: infra.PlanSummary(x.PlanOutput), Waiting: x.Status == models.ExecWaiting, Error: x.Error,
		Fields: infraExecutionFields(x, run, votes, siblings), Deps: infraExecutionDeps(x, siblings),
		Plan: infraExecutionOutput(x, models.StepPlanning), Apply: infraExecutionOutput(x, models.StepApplying),
		Votes: infraVotesView(x, votes),
		Log:   logRows(entries), LogURL: "/log?" + url.Values{"target": {infra.ExecutionTarget(x.ExecutionID)}}.Encode(),
	}
	if x.Status == models.ExecRunning && x.Step == models.StepInterrupted {
		interrupted := infraInterruptedView(x, principalOf(c).User)
		v.Interrupted = &interrupted
	}
	if v.Rollback, v.NewResources, err = infraExecutionRollbackParts(ctx, db, x, siblings, principalOf(c).User); err != nil { // infra_rollback.go
		return err
	}
	if v.Rollback != nil {
		v.Unit = "Rollback of " + x.CfgPath
		markRollbackFields(v.Fields, v.Rollback)
	}
	ripples, changes, err := models.RipplesOfRun(ctx, db, run.ID)
	if err != nil {
		return err
	}
	v.Ripple = newInfraRipples(siblings, ripples, changes).reason(x)
	infraVoteFormFor(&v.Votes, x, principalOf(c).User, self+"/vote")
	return s.render(c, http.StatusOK, infraview.Execution(v))
}

func infraExecutionFields(x *models.Execution, run *models.Run, votes infra.ExecutionVotes, siblings []models.Execution) []infraview.Field {
	var out []infraview.Field
	add := func(f infraview.Field) {
		if f.Value != "" || len(f.Links) > 0 || len(f.Items) > 0 {
			out = append(out, f)
		}
	}
	text := func(label, value, testID string) infraview.Field {
		return infraview.Field{Label: label, Value: value, TestID: testID}
	}
	mono := func(label, value, testID string) infraview.Field {
		return infraview.Field{Label: label, Value: value, Mono: true, TestID: testID}
	}
	add(mono("execution_id", x.ExecutionID, "field-execution-id"))
	add(infraview.Field{Label: "pr", Links: []infraview.Link{{Text: fmt.Sprintf("#%d %s", run.PRNumber, run.PRTitle), URL: pageurl.Pull(run.Repository, run.PRNumber)}}, TestID: "field-pr"})
	add(mono("commit", run.MergeCommit, "field-commit"))
	add(mono("base_ref", run.BaseRef, "field-base-ref"))
	add(mono("head_ref", run.HeadRef, "field-head-ref"))
	add(mono("cfg_path", x.CfgPath, "field-cfg-path"))
	deps := infraview.Field{Label: "cfg_deps", TestID: "field-cfg-deps", Value: "none in this run"}
	for _, d := range x.CfgDeps {
		if i := slices.IndexFunc(siblings, func(s models.Execution) bool { return s.CfgPath == d }); i >= 0 {
			deps.Links = append(deps.Links, infraview.Link{Text: d, URL: pageurl.Execution(siblings[i].ExecutionID)})
		}
	}
	add(deps)
	add(text("account_name", x.AccountName, "field-account-name"))
	add(mono("account_path", x.AccountPath, "field-account-path"))
	accDeps := strings.Join(x.AccountDeps, ", ")
	if accDeps == "" {
		accDeps = "none"
	}
	add(text("account_deps", accDeps, "field-account-deps"))
	if len(x.InitCommand) > 0 {
		add(mono("init_command", argvText(x.InitCommand), "field-init-command"))
	}
	add(mono("plan_command", argvText(x.PlanCommand), "field-plan-command"))
	add(mono("apply_command", argvText(x.ApplyCommand), "field-apply-command"))
	add(mono("plan_role_arn", orNone(x.PlanRoleARN, "Gantry's own credentials"), "field-plan-role"))
	add(mono("apply_role_arn", orNone(x.ApplyRoleARN, "Gantry's own credentials"), "field-apply-role"))
	add(infraview.Field{Label: "voters", Items: x.Voters, TestID: "field-voters"})
	add(text("min_approval_count", strconv.Itoa(x.MinApprovalCount), "field-min-approvals"))
	add(text("min_rejection_count", strconv.Itoa(x.MinRejectionCount), "field-min-rejections"))
	add(text("approval_voters", orNone(strings.Join(votes.Approvers, ", "), "none yet"), "field-approval-voters"))
	add(text("rejection_voters", orNone(strings.Join(votes.Rejecters, ", "), "none yet"), "field-rejection-voters"))
	add(text("status", infraExecState(x).Text, "field-status"))
	if x.ReadyAt != nil {
		add(text("ready", clock(*x.ReadyAt)+" UTC (its dependencies were done)", "field-ready"))
	}
	if x.StartedAt != nil {
		add(text("started", clock(*x.StartedAt)+" UTC", "field-started"))
	}
	if x.PlanStartedAt != nil {
		add(text("plan started", clock(*x.PlanStartedAt)+" UTC", "field-plan-started"))
	}
	if x.ApplyStartedAt != nil {
		// An interrupted apply's operator needs to know since when its
		// outcome is unknown.
		add(text("apply started", clock(*x.ApplyStartedAt)+" UTC", "field-apply-started"))
	}
	if x.FinishedAt != nil {
		took := ""
		if x.StartedAt != nil {
			took = ", after " + shortDuration(x.FinishedAt.Sub(*x.StartedAt))
		}
		add(text("finished", clock(*x.FinishedAt)+" UTC"+took, "field-finished"))
	}
	return out
}

// infraDepsOf lists the executions of the run that x waits for: its unit
// dependencies, and every execution of the accounts its account depends on.
func infraDepsOf(x *models.Execution, siblings []models.Execution) []infraview.Dep {
	var out []infraview.Dep
	for _, d := range x.CfgDeps {
		for i := range siblings {
			if siblings[i].CfgPath == d {
				out = append(out, infraview.Dep{Path: d, URL: pageurl.Execution(siblings[i].ExecutionID), State: infraExecState(&siblings[i]), Why: "unit dependency"})
			}
		}
	}
	for _, acc := range x.AccountDeps {
		for i := range siblings {
			if siblings[i].AccountName == acc && siblings[i].ID != x.ID {
				out = append(out, infraview.Dep{Path: siblings[i].CfgPath, URL: pageurl.Execution(siblings[i].ExecutionID), State: infraExecState(&siblings[i]),
					Why: fmt.Sprintf("account %s waits for %s", x.AccountName, acc)})
			}
		}
	}
	return out
}

// infraExecutionOutput is one step's output, followed live while that step runs.
func infraExecutionOutput(x *models.Execution, step string) infraview.Output {
	o := infraview.Output{TestID: "plan-output", Text: x.PlanOutput}
	if step == models.StepApplying {
		o = infraview.Output{TestID: "apply-output", Text: x.ApplyOutput}
	}
	o.Live = x.Status == models.ExecRunning && x.Step == step
	o.LiveLabel = step + ", following the output"
	o.TailURL = pageurl.Execution(x.ExecutionID) + "/output?" + url.Values{"step": {step}}.Encode()
	o.Offset = strconv.Itoa(utf8.RuneCountInString(o.Text))
	switch step {
	case models.StepPlanning:
		switch {
		case x.Status == models.ExecWaiting:
			o.Empty = "Not planned yet: it is planned at the merge commit once everything it waits for has succeeded, so the plan reads their new outputs."
		case x.Status == models.ExecAborted && x.PlanStartedAt == nil:
			o.Empty = "Never planned: something it waited for failed, so it was aborted."
		case o.Live:
			o.Empty = "Planning; the output appears here as terraform writes it."
		default:
			o.Empty = "The plan wrote no output."
		}
		if x.PlanExitCode != nil {
			o.Note = fmt.Sprintf("Exit code %d", *x.PlanExitCode)
			if x.HasChanges != nil && *x.HasChanges {
				o.Note += ": changes to apply."
			} else if x.HasChanges != nil {
				o.Note += ": no changes, so nothing to vote on or apply."
			}
		}
	case models.StepApplying:
		switch {
		case o.Live:
			o.Empty = "Applying the approved plan; the output appears here as terraform writes it."
		case x.Step == models.StepInterrupted && x.Status == models.ExecRunning:
			o.Empty = "The interrupted apply wrote no output before it stopped."
		case x.Status == models.ExecRunning || x.Status == models.ExecWaiting:
			o.Empty = "Not applied yet: the saved plan above is applied, exactly as planned, once enough voters approve it."
		case x.ApplyExitCode == nil:
			o.Empty = "Nothing was applied."
		default:
			o.Empty = "The apply wrote no output."
		}
		if x.ApplyExitCode != nil {
			o.Note = fmt.Sprintf("Exit code %d.", *x.ApplyExitCode)
		}
	}
	return o
}

// infraVotesView is an execution's approval as the execution page and the
// voting link show it.
func infraVotesView(x *models.Execution, votes infra.ExecutionVotes) infraview.Votes {
	a, res := votes.Approval, votes.Result
	if a == nil {
		v := infraview.Votes{Tally: fmt.Sprintf("At least %d of %d voters must approve before it is applied; %s.",
			x.MinApprovalCount, len(x.Voters), rejectionsStop(x.MinRejectionCount))}
		switch {
		case x.Status == models.ExecWaiting || x.Status == models.ExecRunning:
			v.Note = "Votes open once its plan is ready; each voter then gets an email with a voting link."
		case x.Status == models.ExecSucceeded:
			v.Note = "No vote was needed: the plan had no changes."
		case x.Status == models.ExecAborted:
			v.Note = "No vote: it was aborted before its plan was ready."
		default:
			v.Note = "No vote: it failed before its plan was ready."
		}
		return v
	}
	v := infraview.Votes{
		Open:  a.State == models.ApprovalPending && x.Status == models.ExecRunning && x.Step == models.StepVoting,
		Tally: fmt.Sprintf("%d of %d approvals · %d of %d rejections", res.Approvals, a.MinApprovals, res.Rejections, a.MinRejections),
	}
	switch a.State {
	case models.ApprovalApproved:
		v.Outcome, v.OutcomeTone = "approved", "ok"
		v.Note = "Approved: votes are closed and the plan was handed on to apply."
	case models.ApprovalRejected:
		v.Outcome, v.OutcomeTone = "rejected", "bad"
		v.Note = "Rejected: votes are closed; the execution failed and what depends on it was aborted."
	default:
		if !v.Open {
			v.Note = "Votes are closed: the execution ended before enough voters agreed."
		}
	}
	v.Waiting = res.Waiting
	v.Rows = voteRows(votes.Votes)
	return v
}

// infraVoteFormFor adds the dashboard's vote form for user, or says why there
// is none.
func infraVoteFormFor(v *infraview.Votes, x *models.Execution, user *models.User, action string) {
	if !v.Open {
		return
	}
	policy := approval.Policy{Voters: x.Voters}
	switch {
	case !policy.IsVoter(user.Email):
		v.Note = fmt.Sprintf("Only the voters of account %s vote on it: %s.", x.AccountName, strings.Join(x.Voters, ", "))
	case !user.Role.Includes(models.RoleApprover):
		v.Note = fmt.Sprintf("You are one of its voters, but your role (%s) cannot vote from the dashboard: use the link in your email, or ask an admin for the approver role.", user.Role)
	default:
		v.Form = &infraview.VoteForm{Action: action, Voter: user.Email, Current: yourVote(v.Rows, user.Email)}
	}
}

// voteForm is a voter's Approve or Reject from the execution page.
func (s *infraHandlers) voteForm(c echo.Context) error {
	x, err := s.executionParam(c)
	if err != nil {
		return err
	}
	user := principalOf(c).User
	if !(approval.Policy{Voters: x.Voters}).IsVoter(user.Email) {
		return apperr.New(apperr.Forbidden, "Only the voters of account %s vote on %s: %s. You are signed in as %s.",
			x.AccountName, x.CfgPath, strings.Join(x.Voters, ", "), user.Email)
	}
	decision := c.FormValue("decision")
	res, err := s.Infra.Vote(c.Request().Context(), infra.VoteInput{
		ExecutionID: x.ExecutionID, Voter: user.Email, Decision: decision,
		Comment: strings.TrimSpace(c.FormValue("comment")), Via: approvals.ViaDashboard,
	})
	to := pageurl.Execution(x.ExecutionID)
	if msg, ok := conflictMessage(err); ok {
		return s.redirectWithFlash(c, to, false, msg)
	}
	if err != nil {
		return err
	}
	sum, _, err := s.Approvals.Describe(c.Request().Context(), infra.ExecutionSubject(x.ExecutionID))
	if err != nil {
		return err
	}
	return s.redirectWithFlash(c, to, true, voteRecorded("your", decision, res, sum))
}

// executionOutputTail is the JSON tail of a step's output from offset on.
func (s *infraHandlers) executionOutputTail(c echo.Context) error {
	step := c.QueryParam("step")
	if step != models.StepPlanning && step != models.StepApplying {
		return apperr.Field("step", "must be planning or applying")
	}
	offset, err := infraOutputOffset(c)
	if err != nil {
		return err
	}
	id := c.Param("execution_id")
	out, err := models.ExecutionOutput(c.Request().Context(), s.DB.Bun, id, step, offset)
	if errors.Is(err, models.ErrNotFound) {
		return apperr.New(apperr.NotFound, "No execution %s.", id)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, infraOutputTailJSON{Text: out.Text, Next: out.Next, Status: out.Status, Step: out.Step, Done: infraStepOver(out.Status, out.Step, step)})
}

// infraStepOver says whether an execution in status and current step is past
// step: its output will not grow any more.
func infraStepOver(status, current, step string) bool {
	rank := map[string]int{models.StepPlanning: 0, models.StepVoting: 1, models.StepApplying: 2, models.StepInterrupted: 3}
	switch status {
	case models.ExecWaiting:
		return false
	case models.ExecRunning:
		return rank[current] > rank[step]
	}
	return true
}

// planOutputTail is the JSON tail of a pull request plan's output.
func (s *infraHandlers) planOutputTail(c echo.Context) error {
	id, err := pathID(c, "plan")
	if err != nil {
		return err
	}
	offset, err := infraOutputOffset(c)
	if err != nil {
		return err
	}
	out, err := models.PRPlanOutput(c.Request().Context(), s.DB.Bun, id, offset)
	if errors.Is(err, models.ErrNotFound) {
		return apperr.New(apperr.NotFound, "No plan %d.", id)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, infraOutputTailJSON{Text: out.Text, Next: out.Next, Status: out.Status, Done: !infraPlanActive(out.Status)})
}

func infraPlanActive(status string) bool {
	return status == models.PlanQueued || status == models.PlanRunning
}

func infraOutputOffset(c echo.Context) (int, error) {
	v := c.QueryParam("offset")
	if v == "" {
		return 0, nil
	}
	// Output is a PostgreSQL text (1 GB at most), read with substr, which
	// takes an int: larger offsets name nothing there can be.
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n >= math.MaxInt32 {
		return 0, apperr.Field("offset", fmt.Sprintf("must be a number of characters from 0 to %d", math.MaxInt32-1))
	}
	return n, nil
}

// pullRequestPage is a pull request: its plans at the head commit (the
// commit statuses link here for scan errors), its runs and its log.
func (s *infraHandlers) pullRequestPage(c echo.Context) error {
	ctx := c.Request().Context()
	db := s.DB.Bun
	repo := c.Param("repo")
	number, err := strconv.Atoi(c.Param("number"))
	if err != nil || number <= 0 {
		return apperr.New(apperr.NotFound, "There is no pull request %q.", c.Param("number"))
	}
	pr, err := models.PullRequestByNumber(ctx, db, repo, number)
	if errors.Is(err, models.ErrNotFound) {
		return apperr.New(apperr.NotFound, "Gantry knows no pull request #%d of %s: GitHub tells it about pull requests into the trunk of configured repositories.", number, repo)
	}
	if err != nil {
		return err
	}
	plans, err := models.PlansOfPullRequest(ctx, db, repo, number, pr.HeadSHA)
	if err != nil {
		return err
	}
	runs, err := models.ListRunPage(ctx, db, models.RunFilter{Repository: repo, PRNumber: number, Limit: infraPullRuns})
	if err != nil {
		return err
	}
	deployment := infra.DeploymentID(&models.Run{Repository: repo, PRNumber: number})
	entries, err := models.ListLog(ctx, db, models.LogFilter{Deployment: deployment, Limit: infraLogSize})
	if err != nil {
		return err
	}
	v := infraview.PullView{
		Repository: repo, Number: "#" + strconv.Itoa(number), Title: pr.Title, GitHubURL: pr.HTMLURL,
		State: infraPullState(pr.State), PlanError: pr.PlanError, Log: logRows(entries),
		LogURL: "/log?" + url.Values{"deployment": {deployment}}.Encode(),
	}
	v.Fields = []infraview.Field{
		{Label: "Author", Value: pr.Author, TestID: "field-author"},
		{Label: "Merges", Value: pr.HeadRef + " → " + pr.BaseRef, Mono: true, TestID: "field-refs"},
		{Label: "Head commit", Value: pr.HeadSHA, Mono: true, TestID: "field-head"},
	}
	if pr.MergeCommitSHA != "" {
		v.Fields = append(v.Fields, infraview.Field{Label: "Merge commit", Value: pr.MergeCommitSHA, Mono: true, TestID: "field-merge-commit"})
	}
	v.Fields = append(v.Fields, infraview.Field{Label: "Last event", Value: clock(pr.UpdatedAt) + " UTC", TestID: "field-updated"})
	for i := range plans {
		p := &plans[i]
		row := infraview.PlanRow{ID: p.ID, Path: p.Path, URL: pageurl.Plan(p.ID), State: infraPlanState(p), Changes: infraChangesText(p), Error: truncate(p.Error, 200)}
		row.Started, row.StartedISO = clockPtr(p.StartedAt)
		row.Finished, row.FinishedISO = clockPtr(p.FinishedAt)
		v.Plans = append(v.Plans, row)
		v.Live = v.Live || (pr.State == models.PROpen && infraPlanActive(p.Status))
	}
	v.Runs = infraRunRows(runs.Runs)
	return s.render(c, http.StatusOK, infraview.Pull(v))
}

func infraChangesText(p *models.PRPlan) string {
	switch {
	case p.HasChanges == nil:
		return ""
	case *p.HasChanges:
		return "changes to apply"
	}
	return "no changes"
}

// planPage is one unit's plan of a pull request (commit statuses link
// here), its output followed live while it runs.
func (s *infraHandlers) planPage(c echo.Context) error {
	ctx := c.Request().Context()
	id, err := pathID(c, "plan")
	if err != nil {
		return err
	}
	p, err := models.PRPlanByID(ctx, s.DB.Bun, id)
	if errors.Is(err, models.ErrNotFound) {
		return apperr.New(apperr.NotFound, "No plan %d.", id)
	}
	if err != nil {
		return err
	}
	v := infraview.PlanView{
		ID: p.ID, Path: p.Path, Repository: p.Repository, PR: "#" + strconv.Itoa(p.PRNumber), PRURL: pageurl.Pull(p.Repository, p.PRNumber),
		State: infraPlanState(p), Error: p.Error,
	}
	if pr, err := models.PullRequestByNumber(ctx, s.DB.Bun, p.Repository, p.PRNumber); err == nil && pr.HeadSHA != p.HeadSHA {
		v.Stale = fmt.Sprintf("The pull request has moved on to %s since this plan; its page lists the plans of the new head.", shortSHA(pr.HeadSHA))
	} else if err != nil && !errors.Is(err, models.ErrNotFound) {
		return err
	}
	v.Fields = []infraview.Field{
		{Label: "Repository", Value: p.Repository, TestID: "field-repository"},
		{Label: "Pull request", Links: []infraview.Link{{Text: "#" + strconv.Itoa(p.PRNumber), URL: v.PRURL}}, TestID: "field-pr"},
		{Label: "Head commit", Value: p.HeadSHA, Mono: true, TestID: "field-head"},
		{Label: "Unit", Value: p.Path, Mono: true, TestID: "field-unit"},
		{Label: "Status", Value: infraPlanState(p).Text, TestID: "field-status"},
		{Label: "Queued", Value: clock(p.CreatedAt) + " UTC", TestID: "field-queued"},
	}
	if p.ExitCode != nil {
		v.Fields = append(v.Fields, infraview.Field{Label: "Exit code", Value: strconv.Itoa(*p.ExitCode), TestID: "field-exit-code"})
	}
	if p.StartedAt != nil {
		v.Fields = append(v.Fields, infraview.Field{Label: "Started", Value: clock(*p.StartedAt) + " UTC", TestID: "field-started"})
	}
	if p.FinishedAt != nil {
		v.Fields = append(v.Fields, infraview.Field{Label: "Finished", Value: clock(*p.FinishedAt) + " UTC", TestID: "field-finished"})
	}
	v.Output = infraview.Output{
		TestID: "plan-output", Text: p.Output, Live: infraPlanActive(p.Status),
		TailURL: pageurl.Plan(p.ID) + "/output", Offset: strconv.Itoa(utf8.RuneCountInString(p.Output)),
	}
	switch p.Status {
	case models.PlanQueued:
		v.Output.Empty = "Queued: the plan starts as soon as a worker is free; its output appears here as it runs."
		v.Output.LiveLabel = "queued, waiting for a worker"
	case models.PlanRunning:
		v.Output.Empty = "Planning; the output appears here as terraform writes it."
		v.Output.LiveLabel = "planning, following the output"
	case models.PlanCanceled:
		v.Output.Empty = "Canceled before it wrote anything: a newer push replaced it."
	default:
		v.Output.Empty = "The plan wrote no output."
	}
	if c := infraChangesText(p); c != "" {
		v.Output.Note = "Result: " + c + "."
	}
	return s.render(c, http.StatusOK, infraview.Plan(v))
}

// runParam finds the run named in the path; a bad or unknown id is a 404.
func (s *infraHandlers) runParam(c echo.Context) (*models.Run, error) {
	id, err := pathID(c, "run")
	if err != nil {
		return nil, err
	}
	run, err := models.RunByID(c.Request().Context(), s.DB.Bun, id)
	if errors.Is(err, models.ErrNotFound) {
		return nil, apperr.New(apperr.NotFound, "No run %d.", id)
	}
	return run, err
}

// executionParam finds the execution named in the path, everything loaded.
func (s *infraHandlers) executionParam(c echo.Context) (*models.Execution, error) {
	id := c.Param("execution_id")
	x, err := models.ExecutionByExecutionID(c.Request().Context(), s.DB.Bun, id)
	if errors.Is(err, models.ErrNotFound) {
		return nil, apperr.New(apperr.NotFound, "No execution %s.", id)
	}
	return x, err
}

func infraRunState(status string) infraview.State {
	switch status {
	case models.RunQueued:
		return infraview.State{Text: "queued", Tone: "muted", Class: "waiting"}
	case models.RunScanning:
		return infraview.State{Text: "scanning", Class: "running"}
	case models.RunRunning:
		return infraview.State{Text: "running", Class: "running"}
	case models.RunSucceeded:
		return infraview.State{Text: "succeeded", Tone: "ok", Class: "succeeded"}
	case models.RunFailed:
		return infraview.State{Text: "failed", Tone: "bad", Class: "failed"}
	}
	return infraview.State{Text: status, Tone: "muted", Class: "waiting"}
}

// infraExecState is an execution's status; a running one says its step, and one
// waiting for votes stands out.
func infraExecState(x *models.Execution) infraview.State {
	switch x.Status {
	case models.ExecWaiting:
		return infraview.State{Text: "waiting", Tone: "muted", Class: "waiting"}
	case models.ExecRunning:
		switch x.Step {
		case models.StepVoting:
			return infraview.State{Text: "running · voting", Tone: "warn", Class: "voting"}
		case models.StepInterrupted:
			return infraview.State{Text: "interrupted — state unknown", Tone: "bad", Class: "interrupted"}
		case "":
			return infraview.State{Text: "running", Class: "running"}
		}
		return infraview.State{Text: "running · " + x.Step, Class: "running"}
	case models.ExecSucceeded:
		return infraview.State{Text: "succeeded", Tone: "ok", Class: "succeeded"}
	case models.ExecFailed:
		return infraview.State{Text: "failed", Tone: "bad", Class: "failed"}
	case models.ExecAborted:
		return infraview.State{Text: "aborted", Tone: "muted", Class: "aborted"}
	}
	return infraview.State{Text: x.Status, Tone: "muted", Class: "waiting"}
}

// infraStateRank orders state classes for legends: as an execution goes.
func infraStateRank(class string) int {
	return slices.Index([]string{"waiting", "running", "voting", "interrupted", "succeeded", "failed", "aborted"}, class)
}

func infraPlanState(p *models.PRPlan) infraview.State {
	switch p.Status {
	case models.PlanQueued:
		return infraview.State{Text: "queued", Tone: "muted", Class: "waiting"}
	case models.PlanRunning:
		return infraview.State{Text: "running", Class: "running"}
	case models.PlanSucceeded:
		if p.HasChanges != nil && !*p.HasChanges {
			return infraview.State{Text: "no changes", Tone: "ok", Class: "succeeded"}
		}
		return infraview.State{Text: "changes", Class: "changes"}
	case models.PlanFailed:
		return infraview.State{Text: "failed", Tone: "bad", Class: "failed"}
	case models.PlanCanceled:
		return infraview.State{Text: "canceled", Tone: "muted", Class: "aborted"}
	}
	return infraview.State{Text: p.Status, Tone: "muted", Class: "waiting"}
}

func infraPullState(state string) infraview.State {
	switch state {
	case models.PROpen:
		return infraview.State{Text: "open", Class: "running"}
	case models.PRMerged:
		return infraview.State{Text: "merged", Tone: "ok", Class: "succeeded"}
	}
	return infraview.State{Text: state, Tone: "muted", Class: "aborted"}
}

func infraRunTitle(id int64) string { return "Run " + strconv.FormatInt(id, 10) }
