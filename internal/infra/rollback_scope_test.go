package infra_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/models"
)

// `plan -destroy -target=X` also destroys what depends on X: here a
// resource of vpc's old provider (terraform_data) that reads a filer
// file. The rollback's plan is refused before any vote, naming what else
// it would destroy; nothing is destroyed and the rollback is held for an
// operator with every address left.
func TestRollback_destroyPlanBeyondItsAddressesIsHeld(t *testing.T) {
	t.Parallel()
	b, p := setupWithFiler(t)
	out := t.TempDir()
	files := filerUnit(p, infratest.VPC, out, false)
	files[infratest.VPC+"/reads_filer.tf"] = "resource \"terraform_data\" \"reads_filer\" {\n  input = filer_file.single.content\n}\n"
	files[infratest.RDS+"/main.tf"] = failingRDS(b)
	sha, run := b.merge(t, b.repo.OpenPR(41, files))
	b.approve(t, run, infratest.VPC)

	rb := b.waitRollback(t, run.ID, infratest.VPC, models.ExecFailed, models.StepPlanning)
	require.Contains(t, rb.Error, "would also destroy terraform_data.reads_filer,")
	require.Nil(t, rb.ApprovalID, "no vote was asked for")
	full, err := models.ExecutionByID(b.ctx, b.DB.Bun, rb.ID)
	require.NoError(t, err)
	require.Contains(t, full.PlanOutput, fmt.Sprintf("%d to destroy", len(filerAddresses)+1), "terraform planned the dependent too")
	for _, f := range filerPaths {
		require.FileExists(t, filepath.Join(out, f), "nothing was destroyed")
	}
	recs, err := models.RollbacksOfRun(b.ctx, b.DB.Bun, run.ID)
	require.NoError(t, err)
	require.Equal(t, filerAddresses, recs[rb.ID].Remaining)
	require.Equal(t, models.RunRunning, b.WaitRun(t, run.ID, models.RunRunning).Status, "held for an operator")
	st := b.WaitStatus(t, sha, infra.RollbackStatusContext(infratest.VPC), "failure")
	require.Contains(t, st.Description, "an operator must retry it or mark it resolved")
}
