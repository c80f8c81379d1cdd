package web

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/internal/allocation"
	"github.com/gantryhq/gantry/models"
)

// allocationMetrics are seed 001's dimensions of the allocation API: pool,
// status code and the capabilities asked for (requests) or held
// (outcomes). Labels come only from what gantry.yaml configures, never from
// what a caller wrote: a refused request (400) is counted under the pool
// "invalid" with no capabilities, and an outcome is one of a few words, so a
// caller cannot grow the series without bound.
type allocationMetrics struct {
	requests *prometheus.CounterVec
	outcomes *prometheus.CounterVec
}

func newAllocationMetrics(reg prometheus.Registerer) *allocationMetrics {
	m := &allocationMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_allocation_requests_total", Help: "Allocation requests by pool, response status and requested capabilities (a refused request counts under the pool invalid).",
		}, []string{"pool", "status", "capabilities"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_allocation_outcomes_total", Help: "Ended allocations by pool, outcome reported by the test (success, failure, error, cancelled, timeout, skipped, other, none), and the environment's capabilities.",
		}, []string{"pool", "outcome", "capabilities"}),
	}
	reg.MustRegister(m.requests, m.outcomes)
	return m
}

// request counts an allocation request; pool and reqs are the caller's, so
// they label the series only when the service accepted them as configured.
func (m *allocationMetrics) request(pool string, status int, reqs []allocation.Requirement) {
	if status == http.StatusBadRequest {
		m.requests.WithLabelValues("invalid", strconv.Itoa(status), "").Inc()
		return
	}
	caps := make([]string, 0, len(reqs))
	for _, r := range reqs {
		caps = append(caps, capabilityLabel(r.Capabilities))
	}
	sort.Strings(caps)
	m.requests.WithLabelValues(pool, strconv.Itoa(status), strings.Join(caps, ";")).Inc()
}

// outcome counts an ended allocation: its pool and capabilities are the
// environment's (configured); its outcome is the test's own text, cut down
// to a few words.
func (m *allocationMetrics) outcome(a *models.Allocation) {
	m.outcomes.WithLabelValues(a.Pool, outcomeLabel(a.Outcome), capabilityLabel(a.Capabilities)).Inc()
}

var outcomeLabels = map[string]bool{"success": true, "failure": true, "error": true, "cancelled": true, "timeout": true, "skipped": true}

func outcomeLabel(outcome string) string {
	o := strings.ToLower(strings.TrimSpace(outcome))
	switch {
	case o == "":
		return "none"
	case outcomeLabels[o]:
		return o
	case o == "succeeded" || o == "passed" || o == "ok":
		return "success"
	case o == "failed":
		return "failure"
	case o == "canceled":
		return "cancelled"
	}
	return "other"
}

// capabilityLabel writes capabilities as "k=v,k=v" in key order.
func capabilityLabel(caps map[string]string) string {
	parts := make([]string, 0, len(caps))
	for k, v := range caps {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
