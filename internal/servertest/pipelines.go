package servertest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/app"
	"github.com/gantryhq/gantry/internal/pipelines"
	"github.com/gantryhq/gantry/models"
)

// The pipelines area's drivers: its service, and waiting for a revision's
// step to reach a state.

// Pipelines is the pipelines area's service.
func (s *Server) Pipelines() *pipelines.Service { return app.ServiceOf[*pipelines.Service](s.App) }

// WaitStep waits until revision rev of pipeline has its step (event on
// target) in one of the states (a progression.State's name, as the
// revision's page says it), and returns the step.
func (s *Server) WaitStep(t testing.TB, pipeline, rev, event, target string, states ...string) pipelines.StepDetail {
	t.Helper()
	var found pipelines.StepDetail
	WaitFor(t, func() (bool, string) {
		d, err := s.Pipelines().Revision(t.Context(), pipeline, rev)
		require.NoError(t, err)
		for _, st := range d.Steps {
			if st.Step.Event == event && st.Step.Target == target {
				found = st
				return slices.Contains(states, st.State), fmt.Sprintf("%s on %s of %s is %s (%s), want %v", event, target, rev, st.State, st.Why, states)
			}
		}
		return false, fmt.Sprintf("%s on %s is not a step of %s", event, target, pipeline)
	})
	return found
}

// WaitRevisionFinished waits until revision rev went through the pipeline.
func (s *Server) WaitRevisionFinished(t testing.TB, pipeline, rev string) {
	t.Helper()
	WaitFor(t, func() (bool, string) {
		r, err := models.RevisionByName(t.Context(), s.DB.Bun, pipeline, rev)
		require.NoError(t, err)
		if r.Status == models.RevisionFinished {
			return true, ""
		}
		d, err := s.Pipelines().Revision(t.Context(), pipeline, rev)
		require.NoError(t, err)
		var at []string
		for _, st := range d.Steps {
			if st.State != "done" && st.State != "pending" && st.State != "not-new" && st.State != "not-introduced" {
				at = append(at, st.Step.String()+": "+st.Why)
			}
		}
		return false, fmt.Sprintf("revision %s is %s at %v", rev, r.Status, at)
	})
}
