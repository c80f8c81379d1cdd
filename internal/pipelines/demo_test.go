package pipelines_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/demo"
	"github.com/gantryhq/gantry/internal/pipelines"
	"github.com/gantryhq/gantry/internal/servertest"
)

// The demo's pipeline, run by the workers with its real commands, shows
// revisions at different stages: one at the gate, one blocked by its
// failing smoke test, one waiting for its artifact.
func TestTheDemoPipelineHasRevisionsAtDifferentStages(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	loaded, err := demo.Pipelines(b.ctx, b.svc)
	require.NoError(t, err)
	require.True(t, loaded)
	again, err := demo.Pipelines(b.ctx, b.svc)
	require.NoError(t, err)
	require.False(t, again, "loaded once")

	b.WaitStep(t, "storefront", "1.0.0", "stage-approved", "storefront/approval", "approval")
	// The beta hosts test side by side: whichever fails first blocks the
	// revision, and the other hosts' tests do not start.
	var blocked pipelines.BlockedStep
	servertest.WaitFor(t, func() (bool, string) {
		pic, err := b.svc.Picture(b.ctx, "storefront")
		require.NoError(t, err)
		var ok bool
		blocked, ok = pic.Blocked["1.1.0"]
		return ok, fmt.Sprintf("1.1.0 is not blocked (blocked: %v)", pic.Blocked)
	})
	require.Equal(t, "host-tested", blocked.Step.Event)
	require.True(t, strings.HasPrefix(blocked.Step.Target, "storefront/beta/"), blocked.Step.Target)
	require.Contains(t, blocked.Reason, "exit status 1")
	b.WaitStep(t, "storefront", "1.2.0", "build-stage-received-x86-artifact", "storefront/build", "waiting")
}
