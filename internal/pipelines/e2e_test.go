package pipelines_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/pipelines"
	"github.com/gantryhq/gantry/models"
)

const voter = "ada@example.com"

// shopPipeline is build → beta (two host groups in parallel) → an
// approval gate → prod with a (deployed, tested) batch, every host step a
// real command that leaves a mark. changed adds a host to beta's west
// group and inserts a canary stage between the gate and prod.
func shopPipeline(mark string, changed bool) string {
	west, canary, prodAfter := "[w1]", "", "approval"
	if changed {
		west, prodAfter = "[w1, w2]", "canary"
		canary = fmt.Sprintf(`      - name: canary
        after: [approval]
        host_groups: [{name: c, hosts: [c1]}]
        steps:
          - {name: deployed, run: [%q, deployed, "{host}", "{revision}"]}
`, mark)
	}
	return fmt.Sprintf(`pipelines:
  - name: shop
    stages:
      - {name: build, artifacts: [x86]}
      - name: beta
        after: [build]
        host_groups:
          - {name: east, hosts: [e1, e2]}
          - {name: west, hosts: %s}
        steps:
          - {name: deployed, run: [%q, deployed, "{host}", "{revision}"]}
          - {name: tested, run: [%q, tested, "{host}", "{revision}"]}
      - name: approval
        after: [beta]
        approval: {voters: [%s]}
%s      - name: prod
        after: [%s]
        batch: [deployed, tested]
        host_groups: [{name: all, hosts: [p1]}]
        steps:
          - {name: deployed, run: [%q, deployed, "{host}", "{revision}"]}
          - {name: tested, run: [%q, tested, "{host}", "{revision}"]}
`, west, mark, mark, voter, canary, prodAfter, mark, mark)
}

// TestThreeRevisionsThroughAPipelineChangedInFlight is issue 14's end to
// end pipeline: three revisions in flight through build, beta's two host
// groups in parallel, a gate, and prod's (deployed, tested) batch, with
// real commands, while a host is added to beta and a stage is inserted
// before prod.
func TestThreeRevisionsThroughAPipelineChangedInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	mark := b.script(t, "mark.sh", fmt.Sprintf(`sleep 0.2; echo "$1:$2:$3" >> %s/marks`, b.dir))
	b.Sync(t, shopPipeline(mark, false))
	for _, r := range []string{"r1", "r2", "r3"} {
		_, _, err := b.svc.Register(b.ctx, "shop", r, "ci")
		require.NoError(t, err)
	}
	for _, r := range []string{"r1", "r2"} {
		_, _, err := b.svc.RegisterArtifact(b.ctx, "shop", r, "x86", "s3://"+r, "ci")
		require.NoError(t, err)
	}
	// r1 and r2 go through beta and wait at the gate; r3 waits for its
	// artifact.
	for _, r := range []string{"r1", "r2"} {
		b.WaitStep(t, "shop", r, "stage-approved", "shop/approval", "approval")
	}
	st := b.WaitStep(t, "shop", "r3", "build-stage-received-x86-artifact", "shop/build", "waiting")
	require.Equal(t, "waits for the x86 artifact to be registered", st.Why)

	t.Run("beta's host groups ran in parallel", func(t *testing.T) {
		entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Deployment: "pipeline:shop@r1", Limit: 500})
		require.NoError(t, err)
		id := func(event, target string) int64 {
			for _, e := range entries {
				if e.Event == event && e.TargetID == target {
					return e.ID
				}
			}
			t.Fatalf("no %s on %s", event, target)
			return 0
		}
		lastStart := max(id("host-group-started", "shop/beta/east"), id("host-group-started", "shop/beta/west"))
		firstEnd := min(id("host-group-finished-successfully", "shop/beta/east"), id("host-group-finished-successfully", "shop/beta/west"))
		require.Less(t, lastStart, firstEnd, "both groups started before either finished")
	})

	// The pipeline changes while they are in flight.
	b.Sync(t, shopPipeline(mark, true))
	_, _, err := b.svc.RegisterArtifact(b.ctx, "shop", "r3", "x86", "s3://r3", "ci")
	require.NoError(t, err)

	// The voter lets each through as it reaches the gate.
	for _, r := range []string{"r1", "r2", "r3"} {
		b.WaitStep(t, "shop", r, "stage-approved", "shop/approval", "approval")
		_, _, err := b.svc.Vote(b.ctx, "shop", r, "approval", approvals.VoteInput{Voter: voter, Decision: "approve", Via: approvals.ViaAPI})
		require.NoError(t, err)
	}
	for _, r := range []string{"r1", "r2", "r3"} {
		b.WaitRevisionFinished(t, "shop", r)
	}
	marks := b.marks(t)

	t.Run("no step ran twice", func(t *testing.T) {
		seen := map[string]bool{}
		for _, m := range marks {
			require.False(t, seen[m], "%s ran twice", m)
			seen[m] = true
		}
	})
	t.Run("the added host is deployed only by the revision that had not passed beta", func(t *testing.T) {
		require.Contains(t, marks, "deployed:w2:r3")
		require.NotContains(t, marks, "deployed:w2:r1")
		require.NotContains(t, marks, "deployed:w2:r2")
		d, err := b.svc.Revision(b.ctx, "shop", "r1")
		require.NoError(t, err)
		i := slices.IndexFunc(d.Steps, func(s pipelines.StepDetail) bool {
			return s.Step.Event == "host-started" && s.Step.Target == "shop/beta/west/w2"
		})
		require.GreaterOrEqual(t, i, 0)
		require.Equal(t, "not-new", d.Steps[i].State)
		require.Contains(t, d.Steps[i].Why, "host-group-finished-successfully@shop/beta/west")
	})
	t.Run("the inserted stage ahead of every revision is deployed by all", func(t *testing.T) {
		for _, r := range []string{"r1", "r2", "r3"} {
			require.Contains(t, marks, "deployed:c1:"+r)
		}
	})
	t.Run("prod's batch held one revision at a time", func(t *testing.T) {
		var prod []string
		for _, m := range marks {
			if strings.Contains(m, ":p1:") {
				prod = append(prod, m)
			}
		}
		require.Len(t, prod, 6, "%v", prod)
		for i := 0; i < len(prod); i += 2 {
			r := strings.TrimPrefix(prod[i], "deployed:p1:")
			require.Equal(t, "tested:p1:"+r, prod[i+1], "no other revision deployed to p1 while %s was tested: %v", r, prod)
		}
	})
	t.Run("the questions at every granularity", func(t *testing.T) {
		g, err := b.svc.Ask(b.ctx, "shop", "")
		require.NoError(t, err)
		require.Equal(t, "r3", g.LatestFinished.Revision)
		require.Nil(t, g.LatestFailed)
		require.Empty(t, g.InProgress)
		g, err = b.svc.Ask(b.ctx, "shop", "beta/west/w2")
		require.NoError(t, err)
		require.Equal(t, "host", g.Level)
		require.Equal(t, "r3", g.LatestFinished.Revision)
		_, err = b.svc.Ask(b.ctx, "shop", "beta/nowhere")
		require.ErrorContains(t, err, "no beta/nowhere")
	})
}
