package web

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/allocation"
	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/models"
)

// lockedRetryAfter is the Retry-After of a 423, in seconds. Environments come
// free whenever another test releases one, which the server cannot predict;
// a short hint lets waiting clients notice soon, and their own backoff (up
// to 30 s with jitter in gantry env) spreads them out.
const lockedRetryAfter = "5"

// leaseActor names a client in the log.
func leaseActor(c echo.Context) string {
	client := leaseClientOf(c)
	if p := principalOf(c); p != nil {
		return "client:" + client.Name + ":" + p.User.Email
	}
	return "client:" + client.Name
}

func (s *environmentsHandlers) allocate(c echo.Context) error {
	var in allocateRequest
	if err := bindJSON(c, &in); err != nil {
		s.allocationMetrics.request(in.Pool, http.StatusBadRequest, nil)
		return err
	}
	req := allocation.Request{Pool: in.Pool, Requester: in.Requester}
	for _, r := range in.Requirements {
		req.Requirements = append(req.Requirements, allocation.Requirement{Capabilities: r.Capabilities})
	}
	leases, err := s.Pools.Allocate(c.Request().Context(), req, leaseClientOf(c).Name, leaseActor(c))
	s.allocationMetrics.request(in.Pool, responseStatus(err), req.Wanted())
	if apperr.CodeOf(err) == apperr.Locked {
		c.Response().Header().Set("Retry-After", lockedRetryAfter)
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, allocationJSONOf(leases))
}

// responseStatus is the status err will be answered with.
func responseStatus(err error) int {
	if err == nil {
		return http.StatusOK
	}
	return statusOf[apperr.CodeOf(err)]
}

func allocationID(c echo.Context) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return uuid.Nil, apperr.Field("id", "must be an allocation id (a UUID)")
	}
	return id, nil
}

func (s *environmentsHandlers) releaseAllocation(c echo.Context) error {
	id, err := allocationID(c)
	if err != nil {
		return err
	}
	var in releaseRequest
	if c.Request().ContentLength != 0 {
		if err := bindJSON(c, &in); err != nil {
			return err
		}
	}
	a, ended, err := s.Pools.Release(c.Request().Context(), id, leaseClientOf(c).Name, models.EndedByClient, in.Outcome, leaseActor(c))
	if err != nil {
		return err
	}
	if ended {
		s.allocationMetrics.outcome(a)
	}
	return c.JSON(http.StatusOK, leaseJSONOf(a, a.Environment, nil))
}

func (s *environmentsHandlers) extendAllocation(c echo.Context) error {
	id, err := allocationID(c)
	if err != nil {
		return err
	}
	var in extendRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	d, err := time.ParseDuration(in.Duration)
	if err != nil || d <= 0 {
		return apperr.Field("duration", "must be a positive duration such as 30m or 2h")
	}
	a, creds, err := s.Pools.Extend(c.Request().Context(), id, d, leaseClientOf(c).Name, leaseActor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, leaseJSONOf(a, a.Environment, creds))
}

func (s *environmentsHandlers) getAllocation(c echo.Context) error {
	id, err := allocationID(c)
	if err != nil {
		return err
	}
	a, err := models.AllocationByID(c.Request().Context(), s.DB.Bun, id)
	if err != nil {
		return notFoundAs(err, "No allocation %s.", id)
	}
	return c.JSON(http.StatusOK, leaseJSONOf(a, a.Environment, nil))
}

// allocationFilter reads the history filters shared by the API and pages.
func allocationFilter(c echo.Context) (models.AllocationFilter, error) {
	q := c.QueryParams()
	f := models.AllocationFilter{Pool: q.Get("pool"), Requester: q.Get("requester"), ActiveOnly: q.Get("active") == "true"}
	bad := apperr.Fields{}
	if v := q.Get("environment"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			bad.Add("environment", "must be an environment id")
		}
		f.EnvironmentID = id
	}
	var err error
	if f.Since, err = parseTime(q.Get("since")); err != nil {
		bad.Add("since", err.Error())
	}
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 || f.Limit > 500 {
			bad.Add("limit", "must be a number from 1 to 500")
		}
	}
	return f, bad.Err()
}

func (s *environmentsHandlers) listAllocations(c echo.Context) error {
	f, err := allocationFilter(c)
	if err != nil {
		return err
	}
	cursor, err := parseAllocationCursor(c.QueryParam("cursor"))
	if err != nil {
		return err
	}
	if f.Limit == 0 {
		f.Limit = 100
	}
	allocs, err := models.ListAllocationHistory(c.Request().Context(), s.DB.Bun, f, cursor)
	if err != nil {
		return err
	}
	next := ""
	if len(allocs) == f.Limit {
		last := allocs[len(allocs)-1]
		q := c.QueryParams()
		q.Set("cursor", last.StartedAt.UTC().Format(time.RFC3339Nano)+"/"+last.ID.String())
		next = c.Request().URL.Path + "?" + q.Encode()
	}
	return c.JSON(http.StatusOK, allocationHistoryJSONOf(allocs, next))
}

// parseAllocationCursor reads the "started_at/id" cursor of the history API.
func parseAllocationCursor(v string) (*models.AllocationCursor, error) {
	if v == "" {
		return nil, nil
	}
	at, id, ok := strings.Cut(v, "/")
	t, err1 := time.Parse(time.RFC3339Nano, at)
	u, err2 := uuid.Parse(id)
	if !ok || err1 != nil || err2 != nil {
		return nil, apperr.Field("cursor", "is not a cursor this API produced (use the next URL)")
	}
	return &models.AllocationCursor{StartedAt: t, ID: u}, nil
}

func (s *environmentsHandlers) listPools(c echo.Context) error {
	ctx := c.Request().Context()
	capacities, err := models.Capacity(ctx, s.DB.Bun)
	if err != nil {
		return err
	}
	list, err := models.ListPools(ctx, s.DB.Bun)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, poolsJSONOf(list, capacities))
}
