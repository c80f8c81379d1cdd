package pipelines_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
	"github.com/gantryhq/gantry/internal/pipelines"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// onePipeline is one stage of one host running the command cmd (a YAML
// flow sequence) with timeout.
func onePipeline(cmd, timeout string) string {
	return fmt.Sprintf(`pipelines:
  - name: one
    stages:
      - name: prod
        host_groups: [{name: g, hosts: [h1]}]
        steps:
          - {name: deployed, run: %s, timeout: %s}
`, cmd, timeout)
}

const deployed, host = "host-deployed", "one/prod/g/h1"

func TestAFailingCommandBlocksItsRevisionUntilRetriedOrSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	// Fails until the file "fixed" exists.
	cmd := b.script(t, "deploy.sh", fmt.Sprintf(`test -e %s/fixed && exit 0; echo "disk full on $1" >&2; exit 3`, b.dir))
	b.Sync(t, onePipeline(fmt.Sprintf("[%q, \"{host}\"]", cmd), "1m"))
	_, _, err := b.svc.Register(b.ctx, "one", "v1", "ci")
	require.NoError(t, err)

	st := b.WaitStep(t, "one", "v1", deployed, host, "failed")
	require.Equal(t, "exit status 3: disk full on h1", st.Work.Reason)
	require.Contains(t, st.Why, "failed: exit status 3: disk full on h1")
	d, err := b.svc.Revision(b.ctx, "one", "v1")
	require.NoError(t, err)
	require.NotNil(t, d.Blocked, "the revision is blocked")
	for _, level := range []struct{ event, target string }{
		{"host-failed", host}, {"host-group-failed", "one/prod/g"}, {"stage-failed", "one/prod"}, {"pipeline-failed", "one"},
	} {
		g, err := models.LatestAt(b.ctx, b.DB.Bun, level.target, level.event)
		require.NoError(t, err)
		require.NotNil(t, g, "%s on %s", level.event, level.target)
		require.Equal(t, "v1", g.Revision)
	}
	g, err := b.svc.Ask(b.ctx, "one", "prod/g/h1")
	require.NoError(t, err)
	require.Equal(t, "v1", g.LatestFailed.Revision)
	require.Len(t, g.InProgress, 1, "a blocked revision is still in progress")

	t.Run("a step that did not fail is not retried or skipped", func(t *testing.T) {
		err := b.svc.Retry(b.ctx, pipelines.StepRef{Pipeline: "one", Revision: "v1", Event: "host-started", Target: host}, "user:op@example.com")
		require.Equal(t, apperr.Conflict, apperr.CodeOf(err))
	})

	// The operator fixes the host and retries: the second attempt succeeds.
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "fixed"), nil, 0o644))
	require.NoError(t, b.svc.Retry(b.ctx, pipelines.StepRef{Pipeline: "one", Revision: "v1", Event: deployed, Target: host}, "user:op@example.com"))
	b.WaitRevisionFinished(t, "one", "v1")
	retried, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Deployment: "pipeline:one@v1", Event: pipelines.EventStepRetried})
	require.NoError(t, err)
	require.Len(t, retried, 1)
	require.Equal(t, "user:op@example.com", retried[0].Actor)
	require.Equal(t, deployed, retried[0].Detail["step"])

	t.Run("skipping goes on as if the step had completed", func(t *testing.T) {
		require.NoError(t, os.Remove(filepath.Join(b.dir, "fixed")))
		_, _, err := b.svc.Register(b.ctx, "one", "v2", "ci")
		require.NoError(t, err)
		b.WaitStep(t, "one", "v2", deployed, host, "failed")
		require.NoError(t, b.svc.Skip(b.ctx, pipelines.StepRef{Pipeline: "one", Revision: "v2", Event: deployed, Target: host}, "user:op@example.com"))
		b.WaitRevisionFinished(t, "one", "v2")
		done, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Deployment: "pipeline:one@v2", Event: deployed})
		require.NoError(t, err)
		require.Empty(t, done, "a skipped step is not logged as done")
	})
}

func TestAHangingCommandTimesOutAndBlocksItsRevision(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	b.Sync(t, onePipeline(`[sleep, "60"]`, "1s"))
	_, _, err := b.svc.Register(b.ctx, "one", "v1", "ci")
	require.NoError(t, err)
	st := b.WaitStep(t, "one", "v1", deployed, host, "failed")
	require.Equal(t, "timed out after 1s (step deployed's timeout)", st.Work.Reason)
}

