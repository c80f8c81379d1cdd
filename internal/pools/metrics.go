package pools

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/models"
)

// Metrics are the environment pools' own measurements, per process.
type Metrics struct {
	CleanupSeconds *prometheus.HistogramVec
	AdmissionWait  prometheus.Histogram
}

// NewMetrics registers the pools' metrics and a collector that reports
// environments by pool and state from the database at scrape time.
func NewMetrics(reg prometheus.Registerer, db *models.DB) *Metrics {
	m := &Metrics{CleanupSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gantry_environment_cleanup_seconds",
		Help:    "How long environment cleanups took, by pool and result (clean, dirty).",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
	}, []string{"pool", "result"}),
		AdmissionWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gantry_allocation_admission_wait_seconds",
			Help:    "How long allocation API transactions waited for their turn (GANTRY_ALLOCATION_CONCURRENCY).",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
	}
	reg.MustRegister(m.CleanupSeconds, m.AdmissionWait, &stateCollector{db: db,
		envs:  prometheus.NewDesc("gantry_environments", "Registered environments by pool and state (available, in_use, cleaning, dirty, deregistering).", []string{"pool", "status"}, nil),
		dirty: prometheus.NewDesc("gantry_environments_dirty", "Environments waiting for a human, over all pools.", nil, nil),
	})
	return m
}

func (m *Metrics) admitted(waited time.Duration) {
	if m != nil {
		m.AdmissionWait.Observe(waited.Seconds())
	}
}

func (m *Metrics) cleanup(pool string, clean bool, took time.Duration) {
	if m == nil {
		return
	}
	result := "clean"
	if !clean {
		result = "dirty"
	}
	m.CleanupSeconds.WithLabelValues(pool, result).Observe(took.Seconds())
}

type stateCollector struct {
	db    *models.DB
	envs  *prometheus.Desc
	dirty *prometheus.Desc
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.envs
	ch <- c.dirty
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	counts, err := models.CountEnvironments(ctx, c.db.Bun)
	if err != nil {
		return
	}
	dirty := 0
	for _, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.envs, prometheus.GaugeValue, float64(n.Count), n.Pool, n.Status)
		if n.Status == models.EnvDirty {
			dirty += n.Count
		}
	}
	ch <- prometheus.MustNewConstMetric(c.dirty, prometheus.GaugeValue, float64(dirty))
}
