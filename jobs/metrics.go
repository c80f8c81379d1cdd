package jobs

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/models"
)

// MetricsCollector reports River's jobs by state and kind at scrape time, so
// every process reports the same cluster-wide numbers from the database.
type MetricsCollector struct {
	db     *models.DB
	jobs   *prometheus.Desc
	failed *prometheus.Desc
}

// NewMetricsCollector returns a collector to register once per process.
func NewMetricsCollector(db *models.DB) *MetricsCollector {
	return &MetricsCollector{
		db:     db,
		jobs:   prometheus.NewDesc("gantry_jobs", "Background jobs by state and kind.", []string{"state", "kind"}, nil),
		failed: prometheus.NewDesc("gantry_jobs_scrape_errors", "1 when the last jobs count failed.", nil, nil),
	}
}

func (m *MetricsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.jobs
	ch <- m.failed
}

func (m *MetricsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	counts, err := models.CountJobs(ctx, m.db.Bun)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(m.failed, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(m.failed, prometheus.GaugeValue, 0)
	for _, c := range counts {
		ch <- prometheus.MustNewConstMetric(m.jobs, prometheus.GaugeValue, float64(c.Count), c.State, c.Kind)
	}
}
