package infra

import (
	"testing"

	"github.com/stretchr/testify/require"
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
