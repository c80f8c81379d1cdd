package tfstate

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChangedOutputs(t *testing.T) {
	plan := `{"format_version":"1.2","planned_values":{},"prior_state":{"format_version":"1.0","values":{"outputs":{
		"id":{"sensitive":false,"value":"vpc-v1"},
		"subnets":{"sensitive":false,"value":{"a":"10.0.1.0/24","b":"10.0.2.0/24"}},
		"password":{"sensitive":true,"value":"s3cret"},
		"gone":{"sensitive":false,"value":1},
		"count":{"sensitive":false,"value":3}}}}}`
	state := `{"format_version":"1.0","values":{"outputs":{
		"id":{"sensitive":false,"value":"vpc-v1"},
		"subnets":{"sensitive":false,"value":{"b":"10.0.2.0/24","a":"10.0.1.0/24"}},
		"password":{"sensitive":true,"value":"n3w"},
		"count":{"sensitive":false,"value":3},
		"added":{"sensitive":false,"value":[]}}}}`
	changed, err := ChangedOutputs([]byte(plan), []byte(state))
	require.NoError(t, err)
	// Key order does not count; a sensitive value that changed does, by
	// name only.
	require.Equal(t, []string{"added", "gone", "password"}, changed)

	// A first apply: no prior state, every output is new.
	changed, err = ChangedOutputs([]byte(`{"format_version":"1.2","planned_values":{}}`), []byte(state))
	require.NoError(t, err)
	require.Equal(t, []string{"added", "count", "id", "password", "subnets"}, changed)

	// Nothing changed.
	changed, err = ChangedOutputs([]byte(`{"format_version":"1.2","planned_values":{},"prior_state":{"values":{"outputs":{"id":{"value":"x"}}}}}`),
		[]byte(`{"format_version":"1.0","values":{"outputs":{"id":{"value":"x"}}}}`))
	require.NoError(t, err)
	require.Empty(t, changed)

	_, err = ChangedOutputs([]byte(state), []byte(state))
	require.ErrorContains(t, err, "not a saved plan's")
	_, err = ChangedOutputs([]byte(`{"format_version":"1.2","planned_values":{}}`), []byte(`{}`))
	require.ErrorContains(t, err, "no format_version")
}
