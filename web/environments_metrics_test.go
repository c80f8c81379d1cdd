package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAllocationMetricsLabelsAreBounded: a caller's pool names,
// capabilities and outcomes are its own text; only what gantry.yaml
// configures may become a label, or /metrics grows with every request.
func TestAllocationMetricsLabelsAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.applyPools(t, poolSpec{Name: "pg", Size: 1})
	token := b.ciToken(t)

	for i := range 8 {
		body := fmt.Sprintf(`{"pool":"made-up-%d","requester":"r","requirements":[{"capabilities":{"k%d":"v%d"}}]}`, i, i, i)
		res, _ := b.call(t, "POST", "/allocations", token, body)
		require.Equal(t, http.StatusBadRequest, res.StatusCode)
		res, _ = b.call(t, "POST", "/allocations", token, fmt.Sprintf(`{"pool":"pg","requester":"r","requirements":[{"capabilities":{"k%d":"v"}}]}`, i))
		require.Equal(t, http.StatusBadRequest, res.StatusCode, "an unknown capability of a real pool")
	}
	res, body := b.call(t, "POST", "/allocations", token, `{"pool":"pg","requester":"r","requirements":[{}]}`)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	lease := decodeAllocation(t, body).Allocations[0]
	res, _ = b.call(t, "DELETE", "/allocations/"+lease.ID, token, `{"outcome":"flaky test 1234 in suite X, see https://ci/…"}`)
	require.Equal(t, http.StatusOK, res.StatusCode)

	metrics := b.metrics(t, token)
	require.NotContains(t, metrics, "made-up-")
	require.NotContains(t, metrics, "k7=")
	require.Contains(t, metrics, `gantry_allocation_requests_total{capabilities="",pool="invalid",status="400"} 16`)
	require.Contains(t, metrics, `gantry_allocation_requests_total{capabilities="",pool="pg",status="200"} 1`)
	require.Contains(t, metrics, `gantry_allocation_outcomes_total{capabilities="",outcome="other",pool="pg"} 1`)
	require.False(t, strings.Contains(metrics, "flaky"), "the outcome's text stays in the history, not in a label")
}
