package daemons_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/daemons"
	"github.com/gantryhq/gantry/models"
)

func appErr(t *testing.T, err error) *apperr.Error {
	t.Helper()
	var ae *apperr.Error
	require.True(t, errors.As(err, &ae), "not an app error: %v", err)
	return ae
}

func TestEnvironmentBadInput(t *testing.T) {
	t.Parallel()
	h := setup(t)
	spec := func(minHealthy int) daemons.Spec {
		return daemons.Spec{TaskDefinition: daemons.TaskDefinition{Name: "logs", Command: []string{"/bin/true"}},
			InstanceGroup: daemons.InstanceGroup{Cluster: "web"}, MinHealthyPercent: intp(minHealthy)}
	}
	_, _, err := h.svc.CreateEnvironment(h.ctx, "logs", spec(101), "api", "test")
	require.Equal(t, apperr.Invalid, appErr(t, err).Code)
	require.Contains(t, appErr(t, err).Fields, "deployment_configuration.min_healthy_percent")
	_, _, err = h.svc.CreateEnvironment(h.ctx, "Bad Name", daemons.Spec{}, "api", "test")
	require.Equal(t, []string{"instance_group.cluster", "name", "task_definition.command", "task_definition.name"}, keys(appErr(t, err).Fields))

	v1 := h.create("logs", "fluent", "web", 50)
	// The same task definition on an overlapping group: 409 naming the other.
	_, _, err = h.svc.CreateEnvironment(h.ctx, "logs2", daemons.Spec{TaskDefinition: daemons.TaskDefinition{Name: "fluent", Command: []string{"/bin/true"}},
		InstanceGroup: daemons.InstanceGroup{Cluster: "web", Attributes: []string{"zone=a"}}}, "api", "test")
	require.Equal(t, apperr.Conflict, appErr(t, err).Code)
	require.Contains(t, appErr(t, err).Message, "logs")
	// Disjoint attribute groups may run it.
	h.create("logs-b", "fluent2", "web", 50, "zone=b")
	_, err = h.svc.UpdateEnvironment(h.ctx, "logs-b", daemons.Spec{TaskDefinition: daemons.TaskDefinition{Name: "fluent", Command: []string{"/bin/true"}},
		InstanceGroup: daemons.InstanceGroup{Cluster: "other"}}, "api", "test")
	require.NoError(t, err, "another cluster does not overlap")

	_, err = h.svc.StartDeployment(h.ctx, "nope", v1.ID, "test")
	require.Equal(t, apperr.NotFound, appErr(t, err).Code)
	_, err = h.svc.StartDeployment(h.ctx, "logs", uuid.New(), "test")
	require.Equal(t, apperr.NotFound, appErr(t, err).Code)
	other, err := models.LatestDaemonVersion(h.ctx, h.srv.DB.Bun, h.env("logs-b").ID)
	require.NoError(t, err)
	_, err = h.svc.StartDeployment(h.ctx, "logs", other.ID, "test")
	require.Equal(t, apperr.Invalid, appErr(t, err).Code)
	require.Contains(t, appErr(t, err).Fields["version_id"], "logs-b")

	// A filter that matches nothing is allowed and shows 0 instances.
	diff, err := h.svc.DiffDeployment(h.ctx, "logs-b", other.ID)
	require.NoError(t, err)
	require.Equal(t, 0, diff.Instances)
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slicesSort(out)
	return out
}

