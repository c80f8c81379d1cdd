package tfstate_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/tfstate"
)

func TestPlannedDeletes(t *testing.T) {
	plan := `{"format_version":"1.2","planned_values":{},"resource_changes":[
	{"address":"terraform_data.b","mode":"managed","change":{"actions":["delete"]}},
	{"address":"filer_file.a","mode":"managed","change":{"actions":["create","delete"]}},
	{"address":"terraform_data.kept","mode":"managed","change":{"actions":["no-op"]}},
	{"address":"terraform_data.up","mode":"managed","change":{"actions":["update"]}},
	{"address":"data.x.y","mode":"data","change":{"actions":["delete"]}}]}`
	got, err := tfstate.PlannedDeletes([]byte(plan))
	require.NoError(t, err)
	require.Equal(t, []string{"filer_file.a", "terraform_data.b"}, got)

	_, err = tfstate.PlannedDeletes([]byte(`{"format_version":"1.0","values":{}}`))
	require.ErrorContains(t, err, "not a saved plan's")
	_, err = tfstate.PlannedDeletes([]byte(`{}`))
	require.ErrorContains(t, err, "no format_version")
}
