package infra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/mail"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/internal/runner"
	"github.com/gantryhq/gantry/internal/tgraph"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// Drift detection: on a repository's schedule (gantry.yaml's drift), every
// unit of the trunk is planned through the same commands, checkout and plan
// role as a pull request's plan, and never applied. A unit whose plan has
// changes has drifted: /infra lists it with its plan, the metric counts it,
// its recipients are mailed when it is first found, and an operator may
// reconcile it, which is a run of the normal plan → vote → apply under the
// repository's merge lock. A check that fails is shown, and the next one is
// tried on schedule as usual.

// Log events of drift detection.
const (
	EventDriftSwept          = "drift-swept"
	EventDriftSweepFailed    = "drift-sweep-failed"
	EventDriftFound          = "drift-found"
	EventDriftNone           = "drift-none"
	EventDriftCheckFailed    = "drift-check-failed"
	EventDriftCheckRequeued  = "drift-check-requeued"
	EventDriftReconcileStart = "drift-reconcile-requested"
)

// DriftTarget is the log target of a drift check.
func DriftTarget(id int64) string { return fmt.Sprintf("drift:%d", id) }

// DriftRetention is how long finished drift checks are kept; each unit's
// latest, and those a run reconciled, are kept whatever their age.
const DriftRetention = 30 * 24 * time.Hour

// driftStranded is how long a check may wait without a live job before a
// sweep fails it (its job was cancelled or discarded).
const driftStranded = 2 * time.Minute

