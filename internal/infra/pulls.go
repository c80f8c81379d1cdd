package infra

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/infrarun"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/internal/runner"
	"github.com/gantryhq/gantry/internal/tgraph"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// PlanPullRequest finds the units a pull request's head changes (their own
// files or files they read, against the merge base with the trunk) and
// queues a plan of each, with a pending status per unit.
func (s *Service) PlanPullRequest(ctx context.Context, repoName string, number int, headSHA string) error {
	db := s.Queue.DB()
	pr, err := models.PullRequestByNumber(ctx, db, repoName, number)
	if err != nil {
		return err
	}
	if pr.State != models.PROpen || pr.HeadSHA != headSHA {
		return nil // closed, merged or pushed to since
	}
	repo, err := models.RepositoryByName(ctx, db, repoName)
	if err != nil {
		return err
	}
	units, scanErr := s.changedUnits(ctx, repo, headSHA)
	if scanErr != nil && !isConfigError(scanErr) {
		return scanErr
	}
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		// The scan took a while: a push, a close or a merge may have come
		// meanwhile, and its delivery cancelled only the plans there were.
		pr, err := models.LockPullRequest(ctx, tx, repoName, number)
		if err != nil || pr.State != models.PROpen || pr.HeadSHA != headSHA {
			return err
		}
		if scanErr != nil {
			// A malformed terragrunt.hcl: the author sees why on the
			// pull request, and a push fixing it plans again. A new head
			// clears the recorded error (UpsertPullRequest), so finding it
			// already recorded means this head's failure is logged: a
			// retried job or a redelivery logs it only once.
			if pr.PlanError != scanErr.Error() {
				if err := models.AppendLog(ctx, tx, &models.LogEntry{
					DeploymentID: fmt.Sprintf("%s#%d", repoName, number), TargetID: RepositoryTarget(repoName), Revision: headSHA,
					Event: EventPullRequestScanFailed, Actor: "gantry",
					Detail: map[string]any{"pull_request": number, "head_commit": headSHA, "error": scanErr.Error()},
				}); err != nil {
					return err
				}
			}
			if err := models.SetPlanError(ctx, tx, repoName, number, headSHA, scanErr.Error()); err != nil {
				return err
			}
			if err := s.queuePlanComment(ctx, tx, repo, number); err != nil {
				return err
			}
			if !repo.PlanStatuses {
				return nil
			}
			return s.queueStatus(ctx, tx, repo, jobs.PostStatusArgs{
				SHA: headSHA, Of: jobs.StatusAsGiven, State: string(github.StateError), Context: "gantry/plan",
				Description: scanErr.Error(), TargetURL: s.BaseURL + pageurl.Pull(repo.Name, number),
			})
		}
		if err := models.SetPlanError(ctx, tx, repoName, number, headSHA, ""); err != nil {
			return err
		}
		plans := make([]*models.PRPlan, len(units))
		for i, u := range units {
			plans[i] = &models.PRPlan{Repository: repoName, PRNumber: number, HeadSHA: headSHA, Path: u, Status: models.PlanQueued}
		}
		inserted, err := models.InsertPRPlans(ctx, tx, plans)
		if err != nil {
			return err
		}
		for _, p := range inserted {
			jobID, err := tx.EnqueueJob(ctx, jobs.RunPRPlanArgs{PlanID: p.ID, Generation: p.Generation}, nil)
			if err != nil {
				return err
			}
			if err := models.SetPRPlanJob(ctx, tx, p.ID, jobID); err != nil {
				return err
			}
			if err := s.queuePlanStatus(ctx, tx, repo, p); err != nil {
				return err
			}
		}
		if err := s.queuePlanComment(ctx, tx, repo, number); err != nil {
			return err
		}
		return models.AppendLog(ctx, tx, &models.LogEntry{
			DeploymentID: fmt.Sprintf("%s#%d", repoName, number), TargetID: RepositoryTarget(repoName), Revision: headSHA,
			Event: EventPullRequestPlanned, Actor: "gantry", Detail: map[string]any{"pull_request": number, "units": units},
		})
	})
}

