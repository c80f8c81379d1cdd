package app

import (
	"context"
	"fmt"
	"time"

	"github.com/gantryhq/gantry/internal/daemonplan"
	"github.com/gantryhq/gantry/internal/daemons"
	"github.com/gantryhq/gantry/internal/ecsdaemon"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/web"
)

// daemonSweepEvery is how often River's leader runs the daemons' full
// reconcile (instances past their heartbeat TTL, stale deployments, every
// active environment); events drive everything in between.
const daemonSweepEvery = 15 * time.Second

// daemonsArea is daemons (seed 002): docs/areas/daemons.md.
var daemonsArea = Area{Name: "daemons", Section: &daemons.Section, Build: func(ctx context.Context, d *Deps) (*Parts, error) {
	svc := &daemons.Service{
		Queue: d.Queue, Logger: d.Logger,
		HeartbeatInterval: daemons.DefaultHeartbeatInterval, HeartbeatTTL: daemons.DefaultHeartbeatTTL,
		StepInterval: daemons.DefaultStepInterval, Backoff: daemonplan.DefaultBackoff, CrashReset: daemons.DefaultCrashReset,
		Metrics: daemons.NewMetrics(d.Registry, d.DB),
	}
	svc.Backend = &daemons.LocalBackend{DB: d.DB.Bun, TTL: daemons.DefaultHeartbeatTTL, Now: time.Now}
	if len(d.Config.DaemonsECSClusters) > 0 {
		// One client (one retry quota, so a throttling storm is not
		// multiplied) for every ECS cluster.
		client, err := ecsdaemon.New(ctx, ecsdaemon.Options{Region: d.Config.DaemonsECSRegion, Endpoint: d.Config.DaemonsECSEndpoint})
		if err != nil {
			return nil, fmt.Errorf("daemons: the ECS client: %w", err)
		}
		ecsBackend := &daemons.ECSBackend{Client: client, DB: d.DB.Bun, Logger: d.Logger}
		svc.ClusterBackends = map[string]daemons.Backend{}
		for _, c := range d.Config.DaemonsECSClusters {
			svc.ClusterBackends[c] = ecsBackend
		}
	}
	jobsArea := jobs.DaemonsArea(svc, daemonSweepEvery)
	return &Parts{
		Service: svc,
		Config: &ConfigSection{Sync: func(ctx context.Context, f *gantryfile.File, actor string) ([]string, error) {
			res, err := svc.Sync(ctx, f, actor)
			changes := changeLines("created", "daemon environment ", res.Created, "")
			changes = append(changes, changeLines("updated", "daemon environment ", res.Updated, " (a new version; deploy it to roll it out)")...)
			changes = append(changes, changeLines("deleted", "daemon environment ", res.Deleted, "")...)
			return append(changes, changeLines("kept", "daemon environment ", res.Kept, " (a deployment is in progress; deleted at the next sync)")...), err
		}},
		Jobs: &jobsArea,
		Web:  web.DaemonsArea(svc),
		Demo: func(ctx context.Context) (bool, error) { return daemonsDemo(ctx, svc) },
	}, nil
}}

// DemoDaemonCluster is the cluster of gantry dev --demo's daemon
// environment; gantry dev starts local agents in it (cmd/gantry/dev.go).
const DemoDaemonCluster = "demo"

// daemonsDemo adds a daemon environment on the demo cluster, deployed, once:
// its tasks start as soon as gantry dev's agents register.
func daemonsDemo(ctx context.Context, svc *daemons.Service) (bool, error) {
	if _, err := svc.GetEnvironment(ctx, "node-exporter"); err == nil {
		return false, nil
	}
	_, v, err := svc.CreateEnvironment(ctx, "node-exporter", daemons.Spec{
		TaskDefinition: daemons.TaskDefinition{Name: "node-exporter", Command: []string{"/bin/sh", "-c", "while true; do sleep 60; done"}},
		InstanceGroup:  daemons.InstanceGroup{Cluster: DemoDaemonCluster, Attributes: []string{"role=web"}},
	}, "api", "gantry-demo")
	if err != nil {
		return false, err
	}
	_, err = svc.StartDeployment(ctx, "node-exporter", v.ID, "gantry-demo")
	return err == nil, err
}
