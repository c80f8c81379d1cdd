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