// TestRollout: deploy to every instance, update at 50 % in two batches,
// each batch only once the previous one runs, then roll back.
func TestRollout(t *testing.T) {
	t.Parallel()
	h := setup(t)
	for _, id := range []string{"i-1", "i-2", "i-3", "i-4"} {
		h.register(id, "web")
	}
	h.register("i-other", "db")
	v1 := h.create("logs", "fluent", "web", 50)

	diff, err := h.svc.DiffDeployment(h.ctx, "logs", v1.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"i-1", "i-2", "i-3", "i-4"}, diff.Start)

	d1, err := h.svc.StartDeployment(h.ctx, "logs", v1.ID, "test")
	require.NoError(t, err)
	h.eventually("4 tasks launching", func() bool { return len(h.tasks("logs")["launching"]) == 4 })
	h.agentsAct("logs")
	h.waitState(d1.ID, models.DaemonComplete)
	require.True(t, h.env("logs").Active)

	v2, err := h.svc.UpdateEnvironment(h.ctx, "logs", daemons.Spec{TaskDefinition: daemons.TaskDefinition{Name: "fluent", Command: []string{"/bin/sleep", "2000"}}}, "api", "test")
	require.NoError(t, err)
	require.Equal(t, 2, v2.Number)
	diff, err = h.svc.DiffDeployment(h.ctx, "logs", v2.ID)
	require.NoError(t, err)
	require.Len(t, diff.Replace, 4)
	require.Equal(t, 2, diff.FirstBatch)

	d2, err := h.svc.StartDeployment(h.ctx, "logs", v2.ID, "test")
	require.NoError(t, err)
	h.eventually("first batch", func() bool { return len(h.tasks("logs")["stopping"]) == 2 })
	ts := h.tasks("logs")
	require.Len(t, ts["running"], 2, "half keep running")
	require.Len(t, ts["launching"], 2)
	h.agentsAct("logs")
	h.eventually("second batch", func() bool { return len(h.tasks("logs")["stopping"]) == 2 })
	h.agentsAct("logs")
	d2 = h.waitState(d2.ID, models.DaemonComplete)
	require.Equal(t, 2, d2.Batches)
	for _, tk := range h.tasks("logs")["running"] {
		require.Equal(t, v2.ID, tk.VersionID)
	}

	// Roll back: the previous version, in batches again.
	d3, err := h.svc.RollbackDeployment(h.ctx, "logs", nil, "test")
	require.NoError(t, err)
	require.Equal(t, v1.ID, d3.VersionID)
	h.eventually("rollback done", func() bool {
		h.agentsAct("logs")
		return h.deployment(d3.ID).State == models.DaemonComplete
	})
	running := h.tasks("logs")["running"]
	require.Len(t, running, 4)
	for _, tk := range running {
		require.Equal(t, v1.ID, tk.VersionID)
	}
	entries, err := models.ListLog(h.ctx, h.srv.DB.Bun, models.LogFilter{Deployment: d2.ID.String(), Event: "batch"})
	require.NoError(t, err)
	require.Len(t, entries, 2, "one log entry per batch")
	require.Equal(t, v2.ID.String(), entries[0].Revision)
}

