package infra

import (
	"context"
	"fmt"

	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// Commit statuses are queued in the transaction that calls for them and
// posted by their own job, so GitHub being down retries a status, never
// the plan or the run behind it. A plan's status and the merge-lock status
// are worked out when the job sends them (statusToSend), so a job retried
// late posts what is true then, never an older state over a newer one.

func (s *Service) queueStatus(ctx context.Context, tx jobs.Tx, repo *models.Repository, a jobs.PostStatusArgs) error {
	if repo.StatusTokenEnv == "" {
		return nil // statuses not configured
	}
	a.Repository = repo.Name
	return tx.Enqueue(ctx, a, nil)
}

// queuePlanStatus queues the status of a pull request's plan of one unit.
func (s *Service) queuePlanStatus(ctx context.Context, tx jobs.Tx, repo *models.Repository, p *models.PRPlan) error {
	if !repo.PlanStatuses {
		return nil
	}
	return s.queueStatus(ctx, tx, repo, jobs.PostStatusArgs{SHA: p.HeadSHA, Of: jobs.StatusOfPlan, PlanID: p.ID})
}

// queueMergeLockStatus queues the merge-lock status of a pull request's head.
func (s *Service) queueMergeLockStatus(ctx context.Context, tx jobs.Tx, repo *models.Repository, pr *models.PullRequest) error {
	if !repo.MergeLockStatuses {
		return nil
	}
	return s.queueStatus(ctx, tx, repo, jobs.PostStatusArgs{SHA: pr.HeadSHA, Of: jobs.StatusOfMergeLock, PRNumber: pr.Number})
}

// planStatus is what the status of a plan says.
func (s *Service) planStatus(p *models.PRPlan) github.Status {
	st := github.Status{Context: github.PlanContext(p.Path), TargetURL: s.BaseURL + pageurl.Plan(p.ID)}
	switch {
	case p.Status == models.PlanQueued:
		st.State, st.Description = github.StatePending, "plan queued"
	case p.Status == models.PlanRunning:
		st.State, st.Description = github.StatePending, "planning"
	case p.Status == models.PlanSucceeded && p.HasChanges != nil && *p.HasChanges:
		st.State, st.Description = github.StateSuccess, "changes to apply"
	case p.Status == models.PlanSucceeded:
		st.State, st.Description = github.StateSuccess, "no changes"
	default:
		st.State, st.Description = github.StateFailure, p.Error
	}
	return st
}

// mergeLockStatus is what the merge-lock status of a pull request says.
func (s *Service) mergeLockStatus(lock *models.MergeLock, number int) github.Status {
	if lock != nil && lock.PRNumber == 0 {
		return github.Status{
			State: github.StateFailure, Context: github.ContextMergeLock,
			Description: fmt.Sprintf("locked by run %d: it reconciles drift", lock.RunID),
			TargetURL:   s.BaseURL + pageurl.Run(lock.RunID),
		}
	}
	if lock != nil && lock.PRNumber != number {
		return github.Status{
			State: github.StateFailure, Context: github.ContextMergeLock,
			Description: fmt.Sprintf("locked by #%d: its deployment is in progress", lock.PRNumber),
			TargetURL:   s.BaseURL + pageurl.Run(lock.RunID),
		}
	}
	return github.Status{State: github.StateSuccess, Context: github.ContextMergeLock,
		Description: "unlocked: no deployment in progress", TargetURL: s.BaseURL + pageurl.Infra}
}

// RefreshMergeLock posts a fresh merge-lock status on the head of every
// open pull request of repo: the seed made authors push again to learn the
// lock was released; Gantry tells them.
func (s *Service) RefreshMergeLock(ctx context.Context, repoName string) error {
	db := s.Queue.DB()
	repo, err := models.RepositoryByName(ctx, db, repoName)
	if err != nil {
		return err
	}
	if !repo.MergeLockStatuses {
		return nil
	}
	prs, err := models.OpenPullRequests(ctx, db, repo.Name)
	if err != nil {
		return err
	}
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		for i := range prs {
			if err := s.queueMergeLockStatus(ctx, tx, repo, &prs[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// statusToSend works out the status a job posts now; false when there is
// nothing to post (a plan canceled by a newer push).
func (s *Service) statusToSend(ctx context.Context, a jobs.PostStatusArgs) (github.Status, bool, error) {
	db := s.Queue.DB()
	switch a.Of {
	case jobs.StatusOfPlan:
		p, err := models.PRPlanByID(ctx, db, a.PlanID)
		if err != nil || p.Status == models.PlanCanceled {
			return github.Status{}, false, err
		}
		return s.planStatus(p), true, nil
	case jobs.StatusOfMergeLock:
		lock, err := models.MergeLockOf(ctx, db, a.Repository)
		if err != nil {
			return github.Status{}, false, err
		}
		st := s.mergeLockStatus(lock, a.PRNumber)
		if st.State == github.StateFailure {
			err = rollbackLockStatus(ctx, db, lock, &st) // rollback_runs.go
		}
		return st, err == nil, err
	}
	return github.Status{State: github.State(a.State), Context: a.Context, Description: a.Description, TargetURL: a.TargetURL}, true, nil
}

// PostStatus sends one queued commit status to GitHub.
func (s *Service) PostStatus(ctx context.Context, a jobs.PostStatusArgs) error {
	repo, err := models.RepositoryByName(ctx, s.Queue.DB(), a.Repository)
	if err != nil {
		return err
	}
	token := s.Getenv(repo.StatusTokenEnv)
	if token == "" || repo.GitHubFullName == "" {
		s.Logger.WarnContext(ctx, "commit status not posted: no token or GitHub repository yet",
			"repository", repo.Name, "token_env", repo.StatusTokenEnv, "of", a.Of)
		return nil
	}
	st, send, err := s.statusToSend(ctx, a)
	if err != nil || !send {
		return err
	}
	owner, name, err := github.OwnerRepo(repo.GitHubFullName)
	if err != nil {
		return err
	}
	client, err := github.NewStatusClient(s.HTTPClient, token, s.GitHubAPI)
	if err != nil {
		return err
	}
	return client.SetStatus(ctx, owner, name, a.SHA, st)
}
