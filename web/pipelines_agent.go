package web

import (
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/daemons"
	"github.com/gantryhq/gantry/internal/pipelines"
)

// agentStepJSON is a pipeline step in an agent's long poll: run Command
// once with Env, stop it after TimeoutSeconds, report how it ended.
type agentStepJSON struct {
	ID             uuid.UUID         `json:"id"`
	Event          string            `json:"event"`
	Target         string            `json:"target"`
	Host           string            `json:"host"`
	Attempt        int               `json:"attempt"`
	Command        []string          `json:"command"`
	Env            map[string]string `json:"env"`
	TimeoutSeconds int               `json:"timeout_seconds"`
}

func agentStepsJSONOf(steps []daemons.AgentStep) []agentStepJSON {
	out := []agentStepJSON{}
	for _, st := range steps {
		out = append(out, agentStepJSON{ID: st.ID, Event: st.Event, Target: st.Target, Host: st.Host, Attempt: st.Attempt,
			Command: st.Command, Env: st.Env, TimeoutSeconds: int(st.Timeout.Seconds())})
	}
	return out
}

type agentStepReportRequest struct {
	ExitCode *int   `json:"exit_code"`
	Signal   string `json:"signal"`
	TimedOut bool   `json:"timed_out"`
	Reason   string `json:"reason"`
	Output   string `json:"output"`
}

// apiReportAgentStep is an agent saying how a step it ran ended: the
// step completes or fails. Saying it again changes nothing; a step that is
// not this agent's is 404.
func (s *pipelinesHandlers) apiReportAgentStep(c echo.Context) error {
	id, err := uuid.Parse(c.Param("step"))
	if err != nil {
		return apperr.New(apperr.NotFound, "No step %s.", c.Param("step"))
	}
	var in agentStepReportRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	err = s.Pipelines.ReportAgentStep(c.Request().Context(), c.Param("instance"), id, pipelines.AgentStepReport{
		ExitCode: in.ExitCode, Signal: in.Signal, TimedOut: in.TimedOut, Reason: in.Reason, Output: in.Output})
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