// TestMonitors: a dead task is restarted (health-repair), a new instance
// gets a task (new-instance), a departed instance's task ends; a stopped
// environment starts nothing; delete is refused while a user deployment
// is in progress.
func TestMonitors(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.register("i-1", "web")
	h.register("i-2", "web")
	v1 := h.create("logs", "fluent", "web", 50)
	d1, err := h.svc.StartDeployment(h.ctx, "logs", v1.ID, "test")
	require.NoError(t, err)
	h.eventually("tasks launching", func() bool { return len(h.tasks("logs")["launching"]) == 2 })
	h.agentsAct("logs")
	h.waitState(d1.ID, models.DaemonComplete)

	// A task dies: restarted at once on its instance.
	dead := h.tasks("logs")["running"][0]
	require.NoError(t, h.svc.ReportTask(h.ctx, dead.InstanceID, dead.ID, daemons.Report{State: "exited", ExitCode: intp(137)}, "agent"))
	h.eventually("restart", func() bool { return len(h.tasks("logs")["launching"]) == 1 })
	restarted := h.tasks("logs")["launching"][0]
	require.Equal(t, dead.InstanceID, restarted.InstanceID)
	require.Equal(t, dead.ID, *restarted.Replaces)
	repair := h.deployment(restarted.DeploymentID)
	require.Equal(t, models.DaemonHealthRepair, repair.Type)
	h.agentsAct("logs")
	h.waitState(repair.ID, models.DaemonComplete)

	// It dies again soon after: a crash loop, so the restart waits out
	// the backoff instead of spinning.
	var again models.DaemonTask
	for _, r := range h.tasks("logs")["running"] {
		if r.InstanceID == dead.InstanceID {
			again = r
		}
	}
	require.NoError(t, h.svc.ReportTask(h.ctx, again.InstanceID, again.ID, daemons.Report{State: "exited", ExitCode: intp(1)}, "agent"))
	require.NoError(t, h.svc.ReconcileEnvironment(h.ctx, h.env("logs").ID))
	require.Empty(t, h.tasks("logs")["launching"], "a crash-looping task waits out its backoff")
	loops, err := models.DaemonCrashLoops(h.ctx, h.srv.DB.Bun, h.env("logs").ID)
	require.NoError(t, err)
	require.Equal(t, 2, loops[0].Failures)

	// A new instance joins: it gets a task.
	h.register("i-3", "web")
	h.eventually("new instance task", func() bool {
		for _, tk := range h.tasks("logs")["launching"] {
			if tk.InstanceID == "i-3" {
				return h.deployment(tk.DeploymentID).Type == models.DaemonNewInstance
			}
		}
		return false
	})
	h.agentsAct("logs")

	// An instance leaves: its task ends.
	require.NoError(t, h.svc.Leave(h.ctx, "i-3", "agent"))
	for _, tk := range h.tasks("logs")["running"] {
		require.NotEqual(t, "i-3", tk.InstanceID)
	}

	// Delete is refused while a user-created deployment is in progress.
	v2, err := h.svc.UpdateEnvironment(h.ctx, "logs", daemons.Spec{TaskDefinition: daemons.TaskDefinition{Name: "fluent", Command: []string{"/bin/sleep", "5"}}}, "api", "test")
	require.NoError(t, err)
	d2, err := h.svc.StartDeployment(h.ctx, "logs", v2.ID, "test")
	require.NoError(t, err)
	h.waitState(d2.ID, models.DaemonInProgress)
	err = h.svc.DeleteEnvironment(h.ctx, "logs", "test")
	require.Equal(t, apperr.Conflict, appErr(t, err).Code)

	// Stop: the deployment ends, tasks stay, the environment goes inactive
	// and a new instance gets nothing.
	_, err = h.svc.StopDeployment(h.ctx, "logs", "test")
	require.NoError(t, err)
	require.Equal(t, models.DaemonStopped, h.deployment(d2.ID).State)
	require.False(t, h.env("logs").Active)
	h.register("i-4", "web")
	require.NoError(t, h.svc.ReconcileEnvironment(h.ctx, h.env("logs").ID))
	for _, tk := range h.tasks("logs")["launching"] {
		require.NotEqual(t, "i-4", tk.InstanceID)
	}
	require.NoError(t, h.svc.DeleteEnvironment(h.ctx, "logs", "test"))
	ts := h.tasks("logs")
	require.Empty(t, ts["running"])
	require.Empty(t, ts["launching"])
}

// TestReconcilersRace: many reconciles at once start one task per
// instance, never two.
func TestReconcilersRace(t *testing.T) {
	t.Parallel()
	h := setup(t)
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		h.register(id, "web")
	}
	v1 := h.create("logs", "fluent", "web", 50)
	d, err := h.svc.StartDeployment(h.ctx, "logs", v1.ID, "test")
	require.NoError(t, err)
	h.eventually("started", func() bool { return len(h.tasks("logs")["launching"]) == 3 })
	h.agentsAct("logs")
	h.waitState(d.ID, models.DaemonComplete)
	for _, tk := range h.tasks("logs")["running"] {
		require.NoError(t, h.svc.ReportTask(h.ctx, tk.InstanceID, tk.ID, daemons.Report{State: "exited", ExitCode: intp(1)}, "agent"))
	}
	h.register("i-4", "web")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- h.svc.ReconcileEnvironment(h.ctx, h.env("logs").ID) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	perInstance := map[string]int{}
	for _, tk := range h.tasks("logs")["launching"] {
		perInstance[tk.InstanceID]++
	}
	require.Equal(t, map[string]int{"i-1": 1, "i-2": 1, "i-3": 1, "i-4": 1}, perInstance)
	var inProgress int
	require.NoError(t, h.srv.DB.Bun.NewSelect().TableExpr("daemon_deployments").ColumnExpr("count(*)").
		Where("state = 'in-progress'").Scan(h.ctx, &inProgress))
	require.Equal(t, 1, inProgress, "one coalesced deployment")
}