// ScheduleDrift queues a sweep of every repository whose drift schedule is
// due; River's leader runs it every minute.
func (s *Service) ScheduleDrift(ctx context.Context) error {
	due, err := models.DueDriftRepositories(ctx, s.Queue.DB(), s.now())
	if err != nil || len(due) == 0 {
		return err
	}
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		for _, name := range due {
			if err := tx.Enqueue(ctx, jobs.DriftSweepArgs{Repository: name}, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// SweepDrift scans the trunk's head and queues a drift check of each of
// its units (one that still waits or runs gets no second). A trunk that
// cannot be scanned is recorded on the sweep and shown; git failing is
// retried.
func (s *Service) SweepDrift(ctx context.Context, repoName string) error {
	db := s.Queue.DB()
	repo, err := models.RepositoryByName(ctx, db, repoName)
	if err != nil || repo.RemovedAt != nil || repo.DriftEverySeconds == 0 {
		return err
	}
	commit, units, unreadable, scanErr := s.trunkUnits(ctx, repo)
	if scanErr != nil && !isConfigError(scanErr) {
		return scanErr
	}
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		if _, err := models.FailStrandedDriftChecks(ctx, tx, repo.Name, jobs.DriftPlanArgs{}.Kind(), s.now().Add(-driftStranded)); err != nil {
			return err
		}
		if _, err := models.PruneDriftChecks(ctx, tx, repo.Name, s.now().Add(-DriftRetention)); err != nil {
			return err
		}
		sweep := &models.DriftSweep{Repository: repo.Name, CommitSHA: commit, Units: units, SweptAt: s.now()}
		if scanErr != nil {
			sweep.Error = scanErr.Error()
			if err := models.SaveDriftSweep(ctx, tx, sweep); err != nil {
				return err
			}
			return models.AppendLog(ctx, tx, &models.LogEntry{TargetID: RepositoryTarget(repo.Name), Revision: commit,
				Event: EventDriftSweepFailed, Actor: "gantry", Detail: map[string]any{"error": sweep.Error}})
		}
		if err := models.SaveDriftSweep(ctx, tx, sweep); err != nil {
			return err
		}
		checks, err := models.QueueDriftChecks(ctx, tx, repo.Name, commit, units)
		if err != nil {
			return err
		}
		for _, c := range checks {
			if why, ok := unreadable[c.Path]; ok {
				// Its plan would only fail less clearly: the check fails
				// now with Gantry's reason, the others go on.
				c.Status, c.Error = models.DriftFailed, "Gantry cannot read this unit's configuration:\n"+why
				if _, err := models.FinishDriftCheck(ctx, tx, &c); err != nil {
					return err
				}
				if err := models.AppendLog(ctx, tx, &models.LogEntry{TargetID: DriftTarget(c.ID), Revision: commit, Event: EventDriftCheckFailed,
					Actor: "gantry", Detail: map[string]any{"path": c.Path, "error": c.Error}}); err != nil {
					return err
				}
				continue
			}
			if err := tx.Enqueue(ctx, jobs.DriftPlanArgs{CheckID: c.ID, Repository: c.Repository, Path: c.Path}, nil); err != nil {
				return err
			}
		}
		return models.AppendLog(ctx, tx, &models.LogEntry{TargetID: RepositoryTarget(repo.Name), Revision: commit,
			Event: EventDriftSwept, Actor: "gantry", Detail: map[string]any{"units": nonNil(units), "queued": len(checks)}})
	})
}

// trunkUnits scans the head of the trunk and returns it with its units in
// dependency order.
func (s *Service) trunkUnits(ctx context.Context, repo *models.Repository) (commit string, units []string, unreadable map[string]string, err error) {
	trunk := "refs/heads/" + repo.Trunk
	mirror, err := s.Git.Fetch(ctx, repo.URL, trunk)
	if err != nil {
		return "", nil, nil, err
	}
	if commit, err = mirror.ResolveRef(ctx, trunk); err != nil {
		return "", nil, nil, err
	}
	ws, err := s.workspace("drift-scan")
	if err != nil {
		return "", nil, nil, err
	}
	defer os.RemoveAll(ws)
	dir := checkoutDir(ws)
	if err := mirror.Checkout(ctx, commit, dir); err != nil {
		return "", nil, nil, err
	}
	defer func() { _ = mirror.RemoveCheckout(context.WithoutCancel(ctx), dir) }()
	// A unit Gantry cannot read fails its own check, not the sweep: the
	// scan returns the graph with it unless the whole tree is unreadable.
	g, err := tgraph.Scan(dir)
	if g == nil {
		return commit, nil, nil, err
	}
	for _, u := range g.Broken() {
		if unreadable == nil {
			unreadable = map[string]string{}
		}
		unreadable[u.Path] = errorLines(u.Errors)
	}
	units, err = g.Order()
	return commit, units, unreadable, err
}

// RunDriftCheck plans one unit at the sweep's commit, streaming the output
// into the check, and records whether it drifted. Nothing is applied.
func (s *Service) RunDriftCheck(ctx context.Context, checkID int64) error {
	db := s.Queue.DB()
	c, err := models.DriftCheckByID(ctx, db, checkID)
	if err != nil {
		return err
	}
	repo, err := models.RepositoryByName(ctx, db, c.Repository)
	if err != nil {
		return err
	}
	if started, err := models.StartDriftCheck(ctx, db, c.ID); err != nil || !started {
		return err
	}
	sink := runner.SinkFunc(func(sctx context.Context, ch runner.Chunk) error {
		return models.AppendDriftOutput(sctx, db, c.ID, ch.Text)
	})
	plan, err := s.planUnit(ctx, repo, c.CommitSHA, c.Path, fmt.Sprintf("drift-%d", c.ID), fmt.Sprintf("drift-%d", c.ID), "drift_plan", sink)
	if err != nil {
		return err
	}
	c.ExitCode, c.HasChanges, c.Status, c.Error = plan.exit, &plan.changes, models.DriftSucceeded, ""
	if !plan.ok {
		c.Status, c.Error, c.HasChanges = models.DriftFailed, plan.failure, nil
	}
	return s.finishDriftCheck(ctx, repo, c)
}

// FailDriftCheck fails a check whose job gave up (git unreachable for the
// whole retry window, say), so the unit is shown failing rather than
// checking forever.
func (s *Service) FailDriftCheck(ctx context.Context, checkID int64, why error) error {
	db := s.Queue.DB()
	c, err := models.DriftCheckByID(ctx, db, checkID)
	if err != nil {
		return err
	}
	repo, err := models.RepositoryByName(ctx, db, c.Repository)
	if err != nil {
		return err
	}
	c.Status, c.Error, c.HasChanges = models.DriftFailed, "the drift plan could not run: "+why.Error(), nil
	return s.finishDriftCheck(ctx, repo, c)
}

// finishDriftCheck records a check's outcome with its log entry, and
// queues the mail when the unit is newly drifted (its previous check was
// not): a drift left alone is not mailed again every sweep.
func (s *Service) finishDriftCheck(ctx context.Context, repo *models.Repository, c *models.DriftCheck) error {
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		finished, err := models.FinishDriftCheck(ctx, tx, c)
		if err != nil || !finished {
			return err
		}
		event, detail := EventDriftNone, map[string]any{"path": c.Path}
		switch {
		case c.Status == models.DriftFailed:
			event, detail["error"] = EventDriftCheckFailed, c.Error
		case c.Drifted():
			event = EventDriftFound
		}
		if err := models.AppendLog(ctx, tx, &models.LogEntry{TargetID: DriftTarget(c.ID), Revision: c.CommitSHA,
			Event: event, Actor: "gantry", Detail: detail}); err != nil {
			return err
		}
		if !c.Drifted() || len(repo.DriftNotify) == 0 {
			return nil
		}
		prev, err := models.PreviousDriftCheck(ctx, tx, c.Repository, c.Path, c.ID)
		if err != nil || (prev != nil && prev.Drifted()) {
			return err
		}
		if err := models.MarkDriftNotified(ctx, tx, c.ID); err != nil {
			return err
		}
		return tx.Enqueue(ctx, jobs.NotifyDriftArgs{CheckID: c.ID}, nil)
	})
}

