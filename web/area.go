package web

import (
	"context"
	"net/http"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/views"
	"github.com/gantryhq/gantry/views/components"
	"github.com/gantryhq/gantry/views/pages/areas"
)

// Area is what one area of Gantry adds to the web server: its entry in the
// navigation, its card on the home page and its routes. Each area builds
// its own in its handler file (EnvironmentsArea, InfraArea); the
// application's assembly lists them once, in the order the navigation
// shows them.
type Area struct {
	Name  string // lower-case, as in docs/areas/<name>.md: "infra"
	Title string // the navigation's label and the card's title
	Path  string // the area's main page
	Blurb string // one sentence on the home page
	// Summary, when set, is a short line of live numbers under the area's
	// card ("2 runs wait for votes"); an error leaves the line out.
	Summary func(ctx context.Context) (string, error)
	// Routes registers the area's URLs, each with its guard.
	Routes func(r *Router)
}

// Router is how an area registers its routes: every page and API route
// goes through the same guards, rate limit and error handling as the rest
// of Gantry.
type Router struct {
	s     *Server
	api   *echo.Group // /api/v1, rate limited
	limit echo.MiddlewareFunc
}

// Page adds a browser page (or form post) for signed-in users of at least
// role; others are sent to sign in or told they may not.
func (r *Router) Page(method, path string, h echo.HandlerFunc, role models.Role) {
	r.s.echo.Add(method, path, h, r.s.page(role))
}

// API adds a JSON endpoint under /api/v1 for callers of at least role whose
// token has scope.
func (r *Router) API(method, path string, h echo.HandlerFunc, role models.Role, scope string) {
	r.api.Add(method, path, h, r.s.api(role, scope))
}

// RootAndAPI adds an API route twice, at the root (where a seed's clients
// call it) and under /api/v1, each with guard and then the API's rate
// limit (after the guard, which tells the limit who is calling).
func (r *Router) RootAndAPI(method, path string, h echo.HandlerFunc, guard echo.MiddlewareFunc) {
	for _, prefix := range []string{"", "/api/v1"} {
		r.s.echo.Add(method, prefix+path, h, guard, r.limit)
		r.s.machine[prefix+path] = machineRoute{}
	}
}

// Webhook adds a POST endpoint for another service's signed deliveries: the
// handler checks the signature itself, so there is no session, no CSRF
// token and no rate limit per token; bodies may be up to maxBody bytes
// instead of the usual 1 MB; errors are JSON.
func (r *Router) Webhook(path string, h echo.HandlerFunc, maxBody int64) {
	r.s.echo.POST(path, h, declaredBodyLimit(maxBody))
	r.s.machine[path] = machineRoute{signed: true}
}

// declaredBodyLimit refuses a body whose declared length is over max before
// reading it, saying the real limit; the handler bounds what it reads, for
// bodies that declare no length.
func declaredBodyLimit(max int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if c.Request().ContentLength > max {
				return apperr.New(apperr.Invalid, "The request body is larger than %d MB, the limit here.", max>>20)
			}
			return next(c)
		}
	}
}

// machineRoute is how a route that programs call (not browsers) is
// treated by the shared middleware: errors as JSON always; a signed one
// also skips CSRF and sets its own body limit.
type machineRoute struct{ signed bool }

// VoterHelp adds what the area says on an empty /approvals about what
// would make its subjects wait for the signed-in voter.
func (r *Router) VoterHelp(f VoterHelpFunc) {
	r.s.voterHelp = append(r.s.voterHelp, f)
}

// VotePage sets what the page of a voting link shows of the area's subjects
// of kind (the approvals service's kinds).
func (r *Router) VotePage(kind string, f VotePageFunc) {
	r.s.votePages[kind] = f
}

// Render writes a page inside Gantry's layout (navigation, user, flash).
func (r *Router) Render(c echo.Context, status int, page templ.Component) error {
	return r.s.render(c, status, page)
}

// PlannedArea is an area that is specified but not built yet: its page says
// what will appear there and how it will be set up, rather than pretend.
func PlannedArea(name, title, blurb, lead string, empty components.EmptyProps) Area {
	path := "/" + name
	empty.Doc = "docs/areas/" + name + ".md"
	v := areas.View{Title: title, Lead: lead, Empty: empty}
	return Area{Name: name, Title: title, Path: path, Blurb: blurb, Routes: func(r *Router) {
		r.Page(http.MethodGet, path, func(c echo.Context) error { return r.Render(c, http.StatusOK, areas.Page(v)) }, models.RoleViewer)
	}}
}

// nav is the navigation's list of areas, for the layout.
func (s *Server) nav() []views.NavItem {
	items := make([]views.NavItem, len(s.Areas))
	for i, a := range s.Areas {
		items[i] = views.NavItem{Href: a.Path, Label: a.Title}
	}
	return items
}
