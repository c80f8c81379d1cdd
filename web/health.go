package web

import (
	"context"
	"mime"
	"net/http"
	"path"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gantryhq/gantry/assets"
)

// healthz says the process is up; it touches nothing else, so a database
// outage does not get every process restarted.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz says the process can serve: the database answers and the schema is
// current. A load balancer sends no traffic until it is.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 3*time.Second)
	defer cancel()
	// The errors go to the log, not to the caller: anyone may ask, and they
	// name the database's user, host and port.
	if err := s.DB.Pool.Ping(ctx); err != nil {
		s.Logger.WarnContext(ctx, "not ready: the database does not answer", "error", err)
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "database": "unreachable (the server's log says why)"})
	}
	pending, err := s.Migrator.Pending(ctx)
	if err != nil {
		s.Logger.WarnContext(ctx, "not ready: the migrations cannot be read", "error", err)
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "migrations": "unreadable (the server's log says why)"})
	}
	if pending > 0 {
		return c.JSON(http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "pending_migrations": pending, "hint": "run gantry migrate up"})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) metricsPage(c echo.Context) error {
	promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{DisableCompression: true} /* the gzip middleware compresses */).ServeHTTP(c.Response(), c.Request())
	return nil
}

// asset serves an embedded file by its content-hashed name, cached for a year.
func (s *Server) asset(c echo.Context) error {
	name := c.Param("name")
	body, ok := assets.Open(name)
	if !ok {
		return echo.ErrNotFound
	}
	c.Response().Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	return c.Blob(http.StatusOK, mime.TypeByExtension(path.Ext(name)), body)
}