// TestInterruptedStepLeavesNothing: a step that fails part-way (here the
// database refuses one of its starts, as it would a racing worker's) leaves
// no task, no stop and no log entry behind; once the obstacle is gone the
// next step carries on.
func TestInterruptedStepLeavesNothing(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.register("i-1", "web")
	h.register("i-2", "web")
	v1 := h.create("logs", "fluent", "web", 50)
	env := h.env("logs")
	// A deployment in progress that no job steps (as if its worker died).
	d := &models.DaemonDeployment{ID: uuid.New(), EnvironmentID: env.ID, VersionID: v1.ID, Type: models.DaemonUserCreated, CreatedBy: "test"}
	ok, err := models.InsertDaemonDeploymentInProgress(h.ctx, h.srv.DB.Bun, d)
	require.NoError(t, err)
	require.True(t, ok)
	// The database fails the batch's write on i-2 after i-1's went in.
	_, err = h.srv.DB.Bun.ExecContext(h.ctx, `CREATE FUNCTION test_refuse_i2() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.instance_id = 'i-2' THEN RAISE EXCEPTION 'worker killed mid-batch'; END IF; RETURN NEW; END $$`)
	require.NoError(t, err)
	_, err = h.srv.DB.Bun.ExecContext(h.ctx, `CREATE TRIGGER test_refuse_i2 BEFORE INSERT ON daemon_tasks FOR EACH ROW EXECUTE FUNCTION test_refuse_i2()`)
	require.NoError(t, err)

	_, err = h.svc.StepDeployment(h.ctx, d.ID)
	require.ErrorContains(t, err, "worker killed mid-batch")
	require.Empty(t, h.tasks("logs"), "no task of the half-done batch")
	entries, err := models.ListLog(h.ctx, h.srv.DB.Bun, models.LogFilter{Deployment: d.ID.String()})
	require.NoError(t, err)
	require.Empty(t, entries, "no log entry of the half-done batch")
	require.Equal(t, 0, h.deployment(d.ID).Batches)

	_, err = h.srv.DB.Bun.ExecContext(h.ctx, `DROP TRIGGER test_refuse_i2 ON daemon_tasks`)
	require.NoError(t, err)
	_, err = h.svc.StepDeployment(h.ctx, d.ID)
	require.NoError(t, err)
	perInstance := map[string]int{}
	for _, tk := range h.tasks("logs")["launching"] {
		perInstance[tk.InstanceID]++
	}
	require.Equal(t, map[string]int{"i-1": 1, "i-2": 1}, perInstance)
	require.Equal(t, 1, h.deployment(d.ID).Batches)
}

