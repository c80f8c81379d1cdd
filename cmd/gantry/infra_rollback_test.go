package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/client"
	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// A failed run's rollbacks are marked in the CLI: gantry infra run lists
// them in a table of their own, gantry infra approvals marks the unit of
// one waiting for a vote, and gantry infra execution shows what a
// rollback destroys, what a failed one left and that it waits for an
// operator; the rolled-back execution lists its new providers' resources.
func TestInfraRollbackCommands(t *testing.T) {
	t.Parallel()
	s := servertest.New(t, "GANTRY_API_RATE=1000")
	p := infratest.Filer(t)
	s.Infra.Env = append(s.Infra.Env, p.Env()...)
	repo, _ := infratest.Standard(t)
	repo.Apply(infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2)
	s.Sync(t, repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{"ada@example.com"}, 1, 1))
	s.StartWorkers(t)

	made := filepath.Join(t.TempDir(), "made")
	pr := repo.OpenPR(31, map[string]string{
		infratest.VPC + "/filer.tf": p.Required() + infratest.FilerFile("made", fmt.Sprintf("%q", made), `"one"`, ""),
		infratest.RDS + "/main.tf":  repo.Resource(infratest.RDS, "rds", `file("/nonexistent/gantry-cli-rollback-test")`, infratest.VPC),
	})
	sha := repo.Merge(pr.Branch)
	s.Deliver(t, "pull_request", repo.Event(pr, "closed", sha))
	run := s.WaitRunOf(t, "live", sha)
	vpc := s.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	id := fmt.Sprint(run.ID)
	srv := &infraServer{Server: s, repo: repo}
	vera := srv.env(t, "vera@example.com", models.RoleViewer, auth.ScopeRead)
	ada := srv.env(t, "ada@example.com", models.RoleApprover, auth.ScopeRead, auth.ScopeVote)

	_, _, err := gantry(t, ada, "infra", "vote", vpc.ExecutionID, "approve")
	require.NoError(t, err)
	s.WaitExecution(t, run.ID, infratest.RDS, models.ExecFailed, models.StepPlanning)
	require.FileExists(t, made)
	var rb *models.Execution
	servertest.WaitFor(t, func() (bool, string) {
		xs, err := models.ExecutionsOfRun(t.Context(), s.DB.Bun, run.ID)
		require.NoError(t, err)
		for i := range xs {
			if xs[i].RollbackOf != nil && xs[i].Status == models.ExecRunning && xs[i].Step == models.StepVoting {
				rb = &xs[i]
			}
		}
		return rb != nil, "no rollback of vpc waiting for votes"
	})

	out, _, err := gantry(t, vera, "infra", "run", id)
	require.NoError(t, err)
	forward := regexp.MustCompile(`(?m)^(run-\S+)\s+(\S+)\s+prod\s+(\S+)\s+(.+)$`).FindAllStringSubmatch(out, -1)
	require.Len(t, forward, 3, out)
	require.Equal(t, []string{vpc.ExecutionID, infratest.VPC, "succeeded", "-"}, forward[0][1:])
	require.Regexp(t, `(?m)^rollbacks \(destroy the resources of new providers; a unit's after the units that depended on it\):\nROLLBACK\s+UNIT\s+ACCOUNT\s+STATUS\s+AFTER\n`+
		regexp.QuoteMeta(rb.ExecutionID)+`\s+live/prod/vpc\s+prod\s+running/voting\s+-\n`, out)

	out, _, err = gantry(t, vera, "infra", "run", id, "-o", "json")
	require.NoError(t, err)
	var d client.RunDetail
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	var marked []string
	for _, x := range d.Executions {
		if x.IsRollback {
			marked = append(marked, x.ExecutionID)
		}
	}
	require.Equal(t, []string{rb.ExecutionID}, marked, "is_rollback marks the rollback alone")

	out, _, err = gantry(t, ada, "infra", "approvals")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(rb.ExecutionID)+`\s+`+id+`\s+live/prod/vpc \(rollback\)\s+prod\s+1 approval$`, out)

	out, _, err = gantry(t, vera, "infra", "execution", vpc.ExecutionID)
	require.NoError(t, err)
	require.Regexp(t, `(?m)^new providers\s+registry.terraform.io/gantryhq/filer: a rollback destroys filer_file.made$`, out)

	// Rejected, the rollback fails: nothing was destroyed, and it is held.
	_, _, err = gantry(t, ada, "infra", "vote", rb.ExecutionID, "reject")
	require.NoError(t, err)
	s.WaitExecution(t, run.ID, infratest.VPC, models.ExecSucceeded, models.StepApplying)
	servertest.WaitFor(t, func() (bool, string) {
		x, err := models.ExecutionByID(t.Context(), s.DB.Bun, rb.ID)
		require.NoError(t, err)
		return x.Status == models.ExecFailed, "the rollback is " + x.Status
	})
	out, _, err = gantry(t, vera, "infra", "execution", rb.ExecutionID)
	require.NoError(t, err)
	require.Regexp(t, `(?m)^rollback of\s+`+regexp.QuoteMeta(vpc.ExecutionID)+` \(its run failed; from commit `+sha[:8]+`\)$`, out)
	require.Regexp(t, `(?m)^destroys\s+filer_file.made$`, out)
	require.Regexp(t, `(?m)^left\s+filer_file.made$`, out)
	require.Regexp(t, `(?m)^held\s+waits for an operator: retry it or mark it resolved`, out)
	out, _, err = gantry(t, vera, "infra", "execution", rb.ExecutionID, "-o", "json")
	require.NoError(t, err)
	var x client.Execution
	require.NoError(t, json.Unmarshal([]byte(out), &x))
	require.True(t, x.IsRollback)
	require.NotNil(t, x.Rollback)
	require.Equal(t, client.Rollback{RollbackOf: vpc.ExecutionID, Reason: client.RollbackRunFailed, Commit: sha,
		Addresses: []string{"filer_file.made"}, Remaining: []string{"filer_file.made"}, Held: true}, *x.Rollback)
	require.FileExists(t, made, "a rejected rollback destroys nothing")
}
