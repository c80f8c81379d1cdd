package infra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gantryhq/gantry/internal/gitrepo"
	"github.com/gantryhq/gantry/internal/infrarun"
	"github.com/gantryhq/gantry/internal/tgraph"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// StartRun takes the repository's merge lock for a queued run, scans the
// merge and creates the run's executions. Runs take the lock in the order
// their merges arrived: while another run holds it, or an older run waits
// for it, the run stays queued, and each release starts the oldest. jobID
// is the job doing it: the run records it, so that only that job (retried
// after a crash) scans, never a second job for the same run.
func (s *Service) StartRun(ctx context.Context, runID, jobID int64) error {
	var run *models.Run
	var repo *models.Repository
	took := false
	err := s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		var err error
		if run, err = models.LockRun(ctx, tx, runID); err != nil {
			return err
		}
		if run.Status != models.RunQueued {
			took = run.Status == models.RunScanning && run.ScanJobID != nil && *run.ScanJobID == jobID
			return nil
		}
		if err := models.LockRepository(ctx, tx, run.Repository); err != nil {
			return err
		}
		oldest, err := models.OldestQueuedRun(ctx, tx, run.Repository)
		if err != nil {
			return err
		}
		if oldest.ID != run.ID {
			// An older merge goes first; make sure it is on its way.
			return tx.Enqueue(ctx, jobs.StartRunArgs{RunID: oldest.ID}, nil)
		}
		if took, err = models.TakeMergeLock(ctx, tx, run); err != nil || !took {
			return err
		}
		run.Status, run.StartedAt, run.ScanJobID = models.RunScanning, ptr(s.now()), &jobID
		if err := models.UpdateRun(ctx, tx, run, "status", "started_at", "scan_job_id"); err != nil {
			return err
		}
		if err := s.log(ctx, tx, run, RunTarget(run.ID), EventMergeLockTaken, "gantry", map[string]any{"pull_request": run.PRNumber}); err != nil {
			return err
		}
		if err := s.log(ctx, tx, run, RunTarget(run.ID), EventRunStarted, "gantry", map[string]any{"scan": run.Scan}); err != nil {
			return err
		}
		return tx.Enqueue(ctx, jobs.RefreshMergeLockArgs{Repository: run.Repository}, nil)
	})
	if err != nil || !took {
		return err
	}
	if repo, err = models.RepositoryByName(ctx, s.Queue.DB(), run.Repository); err != nil {
		return err
	}
	found, scanErr := s.scan(ctx, repo, run)
	if scanErr != nil && !isConfigError(scanErr) && !errors.Is(scanErr, errScan) {
		return scanErr // git or the database: River retries
	}
	var reverted []deletedRollback // rollback_runs.go: deleted units' standing new provider resources
	if scanErr == nil {
		reverted, scanErr = s.deletedUnitRollbacks(ctx, repo, run, found.deleted)
	}
	if scanErr != nil && !errors.Is(scanErr, errScan) && !isConfigError(scanErr) {
		return scanErr
	}
	base := run.BaseCommit                      // what the scan compared the merge with
	merge, head := run.MergeCommit, run.HeadSHA // a reconcile run's are the trunk's head, found by the scan
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		run, err := models.LockRun(ctx, tx, runID)
		if err != nil || run.Status != models.RunScanning {
			return err
		}
		run.BaseCommit, run.MergeCommit, run.HeadSHA = base, merge, head
		var specs []infrarun.Spec
		if scanErr == nil {
			specs, scanErr = infrarun.Plan(run.PRNumber, run.MergeCommit, found.units, engineAccounts(repo.Accounts), newRand())
		}
		run.DeletedUnits = nonNil(found.deleted)
		if scanErr != nil {
			run.Error = scanErr.Error()
			return s.endRun(ctx, tx, run, false)
		}
		xs := make([]*models.Execution, len(specs))
		for i, sp := range specs {
			xs[i] = newExecution(repo, run.ID, sp)
		}
		failUnreadable(xs, found.unreadable, s.now())
		if err := models.InsertExecutions(ctx, tx, xs); err != nil {
			return err
		}
		if err := s.insertDeletedRollbacks(ctx, tx, repo, run, reverted); err != nil {
			return err
		}
		run.Status = models.RunRunning
		if err := models.UpdateRun(ctx, tx, run, "status", "base_commit", "deleted_units", "merge_commit", "head_sha"); err != nil {
			return err
		}
		collected := make([]string, len(xs))
		for i, x := range xs {
			collected[i] = x.CfgPath
		}
		if err := s.log(ctx, tx, run, RunTarget(run.ID), EventRunScanned, "gantry",
			map[string]any{"base_commit": run.BaseCommit, "units": collected, "deleted_units": run.DeletedUnits, "incremental": found.incremental}); err != nil {
			return err
		}
		for _, x := range xs {
			var event string
			switch x.Status {
			case models.ExecFailed:
				event = EventExecutionFailed
			case models.ExecAborted:
				event = EventExecutionAborted
			default:
				continue
			}
			if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), event, "gantry", map[string]any{"cfg_path": x.CfgPath, "error": x.Error}); err != nil {
				return err
			}
		}
		return s.advance(ctx, tx, run, "gantry")
	})
}

