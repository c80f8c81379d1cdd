package daemons

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/models"
)

// Metrics are the daemons area's measurements: counters and histograms per
// process, and a collector that reads tasks, deployments and each cluster's
// staleness from the database at scrape time.
type Metrics struct {
	Deployments *prometheus.CounterVec
	Replacement prometheus.Histogram
	Reconcile   prometheus.Histogram
}

// NewMetrics registers the area's metrics.
func NewMetrics(reg prometheus.Registerer, db *models.DB) *Metrics {
	m := &Metrics{
		Deployments: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_daemon_deployments_ended_total",
			Help: "Daemon deployments that ended, by type and state (complete, unhealthy, timed-out).",
		}, []string{"type", "state"}),
		Replacement: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gantry_daemon_task_replacement_seconds",
			Help:    "From a daemon task's death to its replacement running.",
			Buckets: []float64{.1, .25, .5, 1, 2, 5, 10, 30, 60, 300},
		}),
		Reconcile: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gantry_daemon_reconcile_seconds",
			Help:    "How long a full reconcile pass over every cluster and active environment took.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
	}
	reg.MustRegister(m.Deployments, m.Replacement, m.Reconcile, &daemonCollector{db: db,
		tasks:       prometheus.NewDesc("gantry_daemon_tasks", "Daemon tasks by environment and state (live ones, and failed ones not yet replaced).", []string{"environment", "state"}, nil),
		deployments: prometheus.NewDesc("gantry_daemon_deployments", "Daemon deployments by state.", []string{"state"}, nil),
		staleness:   prometheus.NewDesc("gantry_daemon_cluster_staleness_seconds", "Seconds since each cluster's view was last refreshed in full.", []string{"cluster"}, nil),
	})
	return m
}

func (m *Metrics) deploymentEnded(typ, state string) {
	if m != nil {
		m.Deployments.WithLabelValues(typ, state).Inc()
	}
}

func (m *Metrics) replaced(d time.Duration) {
	if m != nil {
		m.Replacement.Observe(d.Seconds())
	}
}

func (m *Metrics) reconciled(d time.Duration) {
	if m != nil {
		m.Reconcile.Observe(d.Seconds())
	}
}

type daemonCollector struct {
	db                            *models.DB
	tasks, deployments, staleness *prometheus.Desc
}

func (c *daemonCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tasks
	ch <- c.deployments
	ch <- c.staleness
}

func (c *daemonCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	envs, err := models.DaemonEnvironments(ctx, c.db.Bun)
	if err != nil {
		return
	}
	counts, err := models.DaemonTaskCounts(ctx, c.db.Bun)
	if err != nil {
		return
	}
	for _, e := range envs {
		for state, n := range counts[e.ID] {
			ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(n), e.Name, state)
		}
	}
	if byState, err := models.DaemonDeploymentCounts(ctx, c.db.Bun); err == nil {
		for state, n := range byState {
			ch <- prometheus.MustNewConstMetric(c.deployments, prometheus.GaugeValue, float64(n), state)
		}
	}
	if clusters, err := models.DaemonClusters(ctx, c.db.Bun); err == nil {
		for _, cl := range clusters {
			ch <- prometheus.MustNewConstMetric(c.staleness, prometheus.GaugeValue, time.Since(cl.RefreshedAt).Seconds(), cl.Name)
		}
	}
}
