package infra_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/ecsrunner/ecstasktest"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// deadWorkerHeartbeat is the heartbeat interval of the dead-worker tests:
// a worker is taken for dead after jobs.QuietAfter of it (3 s).
const deadWorkerHeartbeat = 500 * time.Millisecond

func TestMain(m *testing.M) {
	servertest.RunWorkerProcessIfAsked()
	ecstasktest.RunTaskIfAsked() // commands_ecs_test.go: the fake ECS's tasks
	os.Exit(m.Run())
}

// TestDeadWorker_applyIsInterruptedInMinutes: kill -9 of the worker process
// in the middle of an apply. The apply's processes die with it (a
// local-exec style grandchild too), the sweep notices from the quiet
// heartbeat within its window — not at River's rescue hours later — and the
// execution is interrupted, never applied again; the dead attempt's job is
// cancelled, so River's rescue ends it instead of running it; the merge
// lock stays held and says why.
func TestDeadWorker_applyIsInterruptedInMinutes(t *testing.T) {
	t.Parallel()
	b := setup(t, options{noWorkers: true, env: []string{"GANTRY_HEARTBEAT_INTERVAL=" + deadWorkerHeartbeat.String()}})
	worker := b.StartWorkerProcess(t)

	p := b.repo.OpenPR(7, b.vpcChange("vpc-v2"))
	_, run := b.merge(t, p)
	x := b.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)

	// The apply: a side effect, then a local-exec style child that runs on.
	dir := t.TempDir()
	applied, pids := filepath.Join(dir, "applied"), filepath.Join(dir, "pids")
	x.ApplyCommand = []string{"sh", "-c", `echo applied >> "$0"; echo "aws_vpc.main: Creating..."
sh -c 'sleep 1000 & echo $! > "$0.child"; wait' "$1" &
until [ -s "$1.child" ]; do sleep 0.05; done
{ echo $$; cat "$1.child"; } > "$1.tmp" && mv "$1.tmp" "$1"
wait`, applied, pids}
	require.NoError(t, models.UpdateExecution(b.ctx, b.DB.Bun, x, "apply_command"))
	_, err := b.Infra.Vote(b.ctx, infra.VoteInput{ExecutionID: x.ExecutionID, Voter: ada, Decision: "approve", Via: approvals.ViaDashboard})
	require.NoError(t, err)

	var tree []int
	servertest.WaitFor(t, func() (bool, string) {
		data, err := os.ReadFile(pids)
		if err != nil {
			return false, "the apply has not started its processes"
		}
		tree = nil
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			require.NoError(t, err)
			tree = append(tree, pid)
		}
		return len(tree) == 2, fmt.Sprintf("pids %v", tree)
	})

	// A live worker is not taken for dead, however long it runs: wait
	// until the apply has run past the quiet window, beating.
	quiet := jobs.QuietAfter(deadWorkerHeartbeat)
	servertest.WaitFor(t, func() (bool, string) {
		hbs, err := models.HeartbeatsOf(b.ctx, b.DB.Bun, jobs.InfraHeartbeats(), "execution_id", []int64{x.ID})
		require.NoError(t, err)
		hb, ok := hbs[x.ID]
		if !ok {
			return false, "no heartbeat"
		}
		return hb.BeatAt.Sub(hb.StartedAt) > quiet, fmt.Sprintf("beating for %s", hb.BeatAt.Sub(hb.StartedAt))
	})
	require.NoError(t, b.Infra.Reconcile(b.ctx))
	require.Equal(t, models.StepApplying, b.mustExecution(t, run.ID, infratest.VPC).Step, "a worker that beats is alive")

	require.NoError(t, worker.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	_ = worker.Wait()
	for _, pid := range tree {
		servertest.WaitFor(t, func() (bool, string) {
			return !processAlive(pid), fmt.Sprintf("process %d of the apply outlived its worker", pid)
		})
	}

	// The sweep (River's leader runs it every minute) notices.
	servertest.WaitFor(t, func() (bool, string) {
		require.NoError(t, b.Infra.Reconcile(b.ctx))
		got := b.mustExecution(t, run.ID, infratest.VPC)
		return got.Step == models.StepInterrupted, "execution is " + got.Status + "/" + got.Step
	})
	noticed := time.Since(killed)
	require.GreaterOrEqual(t, noticed, quiet-time.Second, "not before the heartbeat went quiet")
	t.Logf("noticed %s after the kill (window %s)", noticed.Round(time.Millisecond), quiet)

	data, err := os.ReadFile(applied)
	require.NoError(t, err)
	require.Equal(t, "applied\n", string(data), "the apply ran once")
	full, err := models.ExecutionByID(b.ctx, b.DB.Bun, x.ID)
	require.NoError(t, err)
	require.Contains(t, full.ApplyOutput, "aws_vpc.main: Creating...", "the partial output is kept")
	entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Target: infra.ExecutionTarget(x.ExecutionID), Event: infra.EventExecutionInterrupted})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Contains(t, fmt.Sprint(entries[0].Detail), "no heartbeat since")

	// River will not run the dead attempt again: it was cancelled, which
	// its rescue honours, and the worker's heartbeat row is gone.
	var cancelAttempted bool
	require.NoError(t, b.DB.Bun.NewRaw(`SELECT metadata->>'cancel_attempted_at' IS NOT NULL FROM river_job WHERE kind = ? AND (args->>'execution_id')::bigint = ?`,
		jobs.ApplyExecutionArgs{}.Kind(), x.ID).Scan(b.ctx, &cancelAttempted))
	require.True(t, cancelAttempted)
	hbs, err := models.HeartbeatsOf(b.ctx, b.DB.Bun, jobs.InfraHeartbeats(), "execution_id", []int64{x.ID})
	require.NoError(t, err)
	require.Empty(t, hbs)

	// The run waits with the merge lock held, for an operator.
	lock, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.NotNil(t, lock)
	require.Equal(t, run.ID, lock.RunID)
}