// NotifyDrift mails the repository's drift recipients about a drifted unit.
func (s *Service) NotifyDrift(ctx context.Context, checkID int64) error {
	db := s.Queue.DB()
	c, err := models.DriftCheckByID(ctx, db, checkID)
	if err != nil {
		return err
	}
	repo, err := models.RepositoryByName(ctx, db, c.Repository)
	if err != nil || len(repo.DriftNotify) == 0 {
		return err
	}
	if s.Mail == nil {
		s.Logger.WarnContext(ctx, "drift mail not sent: no mail configured", "repository", repo.Name, "path", c.Path)
		return nil
	}
	summary := PlanSummary(c.Output)
	if summary == "" {
		summary = "The plan has changes."
	}
	return s.Mail.Send(ctx, mail.Message{
		To:      repo.DriftNotify,
		Subject: fmt.Sprintf("Drift in %s: %s", repo.Name, c.Path),
		Text: fmt.Sprintf("Gantry planned %s of %s at %s (the trunk, %s) and found the infrastructure different from its code.\n\n%s\n\n"+
			"The plan: %s%s\n\nNothing is applied on its own: an operator can reconcile the unit from that page (a run of plan, vote and apply), or change the code to match.\n",
			c.Path, repo.Name, shortCommit(c.CommitSHA), repo.Trunk, summary, s.BaseURL, pageurl.DriftCheck(c.ID)),
	})
}

// ReconcileDrift starts a run that brings a drifted unit back to its code:
// the normal plan → vote → apply of that one unit at the trunk's head (read
// when the run takes the merge lock), queued behind the repository's other
// runs like a merge's. Only a check that found drift can be reconciled.
func (s *Service) ReconcileDrift(ctx context.Context, checkID int64, actor string) (*models.Run, error) {
	var run *models.Run
	err := s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		c, err := models.DriftCheckByID(ctx, tx, checkID)
		if err != nil {
			return notFound(err, "such drift check")
		}
		if !c.Drifted() {
			return apperr.New(apperr.Conflict, "Drift check %d of %s found no drift (%s): there is nothing to reconcile.", c.ID, c.Path, c.Status)
		}
		repo, err := models.RepositoryByName(ctx, tx, c.Repository)
		if err != nil || repo.RemovedAt != nil {
			return apperr.New(apperr.Conflict, "Repository %s is no longer in gantry.yaml.", c.Repository)
		}
		if err := models.LockRepository(ctx, tx, repo.Name); err != nil {
			return err
		}
		if live, err := models.LiveReconcileRun(ctx, tx, repo.Name, c.Path); err != nil {
			return err
		} else if live != nil {
			return apperr.New(apperr.Conflict, "Run %d is reconciling %s already.", live.ID, c.Path)
		}
		run = &models.Run{
			Repository: repo.Name, PRTitle: "Reconcile drift of " + c.Path, BaseRef: repo.Trunk, HeadRef: repo.Trunk,
			Scan: repo.Scan, ReconcileCheckID: &c.ID,
		}
		if err := models.InsertRun(ctx, tx, run); err != nil {
			return err
		}
		if err := models.AppendLog(ctx, tx, &models.LogEntry{DeploymentID: DeploymentID(run), TargetID: DriftTarget(c.ID), Revision: c.CommitSHA,
			Event: EventDriftReconcileStart, Actor: actor, Detail: map[string]any{"path": c.Path, "run": run.ID}}); err != nil {
			return err
		}
		if err := s.log(ctx, tx, run, RunTarget(run.ID), EventRunQueued, actor,
			map[string]any{"reconcile": c.Path, "drift_check": c.ID}); err != nil {
			return err
		}
		return tx.Enqueue(ctx, jobs.StartRunArgs{RunID: run.ID}, nil)
	})
	return run, err
}

