package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/views/components"
	"github.com/gantryhq/gantry/views/pages/areas"
)

// The areas below are specified (docs/ and the seeds) but not built yet; their
// pages say what will appear and how it will be set up, rather than pretend.
var (
	areaDaemons = areas.View{
		Title: "Daemons",
		Lead:  "Exactly one copy of a task on every instance of a cluster, rolled out within a minimum-healthy budget and restarted when it dies.",
		Empty: components.EmptyProps{
			TestID: "empty-daemons", Title: "Daemons are not built yet",
			Body: "When they are, daemon environments with their versions, rolling deployments with progress, and health per instance will appear here.",
			Doc:  "docs/areas/daemons.md",
		},
	}
	areaModules = areas.View{
		Title: "Modules",
		Lead:  "Modules declare resources (databases, topics, cron, verbs); Gantry keeps the resource graph, plans before it applies and provisions through plugins.",
		Empty: components.EmptyProps{
			TestID: "empty-modules", Title: "Modules are not built yet",
			Body: "When they are, the module graph, queued deployments waiting on their dependencies, and each deployment's plan will appear here.",
			Doc:  "docs/areas/modules.md",
		},
	}
	areaPipelines = areas.View{
		Title: "Pipelines",
		Lead:  "Release pipelines of stages, host groups and hosts that move each revision forward by reading the deployment log.",
		Empty: components.EmptyProps{
			TestID: "empty-pipelines", Title: "Pipelines are not built yet",
			Body: "When they are, each pipeline's stages with the position of every revision in flight, gates waiting for approval, and batches will appear here. Until then, CI can already record its own steps in the deployment log (POST /api/v1/log).",
			Doc:  "docs/areas/pipelines.md",
		},
	}
)

func (s *Server) areaPage(v areas.View) echo.HandlerFunc {
	return func(c echo.Context) error {
		return s.render(c, http.StatusOK, areas.Page(v))
	}
}
