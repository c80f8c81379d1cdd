package app

import (
	"context"

	"github.com/gantryhq/gantry/internal/demo"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/pipelines"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/web"
)

// pipelinesArea is release pipelines progressed by reading the deployment
// log (seed 004): docs/areas/pipelines.md.
var pipelinesArea = Area{Name: "pipelines", Section: &gantryfile.PipelinesSection, Build: func(_ context.Context, d *Deps) (*Parts, error) {
	svc := &pipelines.Service{Queue: d.Queue, Logger: d.Logger, Approvals: d.Approvals, Env: passedEnv(d.Config.CommandEnv, d.Getenv)}
	// Pipeline gates are voted on like infrastructure executions.
	d.Approvals.Register(svc.ApprovalKind())
	jobsArea := jobs.PipelinesArea(svc)
	return &Parts{
		Service: svc,
		Config: &ConfigSection{Sync: func(ctx context.Context, f *gantryfile.File, actor string) ([]string, error) {
			res, err := svc.Sync(ctx, f, actor)
			changes := changeLines("registered", "pipeline ", res.Registered, "")
			changes = append(changes, changeLines("changed", "pipeline ", res.Changed, " (revisions in flight carry on under it)")...)
			return append(changes, changeLines("removed", "pipeline ", res.Removed, "")...), err
		}},
		Jobs: &jobsArea,
		Web:  web.PipelinesArea(svc),
		Demo: func(ctx context.Context) (bool, error) { return demo.Pipelines(ctx, svc) },
	}, nil
}}
