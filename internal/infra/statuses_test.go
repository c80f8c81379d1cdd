package infra_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/github/githubtest"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// TestCommitStatusesPerKind: the seed's commit_status_config. With plan
// statuses off, a pull request is still planned but only its merge-lock
// status is posted.
func TestCommitStatusesPerKind(t *testing.T) {
	t.Parallel()
	s := servertest.Services(t)
	repo, _ := infratest.Standard(t)
	yaml := repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{ada}, 1, 1)
	s.Sync(t, strings.Replace(yaml, "scan: graph\n", "scan: graph\n    commit_statuses: {plan: false}\n", 1))
	s.StartWorkers(t)

	p := repo.OpenPR(95, map[string]string{infratest.VPC + "/main.tf": repo.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
	s.Deliver(t, "pull_request", repo.Event(p, "opened", ""))
	s.WaitStatus(t, p.Head, github.ContextMergeLock, "success")
	servertest.WaitFor(t, func() (bool, string) {
		plans, err := models.PlansOfPullRequest(t.Context(), s.DB.Bun, "live", p.Number, p.Head)
		require.NoError(t, err)
		return len(plans) == 1 && plans[0].Status == models.PlanSucceeded, "the plan has not finished"
	})
	for _, st := range s.GitHub.Statuses(p.Head) {
		require.Equal(t, github.ContextMergeLock, st.Context, "only merge-lock statuses")
	}
}

// TestSync_lowerCasesVoters: voters are compared as email addresses, so an
// address written with capitals in gantry.yaml still finds its approvals.
func TestSync_lowerCasesVoters(t *testing.T) {
	t.Parallel()
	s := servertest.Services(t)
	repo := infratest.New(t)
	s.Sync(t, repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{"Ada.Lovelace@Example.com"}, 1, 1))
	r, err := models.RepositoryByName(t.Context(), s.DB.Bun, "live")
	require.NoError(t, err)
	for _, a := range r.Accounts {
		require.Equal(t, []string{"ada.lovelace@example.com"}, a.Voters)
	}
}

// TestForksAreNotPlanned: a pull request from a fork is not planned (its
// code would run with the plan role) unless the repository says plan_forks;
// the pull request says why.
func TestForksAreNotPlanned(t *testing.T) {
	t.Parallel()
	for _, planForks := range []bool{false, true} {
		t.Run(fmt.Sprintf("plan_forks=%v", planForks), func(t *testing.T) {
			t.Parallel()
			s := servertest.Services(t)
			repo, _ := infratest.Standard(t)
			yaml := repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{ada}, 1, 1)
			if planForks {
				yaml = strings.Replace(yaml, "scan: graph\n", "scan: graph\n    plan_forks: true\n", 1)
			}
			s.Sync(t, yaml)
			s.StartWorkers(t)
			p := repo.OpenPR(96, map[string]string{infratest.VPC + "/main.tf": repo.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
			body := githubtest.PullRequest{
				Action: "opened", Number: p.Number, Title: "From a fork", Repo: infratest.GitHubRepo, CloneURL: repo.Remote,
				Base: infratest.Trunk, BaseSHA: infratest.Git(t, repo.Work, "rev-parse", infratest.Trunk), Head: p.Branch, HeadSHA: p.Head,
				HeadRepo: "mallory/infra-live",
			}.Payload()
			s.Deliver(t, "pull_request", body)
			s.WaitStatus(t, p.Head, github.ContextMergeLock, "success")
			if planForks {
				s.WaitStatus(t, p.Head, github.PlanContext(infratest.VPC), "success")
				return
			}
			pr, err := models.PullRequestByNumber(t.Context(), s.DB.Bun, "live", p.Number)
			require.NoError(t, err)
			require.Contains(t, pr.PlanError, "comes from mallory/infra-live")
			plans, err := models.PlansOfPullRequest(t.Context(), s.DB.Bun, "live", p.Number, p.Head)
			require.NoError(t, err)
			require.Empty(t, plans)
		})
	}
}