// TestAWorkerKilledMidStepNeverCompletesItTwice stops the workers while a
// step's command runs: the step runs again on the next worker and is
// completed once; a redelivered job after that runs nothing.
func TestAWorkerKilledMidStepNeverCompletesItTwice(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	cmd := b.script(t, "slow.sh", fmt.Sprintf(`echo start >> %[1]s/marks; sleep 3; echo end >> %[1]s/marks`, b.dir))
	b.Sync(t, onePipeline(fmt.Sprintf("[%q]", cmd), "1m"))
	_, _, err := b.svc.Register(b.ctx, "one", "v1", "ci")
	require.NoError(t, err)

	workers := func() func() {
		client, err := b.App.RiverClient(jobs.ClientOptions{Work: true, Concurrency: 4, FetchPollInterval: 100 * time.Millisecond})
		require.NoError(t, err)
		require.NoError(t, client.Start(context.Background()))
		return func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, client.StopAndCancel(ctx))
		}
	}
	stop := workers()
	servertest.WaitFor(t, func() (bool, string) { return b.count(t, "start") == 1, "the command has not started" })
	stop() // the worker dies mid-command
	require.Equal(t, 0, b.count(t, "end"))
	row := b.WaitStep(t, "one", "v1", deployed, host, "running")
	require.Equal(t, models.StepRunning, row.Work.Status, "its outcome is unknown: it is neither done nor failed")

	stop = workers()
	defer stop()
	b.WaitRevisionFinished(t, "one", "v1")
	require.Equal(t, 2, b.count(t, "start"), "the step ran again")
	require.Equal(t, 1, b.count(t, "end"))
	done, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Deployment: "pipeline:one@v1", Event: deployed})
	require.NoError(t, err)
	require.Len(t, done, 1, "completed once")

	rev, err := models.RevisionByName(b.ctx, b.DB.Bun, "one", "v1")
	require.NoError(t, err)
	require.NoError(t, b.svc.DoStep(b.ctx, jobs.DoPipelineStepArgs{RevisionID: rev.ID, Event: deployed, Target: host, Attempt: 1}))
	require.Equal(t, 2, b.count(t, "start"), "a job delivered again after the step completed runs nothing")
}

func TestAGateRejectedBlocksUntilVotedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	b.Sync(t, `pipelines:
  - name: gated
    stages:
      - {name: approval, approval: {voters: [ada@example.com, bob@example.com], min_approvals: 2}}
      - {name: prod, after: [approval]}
`)
	_, _, err := b.svc.Register(b.ctx, "gated", "v1", "ci")
	require.NoError(t, err)
	b.WaitStep(t, "gated", "v1", "stage-approved", "gated/approval", "approval")
	// The mail goes out while the votes are open (a request that finds
	// them decided sends nothing), so it is awaited before anyone votes.
	m := b.Mail.Wait(t, servertest.Wait, func(m mailtest.Message) bool {
		return slices.Contains(m.To, "ada@example.com") && strings.Contains(m.Subject, "gated revision v1 into approval")
	})
	require.Contains(t, m.Text, "/approvals/link/", "the voters are asked by mail, with a signed link")
	vote := func(who, decision string) error {
		_, _, err := b.svc.Vote(b.ctx, "gated", "v1", "approval", approvals.VoteInput{Voter: who, Decision: decision, Via: approvals.ViaAPI})
		return err
	}
	_, _, err = b.svc.Vote(b.ctx, "gated", "v1", "approval", approvals.VoteInput{Voter: "eve@example.com", Decision: "approve", Via: approvals.ViaAPI})
	require.Error(t, err, "only the gate's voters vote")
	require.NoError(t, vote("bob@example.com", "reject"))
	st := b.WaitStep(t, "gated", "v1", "stage-approved", "gated/approval", "failed")
	require.Equal(t, "rejected by bob@example.com", st.Work.Reason)

	require.NoError(t, b.svc.Retry(b.ctx, pipelines.StepRef{Pipeline: "gated", Revision: "v1", Event: "stage-approved", Target: "gated/approval"}, "user:op@example.com"))
	b.WaitStep(t, "gated", "v1", "stage-approved", "gated/approval", "approval")
	require.NoError(t, vote("ada@example.com", "approve"))
	b.WaitStep(t, "gated", "v1", "stage-approved", "gated/approval", "approval")
	require.NoError(t, vote("bob@example.com", "approve"))
	b.WaitRevisionFinished(t, "gated", "v1")
}