// newExecution is the waiting execution of a spec of run, with its
// repository's commands and its account's roles, voters and thresholds.
func newExecution(repo *models.Repository, runID int64, sp infrarun.Spec) *models.Execution {
	acc := accountFor(repo.Accounts, sp.CfgPath)
	return &models.Execution{
		ExecutionID: sp.ExecutionID, RunID: runID, CfgPath: sp.CfgPath, CfgDeps: nonNil(sp.CfgDeps),
		AccountName: sp.Account, AccountPath: sp.AccountPath, AccountDeps: nonNil(sp.AccountDeps),
		InitCommand: repo.InitCommand, PlanCommand: repo.PlanCommand, ApplyCommand: repo.ApplyCommand,
		PlanRoleARN: acc.PlanRole, ApplyRoleARN: acc.ApplyRole,
		Voters: acc.Voters, MinApprovalCount: acc.MinApprovals, MinRejectionCount: acc.MinRejections,
		Status: models.ExecWaiting,
	}
}

// failUnreadable fails the executions of the units whose configuration the
// scan could not read (unreadable maps them to why), and aborts those that
// depend on them, however far down, saying which unit and why: an error in
// one unit fails that unit and its dependents, not the whole run.
func failUnreadable(xs []*models.Execution, unreadable map[string]string, now time.Time) {
	if len(unreadable) == 0 {
		return
	}
	blocked := map[string]string{} // unit → the unreadable unit it waits for
	for _, x := range xs {
		if why, ok := unreadable[x.CfgPath]; ok {
			x.Status, x.FinishedAt = models.ExecFailed, &now
			x.Error = "Gantry cannot read this unit's configuration:\n" + why
			blocked[x.CfgPath] = x.CfgPath
		}
	}
	for changed := true; changed; {
		changed = false
		for _, x := range xs {
			if _, done := blocked[x.CfgPath]; done {
				continue
			}
			for _, d := range x.CfgDeps {
				if root, ok := blocked[d]; ok {
					x.Status, x.FinishedAt = models.ExecAborted, &now
					x.Error = fmt.Sprintf("aborted: it depends on %s, whose configuration Gantry cannot read:\n%s", root, unreadable[root])
					blocked[x.CfgPath], changed = root, true
					break
				}
			}
		}
	}
}

// errScan marks a scan failure that is the repository's, not Gantry's.
var errScan = errors.New("scan")

