package infra

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/models"
)

// driftCollector reads the drift counts from the database at scrape time,
// labelled by repository only (bounded by gantry.yaml), for the
// repositories with drift detection.
type driftCollector struct {
	db              *models.DB
	drifted, failed *prometheus.Desc
}

func newDriftCollector(db *models.DB) *driftCollector {
	return &driftCollector{db: db,
		drifted: prometheus.NewDesc("gantry_infra_drifted_units", "Units of the trunk whose latest drift plan has changes, by repository (repositories with drift detection).", []string{"repository"}, nil),
		failed:  prometheus.NewDesc("gantry_infra_drift_failed_units", "Units of the trunk whose latest drift plan failed, by repository.", []string{"repository"}, nil),
	}
}

func (c *driftCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.drifted
	ch <- c.failed
}

func (c *driftCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	repos, err := models.ListDrift(ctx, c.db.Bun)
	if err != nil {
		return
	}
	for _, r := range repos {
		ch <- prometheus.MustNewConstMetric(c.drifted, prometheus.GaugeValue, float64(len(r.Drifted)), r.Repository)
		ch <- prometheus.MustNewConstMetric(c.failed, prometheus.GaugeValue, float64(len(r.Failed)), r.Repository)
	}
}
