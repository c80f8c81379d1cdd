package app

import (
	"context"
	"time"

	"github.com/gantryhq/gantry/internal/daemonplan"
	"github.com/gantryhq/gantry/internal/daemons"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/web"
)

// daemonSweepEvery is how often River's leader runs the daemons' full
// reconcile (instances past their heartbeat TTL, stale deployments, every
// active environment); events drive everything in between.
const daemonSweepEvery = 15 * time.Second

// daemonsArea is daemons (seed 002): docs/areas/daemons.md.
var daemonsArea = Area{Name: "daemons", Build: func(_ context.Context, d *Deps) (*Parts, error) {
	svc := &daemons.Service{
		Queue: d.Queue, Logger: d.Logger,
		HeartbeatInterval: daemons.DefaultHeartbeatInterval, HeartbeatTTL: daemons.DefaultHeartbeatTTL,
		StepInterval: daemons.DefaultStepInterval, Backoff: daemonplan.DefaultBackoff, CrashReset: daemons.DefaultCrashReset,
		Metrics: daemons.NewMetrics(d.Registry, d.DB),
	}
	svc.Backend = &daemons.LocalBackend{DB: d.DB.Bun, TTL: daemons.DefaultHeartbeatTTL, Now: time.Now}
	jobsArea := jobs.DaemonsArea(svc, daemonSweepEvery)
	return &Parts{
		Service: svc,
		Jobs:    &jobsArea,
		Web:     web.DaemonsArea(svc),
	}, nil
}}
