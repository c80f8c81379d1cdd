package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"riverqueue.com/riverui"

	"github.com/gantryhq/gantry/models"
)

// riverUIPrefix is where River's own UI is mounted, for admins who want to
// look deeper than the jobs page (arguments, attempts, queues).
const riverUIPrefix = "/admin/river"

// newRiverUI builds River UI (v0.13, which works with River v0.41) on the
// process's River client. Its background services run until ctx ends.
func (s *Server) newRiverUI(ctx context.Context) (http.Handler, error) {
	h, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(s.River, nil),
		Logger:    s.Logger,
		Prefix:    riverUIPrefix,
	})
	if err != nil {
		return nil, fmt.Errorf("creating River UI: %w", err)
	}
	if err := h.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting River UI: %w", err)
	}
	return h, nil
}

// riverUI serves River UI to admins. Its changes (retry, cancel, delete) do
// not pass through Gantry's code, so each one is written to the deployment
// log here before River UI carries it out.
func (s *Server) riverUI(c echo.Context) error {
	if s.riverUIHandler == nil {
		return echo.ErrNotFound
	}
	r := c.Request()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		action := strings.TrimPrefix(r.URL.Path, riverUIPrefix)
		if err := models.AppendLog(r.Context(), s.DB.Bun, &models.LogEntry{
			TargetID: "river-ui", Event: "river-ui-action", Actor: principalOf(c).Actor(),
			Detail: map[string]any{"method": r.Method, "path": action},
		}); err != nil {
			return err
		}
	}
	// River UI's page uses inline styles and one inline script; allow them
	// on its own paths only.
	c.Response().Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'")
	s.riverUIHandler.ServeHTTP(c.Response(), r)
	return nil
}