// processAlive reports whether pid runs (a zombie does not).
func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// blockingTool puts a stand-in for tool on a PATH it returns: the first
// call whose arguments contain pattern starts a child that runs on, writes
// that child's pid to <dir>/<name>.child, and waits; every other call is
// the real tool's. A worker running it is then killed mid-command.
func blockingTool(t *testing.T, dir, tool string, blocks map[string]string) string {
	t.Helper()
	real, err := exec.LookPath(tool)
	require.NoError(t, err)
	var script strings.Builder
	fmt.Fprintf(&script, "#!/bin/sh\n")
	for name, pattern := range blocks {
		fmt.Fprintf(&script, `case " $* " in *%[1]s*)
  if mkdir %[2]s/%[3]s.once 2>/dev/null; then
    sh -c 'sleep 1000 & echo $! > "$0.tmp"; mv "$0.tmp" "$0"; wait' %[2]s/%[3]s.child &
    wait; exit 1
  fi;;
esac
`, pattern, dir, name)
	}
	fmt.Fprintf(&script, "exec %s \"$@\"\n", real)
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, tool), []byte(script.String()), 0o755))
	return "PATH=" + bin + ":" + os.Getenv("PATH")
}

// killWhenBlocked waits for blockingTool's child called name, kills the
// worker with kill -9, and waits for the child to die with it.
func killWhenBlocked(t *testing.T, worker *exec.Cmd, dir, name string) {
	t.Helper()
	var child int
	servertest.WaitFor(t, func() (bool, string) {
		data, err := os.ReadFile(filepath.Join(dir, name+".child"))
		if err != nil {
			return false, name + " has not blocked yet"
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(data)))
		require.NoError(t, err)
		return true, ""
	})
	require.NoError(t, worker.Process.Signal(syscall.SIGKILL))
	_ = worker.Wait()
	servertest.WaitFor(t, func() (bool, string) {
		return !processAlive(child), fmt.Sprintf("the child %d of %s outlived its worker", child, name)
	})
}

// logged reports whether target's log has event.
func (b *bundle) logged(t *testing.T, target, event string) bool {
	t.Helper()
	entries, err := models.ListLog(b.ctx, b.DB.Bun, models.LogFilter{Target: target, Event: event})
	require.NoError(t, err)
	return len(entries) > 0
}

