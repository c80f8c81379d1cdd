package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/pipelines"
	"github.com/gantryhq/gantry/models"
)

// pipelinesHandlers are the pipelines area's handlers: the server's shared
// parts and the area's service.
type pipelinesHandlers struct {
	*Server
	Pipelines *pipelines.Service
}

// PipelinesArea is the pipelines area (seed 004) on the web: the list of
// pipelines, each pipeline's picture of stages and host groups with where
// every revision stands, each revision's steps with why each waits; the
// API to register revisions and artifacts, retry or skip a failed step,
// and ask the log at every granularity. Gates are voted on in /approvals.
// The machine endpoints are in this file, their JSON in pipelines_api.go,
// the pages in pipelines_pages.go.
func PipelinesArea(svc *pipelines.Service) Area {
	return Area{
		Name: "pipelines", Title: "Pipelines", Path: "/pipelines",
		Blurb: "Releases moved stage by stage by reading the deployment log.",
		Summary: func(ctx context.Context) (string, error) {
			list, err := svc.List(ctx)
			if err != nil || len(list) == 0 {
				return "", err
			}
			inFlight, failed := 0, 0
			for _, p := range list {
				inFlight += p.InFlight
				failed += p.Failed
			}
			line := fmt.Sprintf("%s · %s in flight", plural(len(list), "pipeline", "pipelines"), plural(inFlight, "revision", "revisions"))
			if failed > 0 {
				line += fmt.Sprintf(" · %d blocked by a failure", failed)
			}
			return line, nil
		},
		Routes: func(r *Router) {
			s := &pipelinesHandlers{Server: r.s, Pipelines: svc}
			viewer, operator := models.RoleViewer, models.RoleOperator
			r.Page(http.MethodGet, "/pipelines", s.pipelinesPage, viewer)
			r.Page(http.MethodGet, "/pipelines/:name", s.pipelinePage, viewer)
			r.Page(http.MethodGet, "/pipelines/:name/picture", s.pipelinePicturePart, viewer)
			r.Page(http.MethodGet, "/pipelines/:name/revisions/:revision", s.revisionPage, viewer)
			// A running command's output, as JSON for the page's own script.
			r.Page(http.MethodGet, "/pipelines/:name/revisions/:revision/output", s.stepOutputTail, viewer)
			r.Page(http.MethodPost, "/pipelines/:name/revisions/:revision/retry", s.stepActionForm(s.Pipelines.Retry, "retried"), operator)
			r.Page(http.MethodPost, "/pipelines/:name/revisions/:revision/skip", s.stepActionForm(s.Pipelines.Skip, "skipped"), operator)
			r.Page(http.MethodPost, "/pipelines/:name/revisions/:revision/vote", s.gateVoteForm, models.RoleApprover)
			r.VoterHelp(s.pipelinesVoterHelp)

			r.API(http.MethodGet, "/pipelines", s.listPipelines, viewer, auth.ScopeRead)
			r.API(http.MethodGet, "/pipelines/:name", s.getPipeline, viewer, auth.ScopeRead)
			r.API(http.MethodGet, "/pipelines/:name/status", s.askPipeline, viewer, auth.ScopeRead)
			r.API(http.MethodGet, "/pipelines/:name/revisions", s.listPipelineRevisions, viewer, auth.ScopeRead)
			r.API(http.MethodPost, "/pipelines/:name/revisions", s.registerRevision, operator, auth.ScopeWrite)
			r.API(http.MethodGet, "/pipelines/:name/revisions/:revision", s.getPipelineRevision, viewer, auth.ScopeRead)
			r.API(http.MethodPost, "/pipelines/:name/revisions/:revision/artifacts", s.registerArtifact, operator, auth.ScopeWrite)
			r.API(http.MethodPost, "/pipelines/:name/revisions/:revision/retry", s.stepActionAPI(s.Pipelines.Retry), operator, auth.ScopeWrite)
			r.API(http.MethodPost, "/pipelines/:name/revisions/:revision/skip", s.stepActionAPI(s.Pipelines.Skip), operator, auth.ScopeWrite)
			// A host's agent reporting the end of a step it ran (runs_on: agent).
			r.API(http.MethodPost, "/daemons/agents/:instance/steps/:step", s.apiReportAgentStep, operator, auth.ScopeAgent)
		},
	}
}

