package infra

import (
	"context"
	"fmt"

	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// Commit statuses are queued in the transaction that decides them and
// posted by their own job, so GitHub being down retries a status, never
// the plan or the run behind it.

func (s *Service) queueStatus(ctx context.Context, tx jobs.Tx, repo *models.Repository, sha string, st github.Status) error {
	if repo.StatusTokenEnv == "" {
		return nil // statuses not configured
	}
	return tx.Enqueue(ctx, jobs.PostStatusArgs{
		Repository: repo.Name, SHA: sha, State: string(st.State), Context: st.Context,
		Description: st.Description, TargetURL: st.TargetURL,
	}, nil)
}

// mergeLockStatus is what the merge-lock status of a pull request says.
func (s *Service) mergeLockStatus(lock *models.MergeLock, number int) github.Status {
	if lock != nil && lock.PRNumber != number {
		return github.Status{
			State: github.StateFailure, Context: github.ContextMergeLock,
			Description: fmt.Sprintf("locked by #%d: its deployment is in progress", lock.PRNumber),
			TargetURL:   s.BaseURL + fmt.Sprintf("/infra/runs/%d", lock.RunID),
		}
	}
	return github.Status{State: github.StateSuccess, Context: github.ContextMergeLock,
		Description: "unlocked: no deployment in progress", TargetURL: s.BaseURL + "/infra"}
}

func (s *Service) postMergeLockStatus(ctx context.Context, tx jobs.Tx, repo *models.Repository, pr *models.PullRequest) error {
	if !repo.MergeLockStatuses {
		return nil
	}
	lock, err := models.MergeLockOf(ctx, tx, repo.Name)
	if err != nil {
		return err
	}
	return s.queueStatus(ctx, tx, repo, pr.HeadSHA, s.mergeLockStatus(lock, pr.Number))
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
			if err := s.postMergeLockStatus(ctx, tx, repo, &prs[i]); err != nil {
				return err
			}
		}
		return nil
	})
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
			"repository", repo.Name, "token_env", repo.StatusTokenEnv, "context", a.Context)
		return nil
	}
	owner, name, err := github.OwnerRepo(repo.GitHubFullName)
	if err != nil {
		return err
	}
	client, err := github.NewStatusClient(s.HTTPClient, token, s.GitHubAPI)
	if err != nil {
		return err
	}
	return client.SetStatus(ctx, owner, name, a.SHA, github.Status{
		State: github.State(a.State), Context: a.Context, Description: a.Description, TargetURL: a.TargetURL,
	})
}
