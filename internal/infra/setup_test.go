package infra_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// Voters of the test repository's accounts.
const (
	ada   = "ada@example.com"
	grace = "grace@example.com"
)

// bundle is an in-test Gantry with workers, the standard repository applied
// at its first commit and registered as "live".
type bundle struct {
	*servertest.Server
	repo *infratest.Repo
	ctx  context.Context
}

type options struct {
	voters        []string
	minApprovals  int
	minRejections int
	noWorkers     bool
	env           []string // configuration variables (GANTRY_…=…)
}

func setup(t *testing.T, o options) *bundle {
	t.Helper()
	if o.voters == nil {
		o.voters = []string{ada, grace}
	}
	o.minApprovals, o.minRejections = max(o.minApprovals, 1), max(o.minRejections, 1)
	s := servertest.NewWith(t, servertest.Options{NoWeb: true, Env: o.env})
	repo, _ := infratest.Standard(t)
	repo.Apply(infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2)
	s.Sync(t, repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, o.voters, o.minApprovals, o.minRejections))
	if !o.noWorkers {
		s.StartWorkers(t)
	}
	return &bundle{Server: s, repo: repo, ctx: t.Context()}
}

// merge merges p and delivers the closed (merged) event; it returns the
// merge commit and the run it started.
func (b *bundle) merge(t *testing.T, p infratest.PR) (string, *models.Run) {
	t.Helper()
	sha := b.repo.Merge(p.Branch)
	res := b.Deliver(t, "pull_request", b.repo.Event(p, "closed", sha))
	require.Equal(t, infra.WebhookAccepted, res.Outcome, res.Message)
	return sha, b.WaitRunOf(t, "live", sha)
}

// executions maps the run's units to their statuses.
func (b *bundle) executions(t *testing.T, runID int64) map[string]string {
	t.Helper()
	xs, err := models.ExecutionsOfRun(b.ctx, b.DB.Bun, runID)
	require.NoError(t, err)
	out := map[string]string{}
	for _, x := range xs {
		out[x.CfgPath] = x.Status
	}
	return out
}

func (b *bundle) mustExecution(t *testing.T, runID int64, unit string) models.Execution {
	t.Helper()
	xs, err := models.ExecutionsOfRun(b.ctx, b.DB.Bun, runID)
	require.NoError(t, err)
	for _, x := range xs {
		if x.CfgPath == unit {
			return x
		}
	}
	t.Fatalf("no execution of %s", unit)
	return models.Execution{}
}