// TestDeadWorker_plansRunAgain: kill -9 of the worker in the middle of a
// pull request's plan, then of another in the middle of an execution's
// plan. A plan changes nothing, so the sweep queues each again as soon as
// the heartbeat is quiet; the next worker plans, and the run goes on to
// its vote.
func TestDeadWorker_plansRunAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, options{noWorkers: true, env: []string{"GANTRY_HEARTBEAT_INTERVAL=" + deadWorkerHeartbeat.String()}})
	dir := t.TempDir()
	path := blockingTool(t, dir, "terraform", map[string]string{"pr-plan": `"/jobs/plan-"*" plan "`, "exec-plan": `"/jobs/exec-"*" plan "`})

	p := b.repo.OpenPR(8, b.vpcChange("vpc-v8"))
	first := b.StartWorkerProcess(t, path)
	res := b.Deliver(t, "pull_request", b.repo.Event(p, "opened", ""))
	require.Equal(t, infra.WebhookAccepted, res.Outcome, res.Message)
	killWhenBlocked(t, first, dir, "pr-plan")
	worker := b.StartWorkerProcess(t, path)
	servertest.WaitFor(t, func() (bool, string) {
		require.NoError(t, b.Infra.Reconcile(b.ctx))
		plans, err := models.PlansOfPullRequest(b.ctx, b.DB.Bun, "live", p.Number, p.Head)
		require.NoError(t, err)
		if len(plans) != 1 {
			return false, fmt.Sprintf("%d plans", len(plans))
		}
		return plans[0].Status == models.PlanSucceeded && b.logged(t, infra.PlanTarget(plans[0].ID), infra.EventPlanRequeued),
			"the plan is " + plans[0].Status
	})

	_, run := b.merge(t, p)
	killWhenBlocked(t, worker, dir, "exec-plan")
	b.StartWorkers(t)
	servertest.WaitFor(t, func() (bool, string) {
		require.NoError(t, b.Infra.Reconcile(b.ctx))
		x := b.mustExecution(t, run.ID, infratest.VPC)
		return x.Step == models.StepVoting, "vpc is " + x.Status + "/" + x.Step
	})
	x := b.mustExecution(t, run.ID, infratest.VPC)
	require.True(t, b.logged(t, infra.ExecutionTarget(x.ExecutionID), infra.EventExecutionRequeued))
	full, err := models.ExecutionByID(b.ctx, b.DB.Bun, x.ID)
	require.NoError(t, err)
	require.Contains(t, full.PlanOutput, `"vpc-v8"`, "the plan that counts is the second, whole")
}

// TestDeadWorker_scanRunsAgain: kill -9 of the worker while a run scans the
// merge (git). The sweep queues the scan again and makes the new job the
// run's scanner; the run goes on to plan, its merge lock held throughout.
func TestDeadWorker_scanRunsAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, options{noWorkers: true, env: []string{"GANTRY_HEARTBEAT_INTERVAL=" + deadWorkerHeartbeat.String()}})
	dir := t.TempDir()
	path := blockingTool(t, dir, "git", map[string]string{"scan": `" diff-tree "`})

	worker := b.StartWorkerProcess(t, path)
	p := b.repo.OpenPR(9, b.vpcChange("vpc-v9"))
	_, run := b.merge(t, p)
	killWhenBlocked(t, worker, dir, "scan")
	scanning, err := models.RunByID(b.ctx, b.DB.Bun, run.ID)
	require.NoError(t, err)
	require.Equal(t, models.RunScanning, scanning.Status)

	b.StartWorkers(t)
	servertest.WaitFor(t, func() (bool, string) {
		require.NoError(t, b.Infra.Reconcile(b.ctx))
		xs := b.executions(t, run.ID)
		return xs[infratest.VPC] == models.ExecRunning, fmt.Sprintf("executions %v", xs)
	})
	require.True(t, b.logged(t, infra.RunTarget(run.ID), infra.EventRunRequeued))
	lock, err := models.MergeLockOf(b.ctx, b.DB.Bun, "live")
	require.NoError(t, err)
	require.Equal(t, run.ID, lock.RunID)
}

// TestDeadWorker_driftCheckRunsAgain: kill -9 of the worker while a drift
// check plans. The sweep queues the check again (a drift plan changes
// nothing), so the unit is not left "checking" for River's rescue.
func TestDeadWorker_driftCheckRunsAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, options{noWorkers: true, env: []string{"GANTRY_HEARTBEAT_INTERVAL=" + deadWorkerHeartbeat.String()}})
	b.Sync(t, b.withDrift())
	dir := t.TempDir()
	path := blockingTool(t, dir, "terraform", map[string]string{"drift-plan": `"/jobs/drift-"*" plan "`})

	worker := b.StartWorkerProcess(t, path)
	require.NoError(t, b.Infra.ScheduleDrift(b.ctx))
	killWhenBlocked(t, worker, dir, "drift-plan")
	b.StartWorkers(t)
	var d models.DriftRepository
	servertest.WaitFor(t, func() (bool, string) {
		require.NoError(t, b.Infra.Reconcile(b.ctx))
		all, err := models.ListDrift(b.ctx, b.DB.Bun)
		require.NoError(t, err)
		if len(all) != 1 || all[0].Sweep == nil {
			return false, "not swept yet"
		}
		d = all[0]
		return d.Checking == 0, fmt.Sprintf("%d checks left", d.Checking)
	})
	require.Empty(t, d.Failed, "the check whose worker died ran again and succeeded")
	var requeued int
	require.NoError(t, b.DB.Bun.NewRaw("SELECT count(*) FROM deployment_log WHERE event = ?", infra.EventDriftCheckRequeued).Scan(b.ctx, &requeued))
	require.NotZero(t, requeued, "every check the dead worker held was queued again (the worker plans several at once)")
}
