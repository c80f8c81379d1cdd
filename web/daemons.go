package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/daemons"
	"github.com/gantryhq/gantry/models"
)

// daemonsHandlers are the daemons area's handlers: the server's shared
// parts and the area's service.
type daemonsHandlers struct {
	*Server
	Daemons *daemons.Service
}

// DaemonsArea is the daemons area (seed 002) on the web: environments with
// their versions and deployments, the health of every instance, and the
// JSON API for people (environments, deployments) and for agents (the
// local backend's register, long poll and reports, behind the agent
// scope). The API is in this file, its JSON in daemons_api.go, the pages
// in daemons_pages.go.
func DaemonsArea(svc *daemons.Service) Area {
	return Area{
		Name: "daemons", Title: "Daemons", Path: "/daemons",
		Blurb: "One task on every instance, rolled out safely and kept alive.",
		Summary: func(ctx context.Context) (string, error) {
			envs, err := svc.ListEnvironments(ctx, "")
			if err != nil || len(envs) == 0 {
				return "", err
			}
			unhealthy := 0
			for _, e := range envs {
				if !e.Healthy() {
					unhealthy++
				}
			}
			return fmt.Sprintf("%s · %d unhealthy", plural(len(envs), "environment", "environments"), unhealthy), nil
		},
		Routes: func(r *Router) {
			s := &daemonsHandlers{Server: r.s, Daemons: svc}
			viewer, operator := models.RoleViewer, models.RoleOperator
			s.daemonPages(r)

			const env = "/daemons/environments/:name"
			r.API(http.MethodGet, "/daemons/environments", s.apiListDaemonEnvironments, viewer, auth.ScopeRead)
			r.API(http.MethodPost, "/daemons/environments", s.apiCreateDaemonEnvironment, operator, auth.ScopeWrite)
			r.API(http.MethodGet, env, s.apiGetDaemonEnvironment, viewer, auth.ScopeRead)
			r.API(http.MethodPatch, env, s.apiUpdateDaemonEnvironment, operator, auth.ScopeWrite)
			r.API(http.MethodDelete, env, s.apiDeleteDaemonEnvironment, operator, auth.ScopeWrite)
			r.API(http.MethodGet, env+"/versions", s.apiListDaemonVersions, viewer, auth.ScopeRead)
			r.API(http.MethodGet, env+"/diff", s.apiDaemonDiff, viewer, auth.ScopeRead)
			r.API(http.MethodGet, env+"/deployments", s.apiListDaemonDeployments, viewer, auth.ScopeRead)
			r.API(http.MethodPost, env+"/deployments", s.apiStartDaemonDeployment, operator, auth.ScopeWrite)
			r.API(http.MethodGet, env+"/deployments/:id", s.apiGetDaemonDeployment, viewer, auth.ScopeRead)
			r.API(http.MethodPost, env+"/rollback", s.apiRollbackDaemonDeployment, operator, auth.ScopeWrite)
			r.API(http.MethodPost, env+"/stop", s.apiStopDaemonDeployment, operator, auth.ScopeWrite)

			// The local backend's agents, with a token of scope agent.
			r.API(http.MethodPost, "/daemons/agents", s.apiRegisterAgent, operator, auth.ScopeAgent)
			r.API(http.MethodGet, "/daemons/agents/:instance/tasks", s.apiPollAgent, operator, auth.ScopeAgent)
			r.API(http.MethodPost, "/daemons/agents/:instance/tasks/:task", s.apiReportTask, operator, auth.ScopeAgent)
			r.API(http.MethodDelete, "/daemons/agents/:instance", s.apiLeaveAgent, operator, auth.ScopeAgent)
		},
	}
}

func daemonActor(c echo.Context) string {
	if p := principalOf(c); p != nil {
		return p.Actor()
	}
	return "unknown"
}

func (s *daemonsHandlers) apiListDaemonEnvironments(c echo.Context) error {
	envs, err := s.Daemons.ListEnvironments(c.Request().Context(), c.QueryParam("type"))
	if err != nil {
		return err
	}
	out := make([]daemonEnvironmentJSON, 0, len(envs))
	for _, e := range envs {
		out = append(out, daemonEnvironmentJSONOf(e))
	}
	return c.JSON(http.StatusOK, map[string]any{"environments": out})
}

func (s *daemonsHandlers) apiCreateDaemonEnvironment(c echo.Context) error {
	var in daemonEnvironmentRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	_, v, err := s.Daemons.CreateEnvironment(c.Request().Context(), in.Name, in.spec(), "api", daemonActor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"name": in.Name, "environment_version": v.ID, "version": daemonVersionJSONOf(v)})
}

func (s *daemonsHandlers) apiGetDaemonEnvironment(c echo.Context) error {
	e, err := s.Daemons.GetEnvironment(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, daemonEnvironmentJSONOf(e))
}

func (s *daemonsHandlers) apiUpdateDaemonEnvironment(c echo.Context) error {
	var in daemonEnvironmentRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if in.Name != "" && in.Name != c.Param("name") {
		return apperr.Field("name", "cannot be changed; create a new environment instead")
	}
	v, err := s.Daemons.UpdateEnvironment(c.Request().Context(), c.Param("name"), in.spec(), "api", daemonActor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"name": c.Param("name"), "environment_version": v.ID, "version": daemonVersionJSONOf(v)})
}

