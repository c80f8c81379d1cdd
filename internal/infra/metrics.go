package infra

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/models"
)

// Metrics are the infrastructure area's measurements, per process, plus
// counts read from the database at scrape time.
type Metrics struct {
	Deliveries     *prometheus.CounterVec
	CommandSeconds *prometheus.HistogramVec
	// PlanStartDelay is the time from an execution's last dependency
	// succeeding to its plan starting (docs/performance.md has the aim).
	PlanStartDelay prometheus.Histogram
}

// NewMetrics registers the area's metrics.
func NewMetrics(reg prometheus.Registerer, db *models.DB) *Metrics {
	m := &Metrics{
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_infra_webhook_deliveries_total",
			Help: "GitHub deliveries received, by event and result (accepted, duplicate, ignored, refused, invalid).",
		}, []string{"event", "result"}),
		CommandSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gantry_infra_command_seconds",
			Help:    "How long plans and applies took (checkout and init included), by kind (pr_plan, plan, apply) and result (succeeded, failed).",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
		}, []string{"kind", "result"}),
		PlanStartDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gantry_infra_plan_start_delay_seconds",
			Help:    "Time from an execution's last dependency succeeding to its plan starting.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30},
		}),
	}
	reg.MustRegister(m.Deliveries, m.CommandSeconds, m.PlanStartDelay, newDriftCollector(db), newRollbackCollector(db), &infraCollector{db: db,
		runs:       prometheus.NewDesc("gantry_infra_runs", "Deployment runs by repository and status.", []string{"repository", "status"}, nil),
		executions: prometheus.NewDesc("gantry_infra_executions", "Executions of unfinished runs by repository and status (a running one by its step: planning, voting, applying, interrupted).", []string{"repository", "status"}, nil),
		locked:     prometheus.NewDesc("gantry_infra_merge_locked", "1 while a deployment holds the repository's merge lock.", []string{"repository"}, nil),
	})
	return m
}

func (m *Metrics) delivery(event, result string) {
	if m != nil {
		m.Deliveries.WithLabelValues(event, result).Inc()
	}
}

func (m *Metrics) command(kind string, ok bool, took time.Duration) {
	if m == nil {
		return
	}
	result := "succeeded"
	if !ok {
		result = "failed"
	}
	m.CommandSeconds.WithLabelValues(kind, result).Observe(took.Seconds())
}

func (m *Metrics) planStarted(ready *time.Time, started time.Time) {
	if m != nil && ready != nil {
		m.PlanStartDelay.Observe(started.Sub(*ready).Seconds())
	}
}

type infraCollector struct {
	db                       *models.DB
	runs, executions, locked *prometheus.Desc
}

func (c *infraCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.runs
	ch <- c.executions
	ch <- c.locked
}

func (c *infraCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if runs, err := models.CountRuns(ctx, c.db.Bun); err == nil {
		for _, n := range runs {
			ch <- prometheus.MustNewConstMetric(c.runs, prometheus.GaugeValue, float64(n.Count), n.Repository, n.Status)
		}
	}
	if xs, err := models.CountLiveExecutions(ctx, c.db.Bun); err == nil {
		for _, n := range xs {
			ch <- prometheus.MustNewConstMetric(c.executions, prometheus.GaugeValue, float64(n.Count), n.Repository, n.Status)
		}
	}
	if repos, err := models.ListRepositories(ctx, c.db.Bun); err == nil {
		locked, err := models.LockedRepositories(ctx, c.db.Bun)
		if err != nil {
			return
		}
		held := map[string]bool{}
		for _, r := range locked {
			held[r] = true
		}
		for _, r := range repos {
			v := 0.0
			if held[r.Name] {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.locked, prometheus.GaugeValue, v, r.Name)
		}
	}
}
