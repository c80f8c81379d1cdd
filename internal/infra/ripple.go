package infra

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/gantryhq/gantry/internal/infrarun"
	"github.com/gantryhq/gantry/internal/tfstate"
	"github.com/gantryhq/gantry/internal/tgraph"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// Log events of outputs that ripple (docs/areas/infra.md, "Outputs that
// ripple").
const (
	// EventOutputsChanged: an apply changed its unit's root outputs
	// (detail: cfg_path, outputs — names only —, readers: the units added
	// to the run because of it).
	EventOutputsChanged = "execution-outputs-changed"
	// EventExecutionRippled: an execution was added to its run because a
	// unit it reads changed outputs (detail: cfg_path, source, outputs).
	EventExecutionRippled = "execution-added-by-ripple"
	// EventRippleFailed: which units read the changed outputs could not be
	// worked out (detail: cfg_path, error); the run fails when it ends.
	EventRippleFailed = "execution-ripple-failed"
)

// rippleFound is what a successful apply did to its unit's outputs, read
// outside any transaction: the outputs that changed, or why they could not
// be compared (compareErr); when some changed or it cannot be told, the
// units that read them with all the units they depend on (ancestors) and
// all that depend on them (below), the readers whose configuration cannot
// be read (with why), and why the readers could not be worked out (err).
type rippleFound struct {
	outputs    []string
	compareErr error
	readers    []infrarun.Unit
	below      map[string][]string
	unreadable map[string]string
	err        error
}

// afterApply reads, from one `show -json` of the approved plan and one of
// the new state, what the apply introduced (rollback.go) and which of its
// unit's outputs it changed, with the units outside the run they ripple to.
// Outputs that cannot be compared (a custom apply command show -json
// cannot be derived from, say) are taken as changed: the readers are
// planned, and those without changes need no votes.
func (s *Service) afterApply(ctx context.Context, ws string, x *models.Execution, run *models.Run, repo *models.Repository, planFile string) (*models.NewResources, *rippleFound) {
	plan, state, err := s.showPlanAndState(ctx, ws, x, run, repo, planFile)
	created := newResourcesOf(x, plan, state, err)
	found := &rippleFound{}
	if err == nil {
		found.outputs, err = tfstate.ChangedOutputs(plan, state)
	}
	if err != nil {
		found.compareErr = fmt.Errorf("comparing the outputs before and after the apply: %w", err)
	}
	if len(found.outputs) > 0 || found.compareErr != nil {
		found.err = s.findReaders(ctx, ws, x, run, repo, found)
	}
	return created, found
}

// findReaders reads the graph at the run's commit for the units with a
// dependency block on x's unit.
func (s *Service) findReaders(ctx context.Context, ws string, x *models.Execution, run *models.Run, repo *models.Repository, found *rippleFound) error {
	g, err := s.graphAt(ctx, ws, repo, run.MergeCommit)
	if err != nil {
		return fmt.Errorf("reading the units at %s: %w", run.MergeCommit, err)
	}
	found.below = map[string][]string{}
	for _, r := range g.OutputReaders(x.CfgPath) {
		found.readers = append(found.readers, infrarun.Unit{Path: r, Deps: ancestors(g, r)})
		found.below[r] = descendants(g, r)
		if errs := g.Unit(r).Errors; len(errs) > 0 {
			if found.unreadable == nil {
				found.unreadable = map[string]string{}
			}
			found.unreadable[r] = errorLines(errs)
		}
	}
	return nil
}