func (s *daemonsHandlers) apiDeleteDaemonEnvironment(c echo.Context) error {
	if err := s.Daemons.DeleteEnvironment(c.Request().Context(), c.Param("name"), daemonActor(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *daemonsHandlers) apiListDaemonVersions(c echo.Context) error {
	e, err := s.Daemons.GetEnvironment(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	vs, err := models.DaemonVersions(c.Request().Context(), s.DB.Bun, e.ID)
	if err != nil {
		return err
	}
	out := make([]*daemonVersionJSON, 0, len(vs))
	for i := range vs {
		out = append(out, daemonVersionJSONOf(&vs[i]))
	}
	return c.JSON(http.StatusOK, map[string]any{"versions": out})
}

// daemonVersionParam reads a version id from the query or body field
// version_id.
func daemonVersionParam(raw string) (uuid.UUID, error) {
	id, err := uuid.Parse(raw)
	if err != nil {
		return uuid.Nil, apperr.Field("version_id", "must be an environment version id (a UUID)")
	}
	return id, nil
}

func (s *daemonsHandlers) apiDaemonDiff(c echo.Context) error {
	id, err := daemonVersionParam(c.QueryParam("version_id"))
	if err != nil {
		return err
	}
	d, err := s.Daemons.DiffDeployment(c.Request().Context(), c.Param("name"), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, daemonDiffJSONOf(d))
}

func (s *daemonsHandlers) apiListDaemonDeployments(c echo.Context) error {
	limit, _ := strconv.Atoi(c.QueryParam("limit"))
	ds, err := s.Daemons.ListDeployments(c.Request().Context(), c.Param("name"), limit)
	if err != nil {
		return err
	}
	out := make([]*daemonDeploymentJSON, 0, len(ds))
	for i := range ds {
		out = append(out, daemonDeploymentJSONOf(c.Param("name"), &ds[i]))
	}
	return c.JSON(http.StatusOK, map[string]any{"deployments": out})
}

func (s *daemonsHandlers) apiStartDaemonDeployment(c echo.Context) error {
	var in daemonVersionRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if in.VersionID == nil {
		return apperr.Field("version_id", "is required: the environment version to deploy")
	}
	d, err := s.Daemons.StartDeployment(c.Request().Context(), c.Param("name"), *in.VersionID, daemonActor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, daemonDeploymentJSONOf(c.Param("name"), d))
}

func (s *daemonsHandlers) apiGetDaemonDeployment(c echo.Context) error {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return apperr.New(apperr.NotFound, "No deployment %s.", c.Param("id"))
	}
	d, err := s.Daemons.GetDeployment(c.Request().Context(), c.Param("name"), id)
	if err != nil {
		return err
	}
	out := daemonDeploymentJSONOf(d.Environment, &d.DaemonDeployment)
	for _, t := range d.Tasks {
		out.Tasks = append(out.Tasks, daemonTaskJSONOf(t))
	}
	return c.JSON(http.StatusOK, out)
}

func (s *daemonsHandlers) apiRollbackDaemonDeployment(c echo.Context) error {
	var in daemonVersionRequest
	if c.Request().ContentLength != 0 {
		if err := bindJSON(c, &in); err != nil {
			return err
		}
	}
	d, err := s.Daemons.RollbackDeployment(c.Request().Context(), c.Param("name"), in.VersionID, daemonActor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, daemonDeploymentJSONOf(c.Param("name"), d))
}

func (s *daemonsHandlers) apiStopDaemonDeployment(c echo.Context) error {
	d, err := s.Daemons.StopDeployment(c.Request().Context(), c.Param("name"), daemonActor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, daemonDeploymentJSONOf(c.Param("name"), d))
}

func (s *daemonsHandlers) apiRegisterAgent(c echo.Context) error {
	var in daemonRegisterRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	inst, err := s.Daemons.Register(c.Request().Context(), daemons.Registration{ID: in.ID, Cluster: in.Cluster, Hostname: in.Hostname,
		Attributes: in.Attributes}, daemonActor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, daemonRegisterJSON{InstanceID: inst.ID, Cluster: inst.Cluster,
		HeartbeatSeconds: int(s.Daemons.HeartbeatInterval / time.Second)})
}

// apiPollAgent is the agent's heartbeat and long poll: ?tag= the last
// assignment's tag, ?wait= how long to hold the request (within the
// request timeout).
func (s *daemonsHandlers) apiPollAgent(c echo.Context) error {
	routineRequest(c)
	wait := time.Duration(0)
	if w := c.QueryParam("wait"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d < 0 {
			return apperr.Field("wait", "must be a duration such as 20s")
		}
		wait = min(d, s.Config.RequestTimeout-5*time.Second)
	}
	a, err := s.Daemons.Poll(c.Request().Context(), c.Param("instance"), c.QueryParam("tag"), wait)
	if err != nil {
		return err
	}
	out := daemonAgentTasksJSON{Tag: a.Tag, HeartbeatSeconds: int(a.HeartbeatInterval / time.Second), Tasks: []daemonAgentTaskJSON{}}
	for _, t := range a.Tasks {
		out.Tasks = append(out.Tasks, daemonAgentTaskJSON{ID: t.ID, Environment: t.Environment, Version: t.Version, Run: t.Run,
			Command: t.Command, Env: t.Env})
	}
	out.Steps = agentStepsJSONOf(a.Steps)
	return c.JSON(http.StatusOK, out)
}

func (s *daemonsHandlers) apiReportTask(c echo.Context) error {
	id, err := uuid.Parse(c.Param("task"))
	if err != nil {
		return apperr.New(apperr.NotFound, "No task %s.", c.Param("task"))
	}
	var in daemonReportRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	err = s.Daemons.ReportTask(c.Request().Context(), c.Param("instance"), id,
		daemons.Report{State: in.State, PID: in.PID, ExitCode: in.ExitCode, Reason: in.Reason}, daemonActor(c))
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *daemonsHandlers) apiLeaveAgent(c echo.Context) error {
	if err := s.Daemons.Leave(c.Request().Context(), c.Param("instance"), daemonActor(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