// scanned is what the scan of a run collected.
type scanned struct {
	units   []infrarun.Unit // with their dependencies among the collected
	deleted []string        // units the merge deleted
	// unreadable are the collected units whose configuration cannot be
	// read, with why: they fail, not the whole run.
	unreadable map[string]string
	// incremental is set when the graph was updated from the previous
	// scan of the repository rather than read whole.
	incremental bool
}

// scan collects the run's units at the merge commit.
func (s *Service) scan(ctx context.Context, repo *models.Repository, run *models.Run) (scanned, error) {
	var out scanned
	if isReconcile(run) {
		path, err := s.reconcileScan(ctx, repo, run)
		if err != nil {
			return out, err
		}
		out.units = []infrarun.Unit{{Path: path}}
		return out, nil
	}
	mirror, err := s.Git.Fetch(ctx, repo.URL, run.MergeCommit)
	if err != nil {
		return out, err
	}
	base, err := s.baseOf(ctx, mirror, run)
	if err != nil {
		return out, err
	}
	run.BaseCommit = base
	ws, err := s.workspace(fmt.Sprintf("scan-%d", run.ID))
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(ws)
	dir := checkoutDir(ws)
	if err := mirror.Checkout(ctx, run.MergeCommit, dir); err != nil {
		return out, err
	}
	defer func() { _ = mirror.RemoveCheckout(context.WithoutCancel(ctx), dir) }()
	g, incremental, err := s.graphs.scan(ctx, mirror, repo.Name, run.MergeCommit, dir)
	if g == nil {
		return out, err
	}
	out.incremental = incremental
	var paths []string
	if run.Scan == "plan" {
		if paths, err = s.planAll(ctx, repo, run, dir, g); err != nil {
			return out, err
		}
	} else {
		changes, err := mirror.ChangedFiles(ctx, base, run.MergeCommit)
		if err != nil {
			return out, err
		}
		aff := g.Affected(changes.Paths())
		paths, out.deleted = aff.Selected, aff.Deleted
	}
	collected := make(map[string]bool, len(paths))
	for _, p := range paths {
		collected[p] = true
		if errs := g.Unit(p).Errors; len(errs) > 0 {
			if out.unreadable == nil {
				out.unreadable = map[string]string{}
			}
			out.unreadable[p] = errorLines(errs)
		}
	}
	for _, p := range paths {
		// A unit waits for the collected units it depends on, also through
		// units the scan left out (a plan scan collects only units with
		// changes), so the run keeps the repository's order.
		out.units = append(out.units, infrarun.Unit{Path: p, Deps: g.DependenciesWithin(p, collected)})
	}
	return out, nil
}

// graphCache keeps the graph of each repository's last scanned commit, so
// that the next run's scan parses only the files its merge changed and
// evaluates again only the units they concern (tgraph's Update), rather
// than the whole repository. It is per process: a scan on another worker,
// or after a restart, reads the repository whole.
type graphCache struct {
	mu     sync.Mutex
	graphs map[string]scannedGraph // by repository
}

type scannedGraph struct {
	commit string
	graph  *tgraph.Graph
}

// scan reads the graph of dir, the checkout of commit, updating the
// repository's previous graph when there is one; incremental says so. As
// tgraph.Scan, it may return a graph with broken units and an error.
func (c *graphCache) scan(ctx context.Context, mirror *gitrepo.Mirror, repo, commit, dir string) (g *tgraph.Graph, incremental bool, err error) {
	c.mu.Lock()
	prev, ok := c.graphs[repo]
	c.mu.Unlock()
	if ok {
		changes, derr := mirror.ChangedFiles(ctx, prev.commit, commit)
		if incremental = derr == nil; incremental {
			g, err = prev.graph.Update(dir, changes.Paths())
		}
	}
	if !incremental {
		g, err = tgraph.Scan(dir)
	}
	if g != nil {
		c.mu.Lock()
		if c.graphs == nil {
			c.graphs = map[string]scannedGraph{}
		}
		c.graphs[repo] = scannedGraph{commit: commit, graph: g}
		c.mu.Unlock()
	}
	return g, incremental, err
}