// graphAt is the graph of the repository at commit: the last scan's when
// it was of that commit (the run's own scan, usually), else read from a
// checkout.
func (s *Service) graphAt(ctx context.Context, ws string, repo *models.Repository, commit string) (*tgraph.Graph, error) {
	s.graphs.mu.Lock()
	prev, ok := s.graphs.graphs[repo.Name]
	s.graphs.mu.Unlock()
	if ok && prev.commit == commit {
		return prev.graph, nil
	}
	mirror, err := s.Git.Fetch(ctx, repo.URL, commit)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(ws, "graph-")
	if err != nil {
		return nil, err
	}
	dir = checkoutDir(dir)
	if err := mirror.Checkout(ctx, commit, dir); err != nil {
		return nil, err
	}
	defer func() { _ = mirror.RemoveCheckout(context.WithoutCancel(ctx), dir) }()
	g, _, err := s.graphs.scan(ctx, mirror, repo.Name, commit, dir)
	if g == nil {
		return nil, err
	}
	return g, nil // a broken unit elsewhere does not stop the ripple
}

// ancestors are every unit path depends on, directly or not, sorted: a
// ripple execution waits for those of them in the run, whichever units
// the run gains meanwhile.
func ancestors(g *tgraph.Graph, path string) []string {
	return reach(path, func(p string) []string {
		if u := g.Unit(p); u != nil {
			return u.Dependencies
		}
		return nil
	})
}

// descendants are every unit that depends on path, directly or not,
// sorted: those of them waiting in the run must wait for path's ripple.
func descendants(g *tgraph.Graph, path string) []string {
	return reach(path, g.Dependents)
}

// reach is every unit next leads to from path, however far, sorted.
func reach(path string, next func(string) []string) []string {
	seen := map[string]bool{}
	stack := next(path)
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[d] || d == path {
			continue
		}
		seen[d] = true
		stack = append(stack, next(d)...)
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// ripple records, in the transaction that records x's successful apply
// (its run locked), which outputs the apply changed and adds to the run an
// execution for each unit outside it that reads them, waiting for x: it is
// planned as soon as x succeeds, voted on when its plan has changes, and
// succeeds at once, checked without changes, when it has none. The run is
// not over until they are. What cannot be worked out is recorded and fails
// the run when it ends (failRippled).
func (s *Service) ripple(ctx context.Context, tx jobs.Tx, run *models.Run, repo *models.Repository, x *models.Execution, found *rippleFound) error {
	if found == nil {
		return nil
	}
	rec := &models.OutputChanges{ExecutionID: x.ID, Outputs: found.outputs}
	if found.compareErr != nil {
		rec.CompareError = found.compareErr.Error()
	}
	var added []*models.Execution
	why := found.err
	if why == nil && (len(found.outputs) > 0 || found.compareErr != nil) {
		var err error
		if added, why, err = s.addRipples(ctx, tx, run, repo, x, found); err != nil {
			return err
		}
	}
	if why != nil {
		rec.Error = fmt.Sprintf("the apply of %s changed outputs, or they could not be compared, but which units read them could not be worked out: %v", x.CfgPath, why)
	}
	for _, a := range added {
		rec.Readers = append(rec.Readers, a.CfgPath)
	}
	if err := models.RecordOutputChanges(ctx, tx, rec); err != nil {
		return err
	}
	if rec.Error != "" {
		if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventRippleFailed, "gantry",
			map[string]any{"cfg_path": x.CfgPath, "error": rec.Error}); err != nil {
			return err
		}
	}
	if len(rec.Outputs) == 0 && rec.CompareError == "" {
		return nil
	}
	detail := map[string]any{"cfg_path": x.CfgPath, "outputs": rec.Outputs, "readers": nonNil(rec.Readers)}
	if rec.CompareError != "" {
		detail["compare_error"] = rec.CompareError
	}
	if err := s.log(ctx, tx, run, ExecutionTarget(x.ExecutionID), EventOutputsChanged, "gantry", detail); err != nil {
		return err
	}
	for _, a := range added {
		detail := map[string]any{"cfg_path": a.CfgPath, "source": x.CfgPath, "outputs": rec.Outputs}
		if a.Error != "" {
			detail["error"] = a.Error
		}
		if err := s.log(ctx, tx, run, ExecutionTarget(a.ExecutionID), EventExecutionRippled, "gantry", detail); err != nil {
			return err
		}
	}
	return nil
}

