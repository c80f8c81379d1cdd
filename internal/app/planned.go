package app

import (
	"context"

	"github.com/gantryhq/gantry/views/components"
	"github.com/gantryhq/gantry/web"
)

// The areas below are specified (docs/areas/ and the seeds) but not built
// yet: each has its page, which says what will appear and how it will be
// set up. Building one replaces its entry here with a file like infra.go.

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
