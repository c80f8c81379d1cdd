package web

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/internal/allocation"
	"github.com/gantryhq/gantry/models"
)

// httpMetrics counts requests by route template (not raw path, which would
// explode the series) and status.
type httpMetrics struct {
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	allocations *prometheus.CounterVec
	outcomes    *prometheus.CounterVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gantry_http_request_duration_seconds", Help: "HTTP request latency by route and method.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method"}),
	}
	// Seed 001's dimensions: pool, status code and the capabilities asked
	// for (requests) or held (outcomes).
	m.allocations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gantry_allocation_requests_total", Help: "Allocation requests by pool, response status and requested capabilities.",
	}, []string{"pool", "status", "capabilities"})
	m.outcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gantry_allocation_outcomes_total", Help: "Ended allocations by pool, outcome reported by the test, and the environment's capabilities.",
	}, []string{"pool", "outcome", "capabilities"})
	reg.MustRegister(m.requests, m.latency, m.allocations, m.outcomes)
	return m
}

func (m *httpMetrics) allocation(pool string, status int, reqs []allocation.Requirement) {
	caps := make([]string, 0, len(reqs))
	for _, r := range reqs {
		caps = append(caps, capabilityLabel(r.Capabilities))
	}
	sort.Strings(caps)
	m.allocations.WithLabelValues(pool, strconv.Itoa(status), strings.Join(caps, ";")).Inc()
}

func (m *httpMetrics) outcome(a *models.Allocation) {
	m.outcomes.WithLabelValues(a.Pool, a.Outcome, capabilityLabel(a.Capabilities)).Inc()
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

func (m *httpMetrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err) // let the error handler set the status we record
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		method := c.Request().Method
		m.requests.WithLabelValues(route, method, strconv.Itoa(c.Response().Status)).Inc()
		m.latency.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
		return nil
	}
}
