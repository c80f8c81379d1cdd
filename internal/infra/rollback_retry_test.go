package infra_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/models"
)

// A rollback whose destroy plan failed (approval_id NULL, as
// PlanExecution's !ok path leaves it) is retried by an operator; the retry
// must queue a new plan job.
func TestRollbackRetryAfterFailedPlanQueuesAPlan(t *testing.T) {
	b, p := setupWithFiler(t)
	out := t.TempDir()
	files := filerUnit(p, infratest.VPC, out, false)
	files[infratest.RDS+"/main.tf"] = failingRDS(b)
	_, run := b.merge(t, b.repo.OpenPR(41, files))
	b.approve(t, run, infratest.VPC)
	rb := b.waitRollback(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)

	// The state a failed destroy plan leaves (finish(false) at planning).
	_, err := b.DB.Bun.ExecContext(b.ctx, `UPDATE executions SET status='failed', step='planning', approval_id=NULL,
		error='plan: exit status 1', finished_at=now() WHERE id=?`, rb.ID)
	require.NoError(t, err)

	count := func() int {
		var n int
		require.NoError(t, b.DB.Bun.QueryRowContext(b.ctx,
			`SELECT count(*) FROM river_job WHERE kind='plan_execution' AND (args->>'execution_id')::bigint = ?`, rb.ID).Scan(&n))
		return n
	}
	before := count()
	require.NoError(t, b.Infra.ResolveRollback(b.ctx, rb.ExecutionID, infra.RollbackChoiceRetry, "ops@example.com", "provider credentials fixed"))
	x, err := models.ExecutionByID(b.ctx, b.DB.Bun, rb.ID)
	require.NoError(t, err)
	require.Equal(t, models.ExecRunning, x.Status)
	require.Equal(t, models.StepPlanning, x.Step)
	require.Equal(t, before+1, count(), "the retry queued no plan job: the rollback stays 'planning' forever and the run never ends")
}
