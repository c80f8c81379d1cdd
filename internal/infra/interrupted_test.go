package infra_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

const operator = "user:olivia@example.com"

// interruptedApply brings vpc's execution to the point where a worker died
// mid-apply: it is at the applying step, its apply began (apply_started_at)
// with some output and no outcome. Its apply command is a script that
// appends a line to the returned file, so a second apply would show.
func interruptedApply(t *testing.T) (*bundle, *models.Run, *models.Execution, string) {
	t.Helper()
	b := setup(t, options{})
	p := b.repo.OpenPR(5, b.vpcChange("vpc-v2"))
	_, run := b.merge(t, p)
	x := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	b.VoteMail(t, ada, infratest.VPC) // the voters were asked
	b.VoteMail(t, grace, infratest.VPC)
	applied := filepath.Join(t.TempDir(), "applied")
	x.ApplyCommand = []string{"sh", "-c", `echo applied >> "$0"`, applied}
	x.Step, x.ApplyStartedAt, x.ApplyOutput = models.StepApplying, ptr(time.Now()), "aws_vpc.main: Creating...\n"
	require.NoError(t, models.UpdateExecution(b.ctx, b.DB.Bun, x, "apply_command", "step", "apply_started_at", "apply_output"))

	// The rescued job's next attempt.
	require.NoError(t, b.Infra.ApplyExecution(b.ctx, x.ID))
	return b, run, x, applied
}

func ptr[T any](v T) *T { return &v }

