package tfstate_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/tfstate"
)

const (
	builtin = "terraform.io/builtin/terraform"
	filer   = "registry.terraform.io/gantryhq/filer"
)

// The filer resources the fixture deployment created, by full address.
var deployed = []string{
	`filer_file.counted[0]`,
	`filer_file.counted[1]`,
	`filer_file.keyed["a"]`,
	`filer_file.keyed["b"]`,
	`filer_file.single`,
	`module.net["east"].filer_file.subnet[0]`,
	`module.net["east"].module.inner.filer_file.route["main"]`,
}

// checkDeployment checks the answer for the fixture deployment: before is
// the saved plan's prior state (or, equally, the state the previous apply
// left), after the state its apply left.
func checkDeployment(t *testing.T, s shows) {
	t.Helper()
	prior, err := tfstate.PriorResources(s.Plan)
	require.NoError(t, err)
	before, err := tfstate.StateResources(s.Before)
	require.NoError(t, err)
	require.Equal(t, tfstate.Providers(before), tfstate.Providers(prior))
	require.Equal(t, []string{builtin}, tfstate.Providers(prior))

	after, err := tfstate.StateResources(s.After)
	require.NoError(t, err)
	require.Equal(t, []string{filer, builtin}, tfstate.Providers(after))
	providers, addresses := tfstate.NewProviderResources(prior, after)
	require.Equal(t, []string{filer}, providers)
	require.Equal(t, deployed, addresses)
}

func TestNewProviderResources(t *testing.T) {
	s := committed(t)
	checkDeployment(t, s)

	prior, err := tfstate.PriorResources(s.Plan)
	require.NoError(t, err)
	after, err := tfstate.StateResources(s.After)
	require.NoError(t, err)
	first, err := tfstate.PriorResources(s.FirstPlan)
	require.NoError(t, err)
	before, err := tfstate.StateResources(s.Before)
	require.NoError(t, err)

	for _, c := range []struct {
		name                 string
		before, after        []tfstate.Resource
		providers, addresses []string
	}{
		// A unit's first deployment introduced every provider it uses.
		{"first deployment", first, before, []string{builtin}, []string{"terraform_data.existing"}},
		// A later deployment with the same providers introduced none,
		// although it added resources.
		{"providers already there", after, after, nil, nil},
		{"builtin provider kept", prior, after, []string{filer}, deployed},
		// A deployment that removed resources introduced nothing.
		{"resources removed", after, before, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			providers, addresses := tfstate.NewProviderResources(c.before, c.after)
			require.Equal(t, c.providers, providers)
			require.Equal(t, c.addresses, addresses)
		})
	}
}

// A provider already used by a data source was not introduced by the
// deployment; data sources are never destroyed.
func TestNewProviderResourcesDataSources(t *testing.T) {
	before := []tfstate.Resource{{Address: "data.aws_caller_identity.me", Mode: "data", ProviderName: "registry.terraform.io/hashicorp/aws"}}
	after := []tfstate.Resource{
		before[0],
		{Address: "aws_s3_bucket.logs", Mode: "managed", ProviderName: "registry.terraform.io/hashicorp/aws"},
		{Address: "data.null_data_source.x", Mode: "data", ProviderName: "registry.terraform.io/hashicorp/null"},
		{Address: "module.a.null_resource.y", Mode: "managed", ProviderName: "registry.terraform.io/hashicorp/null"},
	}
	providers, addresses := tfstate.NewProviderResources(before, after)
	require.Equal(t, []string{"registry.terraform.io/hashicorp/null"}, providers)
	require.Equal(t, []string{"module.a.null_resource.y"}, addresses)
}

func TestShowErrors(t *testing.T) {
	s := committed(t)
	_, err := tfstate.StateResources(s.Plan)
	require.ErrorContains(t, err, "a plan's terraform show -json, not a state's")
	_, err = tfstate.PriorResources(s.After)
	require.ErrorContains(t, err, "a state's terraform show -json, not a saved plan's")
	_, err = tfstate.StateResources([]byte(`{"resources": []}`))
	require.ErrorContains(t, err, "no format_version")
	_, err = tfstate.StateResources([]byte("Error: No state"))
	require.ErrorContains(t, err, "reading terraform show -json")
	// An empty state (no apply yet) has no resources.
	rs, err := tfstate.StateResources([]byte(`{"format_version":"1.0"}`))
	require.NoError(t, err)
	require.Empty(t, rs)
}
