package infra

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/models"
)

// rollbackCollector reads the held rollbacks from the database at scrape
// time, for every repository of gantry.yaml (0 when none is held, so an
// alert can compare it with 0).
type rollbackCollector struct {
	db   *models.DB
	held *prometheus.Desc
}

func newRollbackCollector(db *models.DB) *rollbackCollector {
	return &rollbackCollector{db: db,
		held: prometheus.NewDesc("gantry_infra_rollbacks_held",
			"Rollbacks that failed and wait for an operator to retry them or mark them resolved, by repository.", []string{"repository"}, nil),
	}
}

func (c *rollbackCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.held }

func (c *rollbackCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	repos, err := models.ListRepositories(ctx, c.db.Bun)
	if err != nil {
		return
	}
	held, err := models.HeldRollbacks(ctx, c.db.Bun)
	if err != nil {
		return
	}
	for _, r := range repos {
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(held[r.Name]), r.Name)
	}
}
