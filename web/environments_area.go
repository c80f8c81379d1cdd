package web

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/models"
)

// environmentsHandlers are the environment pools area's handlers: the
// server's shared parts and the area's service.
type environmentsHandlers struct {
	*Server
	Pools             *pools.Service
	allocationMetrics *allocationMetrics
}

// EnvironmentsArea is the environment pools area (seed 001) on the web: the
// pools' pages with the dirty queue and allocation history, and the lease
// API at the seed's routes and under /api/v1. Handlers are in
// environments.go (API, its JSON in environments_api.go) and
// environments_pages.go (pages).
func EnvironmentsArea(svc *pools.Service) Area {
	return Area{
		Name: "environments", Title: "Environments", Path: "/environments",
		Blurb: "Lease test environments to CI with temporary credentials; cleaned after use.",
		Summary: func(ctx context.Context) (string, error) {
			counts, err := models.CountEnvironmentStates(ctx, svc.Queue.DB())
			if err != nil || len(counts) == 0 {
				return "", err
			}
			pools, total, byState := map[string]bool{}, 0, map[string]int{}
			for _, c := range counts {
				pools[c.Pool] = true
				total += c.Count
				byState[c.State] += c.Count
			}
			line := fmt.Sprintf("%s · %d of %d environments in use", plural(len(pools), "pool", "pools"), byState[models.EnvInUse], total)
			if n := byState[models.EnvDirty]; n > 0 {
				line += fmt.Sprintf(" · %d dirty", n)
			}
			return line, nil
		},
		Routes: func(r *Router) {
			s := &environmentsHandlers{Server: r.s, Pools: svc, allocationMetrics: newAllocationMetrics(r.s.Registry)}
			r.Page(http.MethodGet, "/environments", s.environmentsPage, models.RoleViewer)
			r.Page(http.MethodGet, "/environments/allocations", s.allocationHistoryPage, models.RoleViewer)
			r.Page(http.MethodGet, "/environments/:id", s.environmentPage, models.RoleViewer)
			r.Page(http.MethodPost, "/environments/:id/retry-cleanup", s.retryCleanupForm, models.RoleOperator)
			r.Page(http.MethodPost, "/environments/:id/mark-clean", s.markCleanForm, models.RoleOperator)

			// The seed's routes at the root, where its clients call them,
			// and the same under /api/v1. Leasing is for the clients on
			// gantry.yaml's allow list; reading the pools and the history
			// also for people, as the pages are.
			lease := s.apiClient(auth.ScopeWrite)
			read := s.apiOrClient(models.RoleViewer, auth.ScopeRead, auth.ScopeWrite)
			r.RootAndAPI(http.MethodPost, "/allocations", s.allocate, lease)
			r.RootAndAPI(http.MethodGet, "/allocations", s.listAllocations, read)
			r.RootAndAPI(http.MethodGet, "/allocations/:id", s.getAllocation, read)
			r.RootAndAPI(http.MethodDelete, "/allocations/:id", s.releaseAllocation, lease)
			r.RootAndAPI(http.MethodPost, "/allocations/:id/extend", s.extendAllocation, lease)
			r.RootAndAPI(http.MethodGet, "/pools", s.listPools, read)
		},
	}
}
