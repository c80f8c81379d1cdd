package infra

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/models"
)

func TestShowCommand(t *testing.T) {
	for _, c := range []struct {
		apply, show []string
		err         string
	}{
		{apply: []string{"terraform", "-chdir={dir}", "apply", "-input=false", "-no-color", "{plan_file}"},
			show: []string{"terraform", "-chdir={dir}", "show", "-json"}},
		{apply: []string{"terragrunt", "run", "--working-dir", "{dir}", "--non-interactive", "--", "apply", "-input=false", "-no-color", "{plan_file}"},
			show: []string{"terragrunt", "run", "--working-dir", "{dir}", "--non-interactive", "--", "show", "-json"}},
		{apply: []string{"./deploy.sh", "{dir}"}, err: `the apply command "./deploy.sh {dir}" has no apply subcommand`},
		{apply: []string{"apply"}, err: `has no apply subcommand`},
	} {
		show, err := showCommand(c.apply)
		if c.err != "" {
			require.ErrorContains(t, err, c.err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, c.show, show)
	}
}

// A rollback's plan is the unit's plan with -destroy and one -target per
// address appended: after the terragrunt preset's `--`, where Terragrunt
// passes them to terraform; the template itself is left as it was.
func TestDestroyPlan(t *testing.T) {
	addresses := []string{`module.net["east"].filer_file.subnet["a"]`, `filer_file.counted[1]`}
	tg := []string{"terragrunt", "run", "--working-dir", "{dir}", "--non-interactive", "--", "plan", "-input=false", "-no-color", "-detailed-exitcode", "-out={plan_file}"}
	got := destroyPlan(tg, addresses)
	require.Equal(t, append(append([]string{}, tg...), "-destroy",
		`-target=module.net["east"].filer_file.subnet["a"]`, `-target=filer_file.counted[1]`), got)
	require.Len(t, tg, 11, "the template is not changed")
	require.Equal(t, addresses, targets(got))
	require.Equal(t, "rollback-7-c8c5-prod-vpc-729", RollbackExecutionID("run-7-c8c5-prod-vpc-729"))
}

// The failed rollback mail goes to the voters and the drift recipients,
// each once, and says what is left, or why that is unknown.
func TestRollbackHeldMail(t *testing.T) {
	x := &models.Execution{ExecutionID: "rollback-7-c8c5-prod-vpc-001", CfgPath: "live/prod/vpc", AccountName: "prod",
		Voters: []string{"ada@example.com", "Grace@Example.com"}, Error: "apply failed (exit code 1)"}
	repo := &models.Repository{Name: "live", DriftNotify: []string{"grace@example.com", "platform@example.com"}}
	require.Equal(t, []string{"ada@example.com", "grace@example.com", "platform@example.com"}, rollbackOperators(x, repo))

	run := &models.Run{ID: 12, Repository: "live", PRNumber: 7, PRTitle: "Add files"}
	s := &Service{BaseURL: "https://gantry.example.com"}
	require.Equal(t, "[Gantry] Rollback of live/prod/vpc (prod) failed for live#7: an operator must act", rollbackHeldSubject(run, x))
	text := s.rollbackHeldText(run, x, &models.Rollback{Commit: "c8c5f6af00", Remaining: []string{"filer_file.a", "filer_file.b"}})
	require.Contains(t, text, "Why:         apply failed (exit code 1)\n")
	require.Contains(t, text, "Left in the state (2 resources):\n  filer_file.a\n  filer_file.b\n")
	require.Contains(t, text, "https://gantry.example.com/infra/executions/rollback-7-c8c5-prod-vpc-001\n")
	text = s.rollbackHeldText(run, x, &models.Rollback{RemainingError: "reading what is left in the state: no access"})
	require.Contains(t, text, "What is left is unknown: reading what is left in the state: no access\n")
	text = s.rollbackHeldText(run, x, &models.Rollback{Remaining: []string{}})
	require.Contains(t, text, "Nothing it was to destroy is left in the state.\n")
}
