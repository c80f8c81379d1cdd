package pipelines_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/demo"
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
	st := b.WaitStep(t, "storefront", "1.1.0", "host-tested", "storefront/beta/east/beta-east-1", "failed")
	require.Contains(t, st.Work.Reason, "exit status 1")
	b.WaitStep(t, "storefront", "1.2.0", "build-stage-received-x86-artifact", "storefront/build", "waiting")
	pic, err := b.svc.Picture(b.ctx, "storefront")
	require.NoError(t, err)
	require.Contains(t, pic.Blocked, "1.1.0")
}