// TestInterruptedApply: an apply whose worker died is never run again on
// its own; the execution waits, interrupted, until an operator chooses.
func TestInterruptedApply(t *testing.T) {
	t.Parallel()

	t.Run("detected", func(t *testing.T) {
		t.Parallel()
		b, run, x, applied := interruptedApply(t)
		_, err := os.Stat(applied)
		require.ErrorIs(t, err, os.ErrNotExist, "the apply command did not run again")
		got := b.mustExecution(t, run.ID, infratest.VPC)
		require.Equal(t, models.ExecRunning, got.Status)
		require.Equal(t, models.StepInterrupted, got.Step)
		full, err := models.ExecutionByID(b.ctx, b.DB.Bun, x.ID)
		require.NoError(t, err)
		require.Equal(t, "aws_vpc.main: Creating...\n", full.ApplyOutput, "the partial output is kept")
		entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Target: infra.ExecutionTarget(x.ExecutionID), Event: infra.EventExecutionInterrupted})
		require.NoError(t, err)
		require.Len(t, entries, 1)
		require.Equal(t, "gantry", entries[0].Actor)
		now, err := models.RunByID(b.ctx, b.DB.Bun, run.ID)
		require.NoError(t, err)
		require.Equal(t, models.RunRunning, now.Status, "the run waits")
		lock, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
		require.NoError(t, err)
		require.NotNil(t, lock, "the merge lock stays held")
		require.Equal(t, run.ID, lock.RunID)
		require.Equal(t, models.ExecWaiting, b.executions(t, run.ID)[infratest.RDS])

		// Retrying its job from /admin/jobs is told why it would do nothing.
		why, err := b.Infra.StaleJob(b.ctx, jobs.ApplyExecutionArgs{}.Kind(), []byte(`{"execution_id": `+strconv.FormatInt(x.ID, 10)+`}`))
		require.NoError(t, err)
		require.Contains(t, why, "apply was interrupted")

		// Another attempt (or a duplicate job) changes nothing.
		require.NoError(t, b.Infra.ApplyExecution(b.ctx, x.ID))
		_, err = os.Stat(applied)
		require.ErrorIs(t, err, os.ErrNotExist)
		// Only an interrupted execution takes the choice.
		err = b.Infra.ResolveInterrupted(b.ctx, x.ExecutionID, "maybe", operator, "")
		require.ErrorContains(t, err, "choice")
	})

	t.Run("last attempt", func(t *testing.T) {
		// The apply job's last attempt ends in error (or the sweep finds
		// it gone) after the apply began: interrupted, not failed.
		t.Parallel()
		b := setup(t, options{})
		_, run := b.merge(t, b.repo.OpenPR(6, b.vpcChange("vpc-v3")))
		x := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
		x.Step, x.ApplyStartedAt = models.StepApplying, ptr(time.Now())
		require.NoError(t, models.UpdateExecution(b.ctx, b.DB.Bun, x, "step", "apply_started_at"))
		require.NoError(t, b.Infra.GiveUp(b.ctx, jobs.GiveUp{ExecutionID: x.ID}, errors.New("worker died")))
		got := b.mustExecution(t, run.ID, infratest.VPC)
		require.Equal(t, models.ExecRunning, got.Status)
		require.Equal(t, models.StepInterrupted, got.Step)
		require.NoError(t, b.Infra.GiveUp(b.ctx, jobs.GiveUp{ExecutionID: x.ID}, errors.New("again")))
		require.Equal(t, models.StepInterrupted, b.mustExecution(t, run.ID, infratest.VPC).Step, "it stays interrupted")
	})

	t.Run("mark failed", func(t *testing.T) {
		t.Parallel()
		b, run, x, applied := interruptedApply(t)
		require.NoError(t, b.Infra.ResolveInterrupted(b.ctx, x.ExecutionID, infra.ChoiceFailed, operator, "half the subnets exist"))
		run = b.WaitRun(t, run.ID, models.RunFailed)
		got := b.mustExecution(t, run.ID, infratest.VPC)
		require.Equal(t, models.ExecFailed, got.Status)
		require.Equal(t, "the interrupted apply was marked as failed by "+operator+": half the subnets exist", got.Error)
		require.Equal(t, models.ExecAborted, b.executions(t, run.ID)[infratest.RDS], "dependents are aborted")
		lock, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
		require.NoError(t, err)
		require.Nil(t, lock)
		b.requireResolved(t, x, infra.ChoiceFailed)
		_, err = os.Stat(applied)
		require.ErrorIs(t, err, os.ErrNotExist)
		err = b.Infra.ResolveInterrupted(b.ctx, x.ExecutionID, infra.ChoiceApplied, operator, "")
		require.ErrorContains(t, err, "only an interrupted apply")
	})

	t.Run("mark applied", func(t *testing.T) {
		t.Parallel()
		b, run, x, applied := interruptedApply(t)
		require.NoError(t, b.Infra.ResolveInterrupted(b.ctx, x.ExecutionID, infra.ChoiceApplied, operator, "it is all there"))
		got := b.mustExecution(t, run.ID, infratest.VPC)
		require.Equal(t, models.ExecSucceeded, got.Status)
		// rds, which waited for vpc, starts (and, vpc's output unchanged,
		// succeeds without changes), so the run ends.
		b.WaitExecution(t, run.ID, infratest.RDS, models.ExecSucceeded, models.StepPlanning)
		b.WaitRun(t, run.ID, models.RunSucceeded)
		b.requireResolved(t, x, infra.ChoiceApplied)
		_, err := os.Stat(applied)
		require.ErrorIs(t, err, os.ErrNotExist)
	})

	t.Run("plan again", func(t *testing.T) {
		t.Parallel()
		b, run, x, applied := interruptedApply(t)
		old, _, err := b.Infra.Approvals.Approval(b.ctx, infra.ExecutionSubject(x.ExecutionID))
		require.NoError(t, err)
		require.NoError(t, b.Infra.ResolveInterrupted(b.ctx, x.ExecutionID, infra.ChoicePlanAgain, operator, ""))
		b.requireResolved(t, x, infra.ChoicePlanAgain)
		again := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
		require.NotNil(t, again.ApprovalID)
		require.NotEqual(t, old.ID, *again.ApprovalID, "a new approval: the voters are asked again")
		require.Nil(t, again.ApplyStartedAt)
		require.Contains(t, again.PlanOutput, `"vpc-v2"`)
		superseded, err := models.ApprovalBySubject(b.ctx, b.DB.Bun, infra.ExecutionSubject(x.ExecutionID).String()+"~"+itoa(old.ID))
		require.NoError(t, err)
		require.NotNil(t, superseded.ClosedAt, "the old approval is closed")
		require.Eventually(t, func() bool {
			n := 0
			for _, m := range b.Mail.Messages() {
				if slices.Contains(m.To, ada) && strings.Contains(m.Subject, "Vote on "+infratest.VPC+" ") {
					n++
				}
			}
			return n >= 2
		}, 30*time.Second, 50*time.Millisecond, "the voters are asked again: %v", mailSubjects(b))

		// The new plan, approved, is applied once.
		_, res, err := b.Infra.Approvals.VoteWithLink(b.ctx, b.VoteMail(t, ada, infratest.VPC), "approve", "")
		require.NoError(t, err)
		require.Equal(t, approval.Approved, res.State)
		b.WaitExecution(t, run.ID, infratest.VPC, models.ExecSucceeded, models.StepApplying)
		out, err := os.ReadFile(applied)
		require.NoError(t, err)
		require.Equal(t, "applied\n", string(out), "applied exactly once, after the new vote")
	})
}

func (b *bundle) requireResolved(t *testing.T, x *models.Execution, choice string) {
	t.Helper()
	entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Target: infra.ExecutionTarget(x.ExecutionID), Event: infra.EventExecutionResolved})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, operator, entries[0].Actor)
	require.Equal(t, choice, entries[0].Detail["choice"])
}

func mailSubjects(b *bundle) []string {
	var out []string
	for _, m := range b.Mail.Messages() {
		out = append(out, strings.Join(m.To, ",")+": "+m.Subject)
	}
	return out
}