// TestGantryfile: environments declared in gantry.yaml are created and
// versioned by the sync, the file wins over the API, and an environment
// that leaves the file is deleted.
func TestGantryfile(t *testing.T) {
	t.Parallel()
	h := setup(t)
	yaml := func(minHealthy int) string {
		return fmt.Sprintf(`daemons:
  - name: logs
    task_definition: {name: fluent-bit, command: [/bin/sleep, "100"], env: {LEVEL: info}}
    instance_group: {cluster: web, attributes: [role=web]}
    min_healthy_percent: %d
`, minHealthy)
	}
	h.srv.Sync(t, yaml(50))
	env := h.env("logs")
	require.Equal(t, "file", env.Source)
	v1, err := models.LatestDaemonVersion(h.ctx, h.srv.DB.Bun, env.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"LEVEL": "info"}, v1.TaskEnv)

	h.srv.Sync(t, yaml(50))
	again, err := models.LatestDaemonVersion(h.ctx, h.srv.DB.Bun, env.ID)
	require.NoError(t, err)
	require.Equal(t, v1.ID, again.ID, "an unchanged file makes no version")

	_, err = h.svc.UpdateEnvironment(h.ctx, "logs", daemons.Spec{TaskDefinition: daemons.TaskDefinition{Name: "fluent-bit", Command: []string{"/bin/true"}}}, "api", "test")
	require.Equal(t, apperr.Conflict, appErr(t, err).Code, "the file wins")

	h.srv.Sync(t, yaml(80))
	v2, err := models.LatestDaemonVersion(h.ctx, h.srv.DB.Bun, env.ID)
	require.NoError(t, err)
	require.Equal(t, 2, v2.Number)
	require.Equal(t, 80, v2.MinHealthyPercent)

	_, err = h.srv.App.ParseConfig("gantry.yaml", []byte(yaml(150)), func(string) (string, bool) { return "", false })
	require.ErrorContains(t, err, "daemons[0].min_healthy_percent")

	h.srv.Sync(t, "daemons: []\n")
	_, err = models.DaemonEnvironmentByName(h.ctx, h.srv.DB.Bun, "logs")
	require.ErrorIs(t, err, models.ErrNotFound, "gone from the file, gone")
}

// TestTaskOnDepartedInstanceEnds: a task that reached an instance in the
// instant it left (inserted after its goodbye) is ended by the next
// reconcile, not left waiting for an agent that is gone.
func TestTaskOnDepartedInstanceEnds(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.register("i-1", "web")
	h.register("i-2", "web")
	v1 := h.create("logs", "fluent", "web", 50)
	d1, err := h.svc.StartDeployment(h.ctx, "logs", v1.ID, "test")
	require.NoError(t, err)
	h.eventually("started", func() bool { return len(h.tasks("logs")["launching"]) == 2 })
	h.agentsAct("logs")
	h.waitState(d1.ID, models.DaemonComplete)

	require.NoError(t, h.svc.Leave(h.ctx, "i-2", "agent"))
	late := models.DaemonTask{ID: uuid.New(), EnvironmentID: h.env("logs").ID, InstanceID: "i-2", VersionID: v1.ID, DeploymentID: d1.ID, State: "launching"}
	require.NoError(t, models.InsertDaemonTasks(h.ctx, h.srv.DB.Bun, []models.DaemonTask{late}))
	require.NoError(t, h.svc.ReconcileEnvironment(h.ctx, h.env("logs").ID))
	got, err := models.LockDaemonTask(h.ctx, h.srv.DB.Bun, late.ID)
	require.NoError(t, err)
	require.Equal(t, "stopped", got.State)
	require.Equal(t, "its instance left the cluster", got.Reason)
}

// TestSweepPicksUpAStaleDeployment: an in-progress deployment whose step
// job was lost (nobody has stepped it for long) is stepped again after the
// sweep (the seed's stale-lock sweep).
func TestSweepPicksUpAStaleDeployment(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.register("i-1", "web")
	v1 := h.create("logs", "fluent", "web", 50)
	long := time.Now().Add(-time.Hour)
	d := &models.DaemonDeployment{ID: uuid.New(), EnvironmentID: h.env("logs").ID, VersionID: v1.ID, Type: models.DaemonUserCreated,
		CreatedBy: "test", StartedAt: &long, SteppedAt: &long}
	ok, err := models.InsertDaemonDeploymentInProgress(h.ctx, h.srv.DB.Bun, d)
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, h.tasks("logs"), "nobody steps it")

	require.NoError(t, h.svc.Sweep(h.ctx))
	h.eventually("stepped again", func() bool { return len(h.tasks("logs")["launching"]) == 1 })
	require.Equal(t, 1, h.deployment(d.ID).Batches)
}
