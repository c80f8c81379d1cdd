package app

import (
	"context"

	"github.com/gantryhq/gantry/views/components"
	"github.com/gantryhq/gantry/web"
)

// The areas below are specified (docs/areas/ and the seeds) but not built
// yet: each has its page, which says what will appear and how it will be
// set up. Building one replaces its entry here with a file like infra.go.

var daemonsArea = planned(web.PlannedArea("daemons", "Daemons",
	"One task on every instance, rolled out safely and kept alive.",
	"Exactly one copy of a task on every instance of a cluster, rolled out within a minimum-healthy budget and restarted when it dies.",
	components.EmptyProps{
		TestID: "empty-daemons", Title: "Daemons are not built yet",
		Body: "When they are, daemon environments with their versions, rolling deployments with progress, and health per instance will appear here.",
	}))

var modulesArea = planned(web.PlannedArea("modules", "Modules",
	"Resource graphs planned before they are applied, through plugins.",
	"Modules declare resources (databases, topics, cron, verbs); Gantry keeps the resource graph, plans before it applies and provisions through plugins.",
	components.EmptyProps{
		TestID: "empty-modules", Title: "Modules are not built yet",
		Body: "When they are, the module graph, queued deployments waiting on their dependencies, and each deployment's plan will appear here.",
	}))

// planned is an area that has only its page.
func planned(w web.Area) Area {
	return Area{Name: w.Name, Build: func(context.Context, *Deps) (*Parts, error) {
		return &Parts{Web: w}, nil
	}}
}