func (s *pipelinesHandlers) listPipelines(c echo.Context) error {
	list, err := s.Pipelines.List(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]pipelineJSON, len(list))
	for i, p := range list {
		out[i] = pipelineJSONOf(p)
	}
	return c.JSON(http.StatusOK, map[string]any{"pipelines": out})
}

func (s *pipelinesHandlers) getPipeline(c echo.Context) error {
	pic, err := s.Pipelines.Picture(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pipelinePictureJSONOf(pic))
}

// askPipeline answers the seed's questions for the level at ?at=
// ("" the pipeline, "stage", "stage/group", "stage/group/host").
func (s *pipelinesHandlers) askPipeline(c echo.Context) error {
	g, err := s.Pipelines.Ask(c.Request().Context(), c.Param("name"), c.QueryParam("at"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, granularityJSONOf(g))
}

func (s *pipelinesHandlers) listPipelineRevisions(c echo.Context) error {
	f := models.RevisionFilter{Pipeline: c.Param("name"), Status: c.QueryParam("status")}
	if f.Status != "" && f.Status != models.RevisionInFlight && f.Status != models.RevisionFinished {
		return apperr.Field("status", "must be in_flight or finished")
	}
	var err error
	if f.Limit, err = queryInt(c, "limit"); err != nil {
		return err
	}
	if f.Offset, err = queryInt(c, "offset"); err != nil {
		return err
	}
	revs, total, err := s.Pipelines.Revisions(c.Request().Context(), f)
	if err != nil {
		return err
	}
	out := make([]pipelineRevisionJSON, len(revs))
	for i := range revs {
		out[i] = pipelineRevisionJSONOf(&revs[i])
	}
	return c.JSON(http.StatusOK, map[string]any{"revisions": out, "total": total})
}

func (s *pipelinesHandlers) registerRevision(c echo.Context) error {
	var in registerRevisionRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	rev, created, err := s.Pipelines.Register(c.Request().Context(), c.Param("name"), in.Revision, principalOf(c).Actor())
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, pipelineRevisionJSONOf(rev))
}

func (s *pipelinesHandlers) getPipelineRevision(c echo.Context) error {
	d, err := s.Pipelines.Revision(c.Request().Context(), c.Param("name"), c.Param("revision"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, revisionDetailJSONOf(d))
}

func (s *pipelinesHandlers) registerArtifact(c echo.Context) error {
	var in registerArtifactRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	a, created, err := s.Pipelines.RegisterArtifact(c.Request().Context(), c.Param("name"), c.Param("revision"), in.Arch, in.Location, principalOf(c).Actor())
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, pipelineArtifactJSON{Arch: a.Arch, Location: a.Location, RegisteredBy: a.RegisteredBy, CreatedAt: a.CreatedAt})
}

type stepAction func(ctx context.Context, ref pipelines.StepRef, actor string) error

func (s *pipelinesHandlers) stepActionAPI(act stepAction) echo.HandlerFunc {
	return func(c echo.Context) error {
		var in stepRequest
		if err := bindJSON(c, &in); err != nil {
			return err
		}
		ref := pipelines.StepRef{Pipeline: c.Param("name"), Revision: c.Param("revision"), Event: in.Event, Target: in.Target}
		if err := act(c.Request().Context(), ref, principalOf(c).Actor()); err != nil {
			return err
		}
		d, err := s.Pipelines.Revision(c.Request().Context(), ref.Pipeline, ref.Revision)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, revisionDetailJSONOf(d))
	}
}

// queryInt reads an optional non-negative integer query parameter.
func queryInt(c echo.Context, name string) (int, error) {
	v := c.QueryParam(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, apperr.Field(name, "must be a whole number, 0 or more")
	}
	return n, nil
}