// errorLines is a broken unit's errors, one a line.
func errorLines(errs []*tgraph.Error) string {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// baseOf is what the merge is compared with: for a merge commit its first
// parent (the trunk before the merge), so exactly what the pull request
// brought counts; for a squash or rebase merge, the merge base of its
// parent and the pull request's head, which may count more, never less.
func (s *Service) baseOf(ctx context.Context, mirror *gitrepo.Mirror, run *models.Run) (string, error) {
	parents, err := mirror.Parents(ctx, run.MergeCommit)
	if err != nil {
		return "", err
	}
	switch {
	case len(parents) == 0:
		return gitrepo.EmptyTree, nil
	case len(parents) >= 2 || run.HeadSHA == "" || run.HeadSHA == run.MergeCommit:
		return parents[0], nil
	}
	if _, err := s.Git.Fetch(ctx, mirror.URL, run.HeadSHA); err != nil {
		return parents[0], nil // the head is gone (a deleted fork): the parent is the best left
	}
	return mirror.MergeBase(ctx, parents[0], run.HeadSHA)
}

// planAll is the scan type plan: a plan of every unit at the merge commit,
// in the one checkout of the scan and as each unit's account's plan role,
// keeping those whose plan has changes (exit code 2). The whole scan has
// the command timeout; a unit whose plan fails fails the scan with the end
// of its output.
func (s *Service) planAll(ctx context.Context, repo *models.Repository, run *models.Run, checkout string, g *tgraph.Graph) ([]string, error) {
	order, err := g.Order()
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(s.commandTimeout())
	var changed []string
	for _, p := range order {
		if len(g.Unit(p).Errors) > 0 {
			changed = append(changed, p) // collected to fail, as the graph scan does
			continue
		}
		var role string
		if acc := accountFor(repo.Accounts, p); acc != nil {
			role = acc.PlanRole
		}
		res, err := s.runIn(ctx, checkout, unitCommand{
			Unit: p, Init: repo.InitCommand, Main: repo.PlanCommand, Role: role, Session: fmt.Sprintf("scan-%d", run.ID),
			PlanFile: filepath.Join(filepath.Dir(checkout), "scan.tfplan"),
		}, nil, deadline)
		if retryable(ctx, err) {
			return nil, err
		}
		ok, changes := planOutcome(repo.PlanCommand, res, err)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: %s in %s:\n%s", errScan, failure("plan", res, err), p, lastLines(res.Output, 20))
		case changes:
			changed = append(changed, p)
		}
	}
	return changed, nil
}

