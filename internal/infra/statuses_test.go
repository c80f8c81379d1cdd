package infra_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// TestCommitStatusesPerKind: the seed's commit_status_config. With plan
// statuses off, a pull request is still planned but only its merge-lock
// status is posted.
func TestCommitStatusesPerKind(t *testing.T) {
	t.Parallel()
	s := servertest.New(t)
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
	s := servertest.New(t)
	repo := infratest.New(t)
	s.Sync(t, repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{"Ada.Lovelace@Example.com"}, 1, 1))
	r, err := models.RepositoryByName(t.Context(), s.DB.Bun, "live")
	require.NoError(t, err)
	for _, a := range r.Accounts {
		require.Equal(t, []string{"ada.lovelace@example.com"}, a.Voters)
	}
}
