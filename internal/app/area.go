package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/awsenv"
	"github.com/gantryhq/gantry/internal/config"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/mail"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/web"
)

// Area is one part of Gantry (infrastructure, environments, …) as the
// assembly sees it: a name and how to build its parts from what every area
// shares. Each area's Area is in its own file here; the list is Areas.
type Area struct {
	Name string
	// Section, for an area that reads its own top-level key of gantry.yaml,
	// decodes and checks it (before anything is built: gantry config check).
	Section *gantryfile.Section
	// Build makes the area's service and its parts in every layer.
	Build func(ctx context.Context, d *Deps) (*Parts, error)
}

// Deps are what the application gives every area.
type Deps struct {
	Config *config.Config
	Logger *slog.Logger
	DB     *models.DB
	Queue  *jobs.Queue
	Getenv func(string) string
	Mail   mail.Sender // nil: Gantry sends no mail
	AWS    *awsenv.Provider
	// Approvals is the one approvals service; an area registers its kinds
	// of subject (what voters vote on) with it.
	Approvals *approvals.Service
	Registry  prometheus.Registerer
	// HTTPClient makes the calls to other services (GitHub, webhooks).
	HTTPClient *http.Client
	// WorkDir is where commands' checkouts and files go.
	WorkDir string
	// GitHubAPI is GitHub's REST API address.
	GitHubAPI string
}

// Parts are what an area adds to each layer. Every field but Web may be
// left out by an area that has nothing there.
type Parts struct {
	// Service is the area's domain service, for the test harnesses
	// (ServiceOf) and the area's own parts.
	Service any
	// Config syncs the area's part of gantry.yaml into the database.
	Config *ConfigSection
	// Jobs are the area's queue, job kinds and sweeps.
	Jobs *jobs.Area
	// Web is the area's navigation entry, home card and routes.
	Web web.Area
	// Demo adds the area's example data for gantry dev --demo, once; it
	// reports whether it added anything.
	Demo func(ctx context.Context) (bool, error)
	// Close releases what the service holds (connections to other servers).
	Close func()
}

// ConfigSection is how an area applies its part of gantry.yaml (checked
// inside internal/gantryfile for environments and infra, by the Area's
// Section for a new area).
type ConfigSection struct {
	// Sync makes the database match f, logging as actor, and says what it
	// changed, one line per thing ("registered    repository live").
	Sync func(ctx context.Context, f *gantryfile.File, actor string) ([]string, error)
}

// changeLines words what a sync changed, one line per thing, the verbs
// aligned as gantry config apply prints them ("registered    repository
// live").
func changeLines(verb, what string, names []string, note string) []string {
	lines := make([]string, len(names))
	for i, n := range names {
		lines[i] = fmt.Sprintf("%-13s %s%s%s", verb, what, n, note)
	}
	return lines
}
