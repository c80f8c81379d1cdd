package app

import (
	"context"
	"path/filepath"

	"github.com/gantryhq/gantry/internal/demo"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/gitrepo"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/web"
)

// infraArea is infrastructure delivery (seed 000): docs/areas/infra.md.
var infraArea = Area{Name: "infra", Build: func(_ context.Context, d *Deps) (*Parts, error) {
	svc := &infra.Service{
		Queue: d.Queue, Logger: d.Logger,
		Git:     &gitrepo.Cache{Dir: filepath.Join(d.WorkDir, "git")},
		WorkDir: filepath.Join(d.WorkDir, "jobs"),
		Getenv:  d.Getenv, GitHubAPI: d.GitHubAPI, HTTPClient: d.HTTPClient, BaseURL: d.Config.BaseURL.String(),
		Approvals: d.Approvals, Roles: d.AWS, CommandTimeout: d.Config.CommandTimeout, Env: passedEnv(d.Config.CommandEnv, d.Getenv),
		Mail: d.Mail, Metrics: infra.NewMetrics(d.Registry, d.DB), HeartbeatInterval: d.Config.HeartbeatInterval,
	}
	// Infrastructure executions are the first kind of subject voters vote on.
	d.Approvals.Register(svc.ApprovalKind())
	jobsArea := jobs.InfraArea(svc)
	return &Parts{
		Service: svc,
		Config: &ConfigSection{Sync: func(ctx context.Context, f *gantryfile.File, actor string) ([]string, error) {
			res, err := svc.Sync(ctx, f, actor)
			return append(changeLines("registered", "repository ", res.Registered, ""),
				changeLines("removed", "repository ", res.Removed, "")...), err
		}},
		Jobs: &jobsArea,
		Web:  web.InfraArea(svc),
		Demo: func(ctx context.Context) (bool, error) {
			return demo.Infra(ctx, svc, demo.InfraOptions{Dir: filepath.Join(d.Config.DataDir, "demo"), Logger: d.Logger})
		},
	}, nil
}}

// passedEnv is the NAME=value of each named variable that is set.
func passedEnv(names []string, getenv func(string) string) []string {
	var env []string
	for _, n := range names {
		if v := getenv(n); v != "" {
			env = append(env, n+"="+v)
		}
	}
	return env
}