// changedUnits scans the head and returns the units whose files changed
// since the merge base with the trunk, in dependency order.
func (s *Service) changedUnits(ctx context.Context, repo *models.Repository, head string) ([]string, error) {
	mirror, err := s.Git.Fetch(ctx, repo.URL, head, "refs/heads/"+repo.Trunk)
	if err != nil {
		return nil, err
	}
	base, err := mirror.MergeBase(ctx, "refs/heads/"+repo.Trunk, head)
	if err != nil {
		return nil, err
	}
	changes, err := mirror.ChangedFiles(ctx, base, head)
	if err != nil {
		return nil, err
	}
	ws, err := s.workspace("scan")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(ws)
	dir := checkoutDir(ws)
	if err := mirror.Checkout(ctx, head, dir); err != nil {
		return nil, err
	}
	defer func() { _ = mirror.RemoveCheckout(context.WithoutCancel(ctx), dir) }()
	g, err := tgraph.Scan(dir)
	if g == nil {
		return nil, err
	}
	// A unit Gantry cannot read fails the pull request's scan only when
	// the pull request changes it, not every pull request of the
	// repository.
	changed := g.Affected(changes.Paths()).Changed
	var broken []error
	for _, u := range changed {
		for _, e := range g.Unit(u).Errors {
			broken = append(broken, e)
		}
	}
	if len(broken) > 0 {
		return nil, errors.Join(broken...)
	}
	return changed, nil
}

// isConfigError reports whether err is the repository's fault (a file that
// does not parse, a cycle, a missing dependency), which retrying cannot fix.
func isConfigError(err error) bool {
	var te *tgraph.Error
	return errors.As(err, &te)
}

// RunPRPlan plans one unit of a pull request at its head, streaming the
// output into the plan's row, and posts the outcome as a commit status.
func (s *Service) RunPRPlan(ctx context.Context, planID int64, generation int) error {
	db := s.Queue.DB()
	p, err := models.PRPlanByID(ctx, db, planID)
	if err != nil {
		return err
	}
	repo, err := models.RepositoryByName(ctx, db, p.Repository)
	if err != nil {
		return err
	}
	started := false
	err = s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		if started, err = models.StartPRPlan(ctx, tx, planID, generation); err != nil || !started {
			return err
		}
		return s.logPlan(ctx, tx, p, EventPlanStarted, nil)
	})
	if err != nil || !started {
		return err
	}
	sink := runner.SinkFunc(func(sctx context.Context, c runner.Chunk) error {
		return models.AppendPRPlanOutput(sctx, db, p.ID, c.Text)
	})
	// A retryable error: a newer push cancelled this job (River then
	// records it as cancelled), the worker is stopping, or git or STS
	// failed: River runs it again.
	plan, err := s.planUnit(ctx, repo, p.HeadSHA, p.Path, fmt.Sprintf("plan-%d", p.ID), fmt.Sprintf("pr-%d", p.PRNumber), "pr_plan", sink)
	if err != nil {
		return err
	}
	ok, changes := plan.ok, plan.changes
	p.ExitCode, p.HasChanges = plan.exit, &changes
	p.Status, p.Error = models.PlanSucceeded, ""
	if !ok {
		p.Status, p.Error, p.HasChanges = models.PlanFailed, plan.failure, nil
	}
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		finished, err := models.FinishPRPlan(ctx, tx, p)
		if err != nil || !finished {
			return err
		}
		event, detail := EventPlanSucceeded, map[string]any{"has_changes": changes}
		if !ok {
			event, detail = EventPlanFailed, map[string]any{"error": p.Error}
		}
		if err := s.logPlan(ctx, tx, p, event, detail); err != nil {
			return err
		}
		if err := s.queuePlanComment(ctx, tx, repo, p.PRNumber); err != nil {
			return err
		}
		return s.queuePlanStatus(ctx, tx, repo, p)
	})
}

// logPlan appends a pull request plan's transition to the log.
func (s *Service) logPlan(ctx context.Context, tx jobs.Tx, p *models.PRPlan, event string, detail map[string]any) error {
	if detail == nil {
		detail = map[string]any{}
	}
	detail["path"], detail["pull_request"] = p.Path, p.PRNumber
	return models.AppendLog(ctx, tx, &models.LogEntry{
		DeploymentID: fmt.Sprintf("%s#%d", p.Repository, p.PRNumber), TargetID: PlanTarget(p.ID), Revision: p.HeadSHA,
		Event: event, Actor: "gantry", Detail: detail,
	})
}

func accountFor(accounts []models.Account, dir string) *models.Account {
	paths := make([]string, len(accounts))
	for i, a := range accounts {
		paths[i] = a.Path
	}
	if i := infrarun.AccountIndex(paths, dir); i >= 0 {
		return &accounts[i]
	}
	return nil
}
