package web

import (
	"net/http"

	"github.com/gantryhq/gantry/models"
)

// EnvironmentsArea is the environment pools area (seed 001) on the web: the
// pools' pages with the dirty queue and allocation history, and the lease
// API at the seed's routes and under /api/v1. Handlers are in
// environments.go (API) and environments_pages.go (pages).
func EnvironmentsArea() Area {
	return Area{
		Name: "environments", Title: "Environments", Path: "/environments",
		Blurb: "Lease test environments to CI with temporary credentials; cleaned after use.",
		Routes: func(r *Router) {
			s := r.s
			r.Page(http.MethodGet, "/environments", s.environmentsPage, models.RoleViewer)
			r.Page(http.MethodGet, "/environments/allocations", s.allocationHistoryPage, models.RoleViewer)
			r.Page(http.MethodGet, "/environments/:id", s.environmentPage, models.RoleViewer)
			r.Page(http.MethodPost, "/environments/:id/retry-cleanup", s.retryCleanupForm, models.RoleOperator)
			r.Page(http.MethodPost, "/environments/:id/mark-clean", s.markCleanForm, models.RoleOperator)

			// The seed's routes, and the same under /api/v1; callers are
			// the clients on gantry.yaml's allow list.
			for _, prefix := range []string{"", "/api/v1"} {
				r.Public(http.MethodPost, prefix+"/allocations", s.allocate, s.leaseClient)
				r.Public(http.MethodGet, prefix+"/allocations", s.listAllocations, s.leaseReader)
				r.Public(http.MethodGet, prefix+"/allocations/:id", s.getAllocation, s.leaseReader)
				r.Public(http.MethodDelete, prefix+"/allocations/:id", s.releaseAllocation, s.leaseClient)
				r.Public(http.MethodPost, prefix+"/allocations/:id/extend", s.extendAllocation, s.leaseClient)
				r.Public(http.MethodGet, prefix+"/pools", s.listPools, s.leaseReader)
			}
		},
	}
}