// lastLines is the end of a command's output, for an error message.
func lastLines(output string, n int) string {
	lines := strings.Split(strings.TrimRight(output, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func engineAccounts(accounts []models.Account) []infrarun.Account {
	out := make([]infrarun.Account, len(accounts))
	for i, a := range accounts {
		out[i] = infrarun.Account{Name: a.Name, Path: a.Path, DependsOn: a.DependsOn}
	}
	return out
}

// advance applies the engine's next step to a run whose row the caller
// locked: executions whose dependencies all succeeded start (all at once),
// those below a failure are aborted, and a run with nothing left ends.
func (s *Service) advance(ctx context.Context, tx jobs.Tx, run *models.Run, actor string) error {
	xs, err := models.ExecutionsOfRun(ctx, tx, run.ID)
	if err != nil {
		return err
	}
	states, err := engineStates(ctx, tx, run.ID, xs) // rollback_runs.go
	if err != nil {
		return err
	}
	byID := make(map[int64]*models.Execution, len(xs))
	for i := range xs {
		byID[xs[i].ID] = &xs[i]
	}
	step := infrarun.Next(states)
	now := s.now()
	for _, id := range step.Abort {
		x := byID[id]
		x.Status, x.FinishedAt, x.Error = models.ExecAborted, &now, "aborted: a directory or account it depends on did not succeed"
		if err := models.UpdateExecution(ctx, tx, x, "status", "finished_at", "error"); err != nil {
			return err
		}
		if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventExecutionAborted, actor, map[string]any{"cfg_path": x.CfgPath}); err != nil {
			return err
		}
	}
	for _, id := range step.Start {
		x := byID[id]
		x.Status, x.Step, x.ReadyAt, x.StartedAt = models.ExecRunning, models.StepPlanning, &now, &now
		if err := models.UpdateExecution(ctx, tx, x, "status", "step", "ready_at", "started_at"); err != nil {
			return err
		}
		if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventExecutionStarted, actor, map[string]any{"cfg_path": x.CfgPath, "account": x.AccountName}); err != nil {
			return err
		}
		if err := tx.Enqueue(ctx, jobs.PlanExecutionArgs{ExecutionID: x.ID}, nil); err != nil {
			return err
		}
	}
	if len(step.RollBack) > 0 { // the run failed: roll back its new providers' resources
		if run.Error == "" {
			run.Error = failedSummary(xs)
		}
		if err := models.UpdateRun(ctx, tx, run, "error"); err != nil {
			return err
		}
		if err := s.startRollbacks(ctx, tx, run, byID, step.RollBack, actor); err != nil {
			return err
		}
		return s.advance(ctx, tx, run, actor)
	}
	if err := s.failRippled(ctx, tx, run, &step); err != nil {
		return err
	}
	if step.Done {
		if !step.Succeeded && run.Error == "" {
			run.Error = failedSummary(xs)
		}
		return s.endRun(ctx, tx, run, step.Succeeded)
	}
	return nil
}

func failedSummary(xs []models.Execution) string {
	var failed []string
	for _, x := range xs {
		if x.Status == models.ExecFailed {
			failed = append(failed, x.CfgPath)
		}
	}
	slices.Sort(failed)
	if len(failed) == 0 {
		return ""
	}
	return "failed: " + strings.Join(failed, ", ")
}

// endRun ends a run, releases the merge lock, starts the next queued run of
// the repository and refreshes the open pull requests' merge-lock status.
func (s *Service) endRun(ctx context.Context, tx jobs.Tx, run *models.Run, succeeded bool) error {
	if err := models.LockRepository(ctx, tx, run.Repository); err != nil {
		return err
	}
	run.Status, run.FinishedAt = models.RunFailed, ptr(s.now())
	event := EventRunFailed
	if succeeded {
		run.Status, event = models.RunSucceeded, EventRunSucceeded
	}
	if err := models.UpdateRun(ctx, tx, run, "status", "finished_at", "error", "base_commit", "deleted_units", "merge_commit", "head_sha"); err != nil {
		return err
	}
	if succeeded && isReconcile(run) {
		if err := s.recheckAfterReconcile(ctx, tx, run); err != nil {
			return err
		}
	}
	if err := s.log(ctx, tx, run, RunTarget(run.ID), event, "gantry", map[string]any{"error": run.Error, "deleted_units": run.DeletedUnits}); err != nil {
		return err
	}
	if err := models.ReleaseMergeLock(ctx, tx, run.Repository, run.ID); err != nil {
		return err
	}
	if err := s.log(ctx, tx, run, RunTarget(run.ID), EventMergeLockReleased, "gantry", nil); err != nil {
		return err
	}
	next, err := models.OldestQueuedRun(ctx, tx, run.Repository)
	switch {
	case err == nil:
		if err := tx.Enqueue(ctx, jobs.StartRunArgs{RunID: next.ID}, nil); err != nil {
			return err
		}
	case !errors.Is(err, models.ErrNotFound):
		return err
	}
	return tx.Enqueue(ctx, jobs.RefreshMergeLockArgs{Repository: run.Repository}, nil)
}

func ptr[T any](v T) *T { return &v }
