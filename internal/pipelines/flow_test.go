package pipelines_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

func TestARevisionGoesThroughBuildAndTwoHostGroups(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	mark := b.mark(t)
	b.Sync(t, fmt.Sprintf(`pipelines:
  - name: web
    stages:
      - {name: build, artifacts: [x86]}
      - name: beta
        after: [build]
        host_groups:
          - {name: east, hosts: [e1, e2]}
          - {name: west, hosts: [w1]}
        steps:
          - {name: deployed, run: [%q, deployed, "{host}", "{revision}-{artifact}"]}
`, mark))
	rev, created, err := b.svc.Register(b.ctx, "web", "v1", "test")
	require.NoError(t, err)
	require.True(t, created)
	again, created, err := b.svc.Register(b.ctx, "web", "v1", "test")
	require.NoError(t, err)
	require.False(t, created, "registering twice changes nothing")
	require.Equal(t, rev.ID, again.ID)

	b.WaitStep(t, "web", "v1", "build-stage-received-x86-artifact", "web/build", "waiting")
	_, _, err = b.svc.RegisterArtifact(b.ctx, "web", "v1", "arm64", "s3://x", "test")
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
	require.ErrorContains(t, err, "arch")
	_, _, err = b.svc.RegisterArtifact(b.ctx, "web", "v1", "x86", "s3://v1.tgz", "test")
	require.NoError(t, err)

	b.WaitRevisionFinished(t, "web", "v1")
	require.ElementsMatch(t, []string{"deployed:e1:v1-s3://v1.tgz", "deployed:e2:v1-s3://v1.tgz", "deployed:w1:v1-s3://v1.tgz"}, b.marks(t))
	entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Deployment: "pipeline:web@v1", Event: "pipeline-finished-successfully"})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	_ = servertest.Wait
}