// reconcileScan is a reconcile run's scan: the trunk's head, now that the
// run holds the merge lock, and the drifted unit alone, which must still be
// a unit there.
func (s *Service) reconcileScan(ctx context.Context, repo *models.Repository, run *models.Run) (string, error) {
	c, err := models.DriftCheckByID(ctx, s.Queue.DB(), *run.ReconcileCheckID)
	if err != nil {
		return "", err
	}
	commit, units, _, err := s.trunkUnits(ctx, repo)
	if err != nil {
		return "", err
	}
	run.MergeCommit, run.HeadSHA, run.BaseCommit = commit, commit, commit
	if slices.Contains(units, c.Path) {
		return c.Path, nil
	}
	return "", fmt.Errorf("%w: %s is no longer a unit on %s at %s: nothing to reconcile", errScan, c.Path, repo.Trunk, shortCommit(commit))
}

func shortCommit(sha string) string { return sha[:min(len(sha), 12)] }

// isReconcile reports whether a run reconciles drift rather than deploying
// a merge.
func isReconcile(run *models.Run) bool { return run.ReconcileCheckID != nil }

// driftDeployment names a reconcile run's deployment in the log.
func driftDeployment(run *models.Run) string {
	return fmt.Sprintf("%s#reconcile-%d", run.Repository, *run.ReconcileCheckID)
}

// recheckAfterReconcile queues a fresh drift check of the unit a reconcile
// run applied, so /infra stops listing it as drifted once it no longer is.
func (s *Service) recheckAfterReconcile(ctx context.Context, tx jobs.Tx, run *models.Run) error {
	c, err := models.DriftCheckByID(ctx, tx, *run.ReconcileCheckID)
	if err != nil {
		return err
	}
	checks, err := models.QueueDriftChecks(ctx, tx, run.Repository, run.MergeCommit, []string{c.Path})
	if err != nil {
		return err
	}
	for _, q := range checks {
		if err := tx.Enqueue(ctx, jobs.DriftPlanArgs{CheckID: q.ID, Repository: q.Repository, Path: q.Path}, nil); err != nil {
			return err
		}
	}
	return nil
}

// handOnDriftCheck queues again a drift check whose worker died (its plan
// starts over: a drift plan changes nothing), unless it ended meanwhile.
func (s *Service) handOnDriftCheck(ctx context.Context, tx jobs.Tx, q *models.QuietJob, args deadJobArgs, detail map[string]any) error {
	c, err := models.DriftCheckByID(ctx, tx, args.CheckID)
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	if err != nil || (c.Status != models.DriftQueued && c.Status != models.DriftRunning) {
		return err
	}
	detail["path"] = c.Path
	if err := models.AppendLog(ctx, tx, &models.LogEntry{TargetID: DriftTarget(c.ID), Revision: c.CommitSHA,
		Event: EventDriftCheckRequeued, Actor: "gantry", Detail: detail}); err != nil {
		return err
	}
	return tx.Enqueue(ctx, jobs.DriftPlanArgs{CheckID: c.ID, Repository: c.Repository, Path: c.Path, Requeued: q.JobID}, nil)
}
