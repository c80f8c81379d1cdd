package servertest

import (
	"github.com/gantryhq/gantry/internal/app"
	"github.com/gantryhq/gantry/internal/daemons"
)

// The daemons area's driver.

// Daemons is the application's daemons service.
func (s *Server) Daemons() *daemons.Service { return app.ServiceOf[*daemons.Service](s.App) }
