package infra

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/gitrepo"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/models"
)

// TestGraphAt: an apply on a worker that did not scan the run (or whose
// last scan was of another commit) reads the graph of the run's commit
// from a checkout; a second ripple of the same commit uses it again.
func TestGraphAt(t *testing.T) {
	t.Parallel()
	r, first := infratest.Standard(t)
	s := &Service{Git: &gitrepo.Cache{Dir: t.TempDir(), Env: []string{"GIT_CONFIG_GLOBAL=/dev/null"}}}
	repo := &models.Repository{Name: "live", URL: r.Remote}

	g, err := s.graphAt(t.Context(), t.TempDir(), repo, first)
	require.NoError(t, err)
	require.Equal(t, []string{infratest.RDS}, g.OutputReaders(infratest.VPC))
	again, err := s.graphAt(t.Context(), t.TempDir(), repo, first)
	require.NoError(t, err)
	require.Same(t, g, again, "the same commit's graph is read once")

	// A later commit gives vpc a second reader.
	r.Write(map[string]string{
		"live/prod/app/terragrunt.hcl": "dependency \"vpc\" {\n  config_path = \"../vpc\"\n}\n",
		"live/prod/app/main.tf":        r.Resource("live/prod/app", "app", `"app"`),
	})
	second := r.Commit("app")
	r.Push(infratest.Trunk)
	g, err = s.graphAt(t.Context(), t.TempDir(), repo, second)
	require.NoError(t, err)
	require.Equal(t, []string{"live/prod/app", infratest.RDS}, g.OutputReaders(infratest.VPC))
	require.Equal(t, []string{"live/prod/app", infratest.EC2, infratest.RDS}, descendants(g, infratest.VPC))
	require.Equal(t, []string{infratest.RDS, infratest.VPC}, ancestors(g, infratest.EC2))

	_, err = s.graphAt(t.Context(), t.TempDir(), repo, "0123456789abcdef0123456789abcdef01234567")
	require.Error(t, err, "a commit the remote does not have")
}