// addRipples inserts the executions of the readers of x's unit that the
// run does not have yet, with why they were added. why says which readers
// could not be added (no account's path contains them: the others are), or
// that none could (they would wait on each other forever); err is the
// database's.
func (s *Service) addRipples(ctx context.Context, tx jobs.Tx, run *models.Run, repo *models.Repository, x *models.Execution, found *rippleFound) (added []*models.Execution, why, err error) {
	xs, err := models.ExecutionsOfRun(ctx, tx, run.ID)
	if err != nil {
		return nil, nil, err
	}
	states := make([]infrarun.State, len(xs))
	ids := make([]string, len(xs))
	for i, e := range xs {
		ids[i] = e.ExecutionID
		states[i] = infrarun.State{ID: e.ID, CfgPath: e.CfgPath, Account: e.AccountName, CfgDeps: e.CfgDeps, AccountDeps: e.AccountDeps, Status: e.Status}
		if e.ID == x.ID {
			states[i].Status = infrarun.Succeeded // recorded just after
		}
	}
	specs, orphans, why := infrarun.Ripple(run.PRNumber, run.MergeCommit, x.CfgPath, found.readers, states, ids, engineAccounts(repo.Accounts), newRand())
	if why == nil && len(orphans) > 0 {
		// The others are added all the same; the run fails when it ends.
		why = fmt.Errorf("no account's path contains %s: add an account for it in gantry.yaml", strings.Join(orphans, ", "))
	}
	if len(specs) == 0 {
		return nil, why, nil
	}
	rewait, cycle := infrarun.Rewait(states, specs, found.below)
	if cycle != nil {
		return nil, cycle, nil
	}
	for i := range xs {
		if deps, ok := rewait[xs[i].ID]; ok {
			xs[i].CfgDeps = deps
			if err := models.UpdateExecution(ctx, tx, &xs[i], "cfg_deps"); err != nil {
				return nil, nil, err
			}
		}
	}
	added = make([]*models.Execution, len(specs))
	for i, sp := range specs {
		added[i] = newExecution(repo, run.ID, sp)
	}
	failUnreadable(added, found.unreadable, s.now())
	if err := models.InsertExecutions(ctx, tx, added); err != nil {
		return nil, nil, err
	}
	reasons := make([]*models.Ripple, len(added))
	for i, a := range added {
		reasons[i] = &models.Ripple{ExecutionID: a.ID, SourceID: x.ID, SourceUnit: x.CfgPath, Outputs: nonNil(found.outputs)}
	}
	if err := models.InsertRipples(ctx, tx, reasons); err != nil {
		return nil, nil, err
	}
	return added, why, nil
}

// failRippled fails a run that would end successfully when a ripple of it
// could not be worked out: a dependent may have been left stale. Every
// apply succeeded, so nothing is rolled back (decision: the trunk and the
// state agree; a rollback would destroy what was rightly applied), and
// the run's error says so.
func (s *Service) failRippled(ctx context.Context, tx jobs.Tx, run *models.Run, step *infrarun.Step) error {
	if !step.Done || !step.Succeeded {
		return nil
	}
	errs, err := models.RippleErrors(ctx, tx, run.ID)
	if err != nil || len(errs) == 0 {
		return err
	}
	step.Succeeded = false
	if run.Error == "" {
		run.Error = strings.Join(errs, "\n") + "\n" + RippleFailedNoRollback
	}
	return nil
}

// RippleFailedNoRollback ends the error of a run failed by a ripple.
const RippleFailedNoRollback = "Every apply succeeded, so nothing is rolled back: check the readers left out."

// RippleReason says why an execution was added to its run ("" when it was
// not): "added because <unit>'s outputs <names> changed".
func RippleReason(r *models.Ripple) string {
	switch {
	case r == nil:
		return ""
	case len(r.Outputs) == 0:
		return fmt.Sprintf("added because %s's outputs could not be compared after its apply, so they may have changed", r.SourceUnit)
	}
	return fmt.Sprintf("added because %s's outputs %s changed", r.SourceUnit, strings.Join(r.Outputs, ", "))
}
