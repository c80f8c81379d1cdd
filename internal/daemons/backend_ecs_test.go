package daemons_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/awstest/ecsfake"
	"github.com/gantryhq/gantry/internal/daemons"
	"github.com/gantryhq/gantry/internal/ecsdaemon"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

const ecsCluster = "fleet"

// ecsHarness is the daemons service with the cluster "fleet" on the ECS
// backend, a real aws-sdk-go-v2 ECS client talking to the in-test ECS.
type ecsHarness struct {
	*harness
	ecs     *ecsfake.Server
	backend *daemons.ECSBackend
	taskDef string
}

func setupECS(t *testing.T) *ecsHarness {
	t.Helper()
	fake := ecsfake.New(t, ecsfake.Options{})
	fake.AddCluster(ecsCluster)
	td := fake.RegisterTaskDefinition(ecsfake.TaskDefinition{Family: "node-exporter", CPU: 256, Memory: 512})
	client, err := ecsdaemon.New(t.Context(), ecsdaemon.Options{Region: fake.Region(), Endpoint: fake.URL,
		Credentials: fake.Credentials(), MaxAttempts: 3, MaxBackoff: 5 * time.Millisecond})
	require.NoError(t, err)
	srv := servertest.Services(t)
	svc := srv.Daemons()
	svc.StepInterval = 100 * time.Millisecond
	backend := &daemons.ECSBackend{Client: client, DB: srv.DB.Bun}
	svc.ClusterBackends = map[string]daemons.Backend{ecsCluster: backend}
	srv.StartWorkers(t)
	return &ecsHarness{harness: &harness{t: t, ctx: context.Background(), srv: srv, svc: svc}, ecs: fake, backend: backend, taskDef: td}
}

// sweep is one pass of the leader's periodic sweep: the cluster is read
// from ECS, every active environment reconciled, launching and stopping
// tasks dispatched again.
func (h *ecsHarness) sweep() {
	h.t.Helper()
	require.NoError(h.t, h.svc.Sweep(h.ctx))
}

// createECS creates an environment of the ECS task definition on fleet.
func (h *ecsHarness) createECS(name string, attrs ...string) *models.DaemonVersion {
	h.t.Helper()
	_, v, err := h.svc.CreateEnvironment(h.ctx, name, daemons.Spec{
		TaskDefinition: daemons.TaskDefinition{Name: h.taskDef},
		InstanceGroup:  daemons.InstanceGroup{Cluster: ecsCluster, Attributes: attrs}, MinHealthyPercent: intp(50),
	}, "api", "test")
	require.NoError(h.t, err)
	return v
}

// live are ECS's tasks of an environment that are not stopped, by
// container instance id.
func (h *ecsHarness) live(env string) map[string][]ecsfake.Task {
	out := map[string][]ecsfake.Task{}
	for _, t := range h.ecs.Tasks(ecsCluster) {
		if t.Group == daemons.ECSGroup(env) && t.LastStatus != "STOPPED" {
			id := t.InstanceARN[strings.LastIndex(t.InstanceARN, "/")+1:]
			out[id] = append(out[id], t)
		}
	}
	return out
}

// runAll is ECS's agents bringing every pending task up.
func (h *ecsHarness) runAll(env string) {
	for _, ts := range h.live(env) {
		for _, t := range ts {
			if t.LastStatus == "PENDING" {
				h.ecs.SetTaskRunning(t.ARN)
			}
		}
	}
}

// converge sweeps, with ECS's agents starting what is pending, until cond.
func (h *ecsHarness) converge(env, what string, cond func() bool) {
	h.t.Helper()
	h.eventually(what, func() bool {
		h.runAll(env)
		h.sweep()
		return cond()
	})
}

func (h *ecsHarness) addInstances(n int, attrs map[string]string) []ecsfake.Instance {
	var out []ecsfake.Instance
	for range n {
		out = append(out, h.ecs.AddInstance(ecsCluster, ecsfake.InstanceSpec{Attributes: attrs}))
	}
	return out
}

// onePerInstance: exactly one live ECS task on each of the instances and
// nowhere else, each started by a deployment Gantry has for that instance.
func (h *ecsHarness) onePerInstance(env string, instances []ecsfake.Instance) bool {
	live := h.live(env)
	if len(live) != len(instances) {
		return false
	}
	for _, in := range instances {
		if len(live[in.ID]) != 1 || live[in.ID][0].LastStatus != "RUNNING" {
			return false
		}
	}
	return true
}

func TestECSDeployRepairNewInstanceAndTermination(t *testing.T) {
	h := setupECS(t)
	zoneA := h.addInstances(3, map[string]string{"zone": "a"})
	other := h.addInstances(1, map[string]string{"zone": "b"})
	h.sweep()
	ins, err := models.DaemonClusterInstances(h.ctx, h.srv.DB.Bun, ecsCluster)
	require.NoError(t, err)
	require.Len(t, ins, 4, "the sweep records ECS's container instances")
	require.Equal(t, daemons.BackendECS, ins[0].Backend)

	v := h.createECS("exporter", "zone=a")
	dep, err := h.svc.StartDeployment(h.ctx, "exporter", v.ID, "test")
	require.NoError(t, err)
	h.eventually("a task started in ECS on every zone=a instance", func() bool { return len(h.live("exporter")) == 3 })
	for _, in := range zoneA {
		ts := h.live("exporter")[in.ID]
		require.Len(t, ts, 1)
		require.Equal(t, dep.ID.String(), ts[0].StartedBy)
		require.Equal(t, "daemon:exporter", ts[0].Group)
		require.Equal(t, h.taskDef, ts[0].TaskDefinitionARN)
	}
	require.Empty(t, h.live("exporter")[other[0].ID], "zone=b does not match")
	h.converge("exporter", "the deployment complete", func() bool { return h.deployment(dep.ID).State == models.DaemonComplete })
	require.Len(t, h.tasks("exporter")["running"], 3)

	// ECS stops a task (its container died): the reconcile restarts it.
	victim := h.live("exporter")[zoneA[1].ID][0]
	h.ecs.StopTaskWithExit(victim.ARN, 137, "")
	h.converge("exporter", "the dead task replaced", func() bool {
		return h.onePerInstance("exporter", zoneA) && h.live("exporter")[zoneA[1].ID][0].ARN != victim.ARN
	})
	failed := h.tasks("exporter")["failed"]
	require.Len(t, failed, 1)
	require.Equal(t, 137, *failed[0].ExitCode)
	repair := h.deployment(uuid.MustParse(h.live("exporter")[zoneA[1].ID][0].StartedBy))
	require.Equal(t, "health-repair", repair.Type)

	// A new matching instance gets a task.
	joined := h.addInstances(1, map[string]string{"zone": "a"})
	all := append(append([]ecsfake.Instance{}, zoneA...), joined...)
	h.converge("exporter", "the new instance's task", func() bool { return h.onePerInstance("exporter", all) })
	require.Equal(t, "new-instance", h.deployment(uuid.MustParse(h.live("exporter")[joined[0].ID][0].StartedBy)).Type)

	// An instance terminated: it leaves Gantry's view and its task ends.
	h.ecs.TerminateInstance(zoneA[0].ARN)
	h.converge("exporter", "the terminated instance cleaned up", func() bool {
		in, err := models.DaemonInstanceByID(h.ctx, h.srv.DB.Bun, zoneA[0].ID)
		require.NoError(t, err)
		for _, task := range h.tasks("exporter")["running"] {
			if task.InstanceID == zoneA[0].ID {
				return false
			}
		}
		return in.Status == "gone"
	})
	require.True(t, h.onePerInstance("exporter", all[1:]))
	require.Len(t, h.tasks("exporter")["running"], 3)
}

// TestECSDispatchIsIdempotent: dispatching the same starts again (a worker
// killed after StartTask, before its commit; a sweep re-dispatching
// launching tasks) starts nothing twice.
func TestECSDispatchIsIdempotent(t *testing.T) {
	h := setupECS(t)
	instances := h.addInstances(2, nil)
	h.sweep()
	v := h.createECS("exporter")
	// ECS throttles every StartTask: the tasks stay launching, none lost.
	h.ecs.Throttle("StartTask", -1)
	dep, err := h.svc.StartDeployment(h.ctx, "exporter", v.ID, "test")
	require.NoError(t, err)
	h.eventually("two tasks launching", func() bool { return len(h.tasks("exporter")["launching"]) == 2 })
	h.eventually("StartTask tried", func() bool { return len(h.ecs.CallsOf("StartTask")) > 0 })
	h.sweep()
	require.Empty(t, h.live("exporter"), "throttled: nothing started")
	require.Len(t, h.tasks("exporter")["launching"], 2, "throttled: still launching, not failed")
	require.Equal(t, models.DaemonInProgress, h.deployment(dep.ID).State)

	h.ecs.ClearFaults()
	h.sweep() // re-dispatches what is launching
	require.Len(t, h.live("exporter"), 2)
	calls := len(h.ecs.CallsOf("StartTask"))
	launching := h.tasks("exporter")["launching"]
	require.Len(t, launching, 2, "PENDING in ECS: still launching")

	require.NoError(t, h.backend.Dispatch(h.ctx, launching, nil))
	require.NoError(t, h.backend.Dispatch(h.ctx, launching, nil))
	h.sweep()
	require.Equal(t, calls, len(h.ecs.CallsOf("StartTask")), "no StartTask for tasks ECS already has")
	for _, in := range instances {
		require.Len(t, h.live("exporter")[in.ID], 1)
	}
	h.converge("exporter", "the deployment complete", func() bool { return h.deployment(dep.ID).State == models.DaemonComplete })
}

// TestECSRefusedStartFailsTheDeployment: ECS refusing an instance
// (RESOURCE:MEMORY) is that task's failure, with ECS's reason, and the
// user's deployment ends unhealthy; the other instances run.
func TestECSRefusedStartFailsTheDeployment(t *testing.T) {
	h := setupECS(t)
	instances := h.addInstances(3, nil)
	h.ecs.RefuseStarts(instances[2].ARN, "RESOURCE:MEMORY", "")
	h.sweep()
	v := h.createECS("exporter")
	dep, err := h.svc.StartDeployment(h.ctx, "exporter", v.ID, "test")
	require.NoError(t, err)
	h.converge("exporter", "the deployment unhealthy", func() bool { return h.deployment(dep.ID).State == models.DaemonUnhealthy })
	var failed *models.DaemonTask
	for _, task := range h.tasks("exporter")["failed"] {
		if task.DeploymentID == dep.ID {
			failed = &task
		}
	}
	require.NotNil(t, failed)
	require.Equal(t, instances[2].ID, failed.InstanceID)
	require.Contains(t, failed.Reason, "RESOURCE:MEMORY")
	require.Contains(t, h.deployment(dep.ID).Reason, "RESOURCE:MEMORY")
	h.converge("exporter", "the two other instances running", func() bool {
		return len(h.live("exporter")) == 2 && len(h.live("exporter")[instances[2].ID]) == 0
	})
	env, err := h.svc.GetEnvironment(h.ctx, "exporter")
	require.NoError(t, err)
	require.False(t, env.Healthy())
}

// TestECSAgentsCannotJoinAnECSCluster: an ECS cluster's instances come from
// ECS.
func TestECSAgentsCannotJoinAnECSCluster(t *testing.T) {
	h := setupECS(t)
	_, err := h.svc.Register(h.ctx, daemons.Registration{ID: "box-1", Cluster: ecsCluster, Hostname: "box-1"}, "test")
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err))
	require.ErrorContains(t, err, "ecs cluster")
}

// TestECSRolloutReplacesWithoutSurgeAndDeleteStops: a new version replaces
// every task (a new task on an instance only once the old one has stopped
// in ECS), and deleting the environment stops its tasks in ECS.
func TestECSRolloutReplacesWithoutSurgeAndDeleteStops(t *testing.T) {
	h := setupECS(t)
	instances := h.addInstances(4, nil)
	h.sweep()
	v1 := h.createECS("exporter")
	d1, err := h.svc.StartDeployment(h.ctx, "exporter", v1.ID, "test")
	require.NoError(t, err)
	h.converge("exporter", "v1 complete", func() bool { return h.deployment(d1.ID).State == models.DaemonComplete })

	td2 := h.ecs.RegisterTaskDefinition(ecsfake.TaskDefinition{Family: "node-exporter", CPU: 256, Memory: 512})
	require.NotEqual(t, h.taskDef, td2)
	v2, err := h.svc.UpdateEnvironment(h.ctx, "exporter", daemons.Spec{TaskDefinition: daemons.TaskDefinition{Name: td2}}, "api", "test")
	require.NoError(t, err)
	d2, err := h.svc.StartDeployment(h.ctx, "exporter", v2.ID, "test")
	require.NoError(t, err)
	h.converge("exporter", "v2 complete", func() bool {
		for _, ts := range h.live("exporter") {
			require.Len(t, ts, 1, "never two tasks of the environment on an instance")
		}
		return h.deployment(d2.ID).State == models.DaemonComplete
	})
	require.True(t, h.onePerInstance("exporter", instances))
	for _, ts := range h.live("exporter") {
		require.Equal(t, td2, ts[0].TaskDefinitionARN)
		require.Equal(t, d2.ID.String(), ts[0].StartedBy)
	}
	require.Len(t, h.tasks("exporter")["stopped"], 4, "the v1 tasks stopped")

	require.NoError(t, h.svc.DeleteEnvironment(h.ctx, "exporter", "test"))
	h.converge("exporter", "every ECS task stopped", func() bool { return len(h.live("exporter")) == 0 })
	h.eventually("Gantry's tasks stopped", func() bool {
		h.sweep()
		ts := h.tasks("exporter")
		return len(ts["stopping"])+len(ts["running"])+len(ts["launching"]) == 0
	})
}

// TestECSDuplicateIsStopped: a second ECS task of the environment on an
// instance (a StartTask ECS carried out twice) is stopped by the next
// refresh; Gantry's task keeps running.
func TestECSDuplicateIsStopped(t *testing.T) {
	h := setupECS(t)
	instances := h.addInstances(2, nil)
	h.sweep()
	v := h.createECS("exporter")
	dep, err := h.svc.StartDeployment(h.ctx, "exporter", v.ID, "test")
	require.NoError(t, err)
	h.converge("exporter", "the deployment complete", func() bool { return h.deployment(dep.ID).State == models.DaemonComplete })
	original := h.live("exporter")[instances[0].ID][0]
	dup, err := h.backend.Client.StartTask(h.ctx, ecsCluster, instances[0].ARN, h.taskDef, dep.ID.String(), daemons.ECSGroup("exporter"))
	require.NoError(t, err)
	require.Len(t, h.live("exporter")[instances[0].ID], 2)
	h.sweep() // the duplicate still PENDING, the original RUNNING
	require.Len(t, h.live("exporter")[instances[0].ID], 1)
	require.Equal(t, original.ARN, h.live("exporter")[instances[0].ID][0].ARN, "the task Gantry knows is kept")
	require.NotEqual(t, dup.ARN, original.ARN)
	require.True(t, h.onePerInstance("exporter", instances))
	require.Len(t, h.tasks("exporter")["running"], 2)
	require.Empty(t, h.tasks("exporter")["failed"])
}

// TestECSThrottledReadKeepsTheView: a sweep that cannot read the ECS
// cluster (throttled past the client's retries) says so and changes
// nothing; the next one carries on.
func TestECSThrottledReadKeepsTheView(t *testing.T) {
	h := setupECS(t)
	instances := h.addInstances(2, nil)
	h.sweep()
	v := h.createECS("exporter")
	dep, err := h.svc.StartDeployment(h.ctx, "exporter", v.ID, "test")
	require.NoError(t, err)
	h.converge("exporter", "the deployment complete", func() bool { return h.deployment(dep.ID).State == models.DaemonComplete })

	h.ecs.Throttle("ListTasks", -1)
	h.ecs.StopTaskWithExit(h.live("exporter")[instances[0].ID][0].ARN, 1, "")
	err = h.svc.Sweep(h.ctx)
	require.ErrorIs(t, err, ecsdaemon.ErrThrottled)
	require.ErrorContains(t, err, "refreshing cluster fleet")
	ins, err := models.DaemonClusterInstances(h.ctx, h.srv.DB.Bun, ecsCluster)
	require.NoError(t, err)
	require.Len(t, ins, 2, "instances kept")
	require.Len(t, h.tasks("exporter")["running"], 2, "not yet seen dead")

	h.ecs.ClearFaults()
	h.converge("exporter", "the dead task replaced", func() bool {
		return len(h.tasks("exporter")["failed"]) == 1 && h.onePerInstance("exporter", instances)
	})
}

// TestECSBackendFromConfiguration: GANTRY_DAEMONS_ECS_CLUSTERS makes the
// named cluster ECS in the assembled application (with the process's AWS
// credentials); other clusters stay local.
func TestECSBackendFromConfiguration(t *testing.T) {
	fake := ecsfake.New(t, ecsfake.Options{})
	fake.AddCluster(ecsCluster)
	in := fake.AddInstance(ecsCluster, ecsfake.InstanceSpec{Attributes: map[string]string{"zone": "a"}})
	creds, err := fake.Credentials().Retrieve(t.Context())
	require.NoError(t, err)
	t.Setenv("AWS_ACCESS_KEY_ID", creds.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", creds.SecretAccessKey)
	srv := servertest.NewWith(t, servertest.Options{NoWeb: true, Env: []string{
		"GANTRY_DAEMONS_ECS_CLUSTERS=" + ecsCluster, "GANTRY_DAEMONS_ECS_REGION=" + fake.Region(), "GANTRY_DAEMONS_ECS_ENDPOINT=" + fake.URL}})
	svc := srv.Daemons()
	ctx := t.Context()
	require.NoError(t, svc.Sweep(ctx))
	got, err := models.DaemonInstanceByID(ctx, srv.DB.Bun, in.ID)
	require.NoError(t, err)
	require.Equal(t, daemons.BackendECS, got.Backend)
	require.Equal(t, ecsCluster, got.Cluster)
	require.Equal(t, in.EC2InstanceID, got.Hostname)
	require.Equal(t, "a", got.Attributes["zone"])

	_, err = svc.Register(ctx, daemons.Registration{ID: "box-1", Cluster: ecsCluster, Hostname: "box-1"}, "test")
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err))
	_, err = svc.Register(ctx, daemons.Registration{ID: "box-1", Cluster: "web", Hostname: "box-1"}, "test")
	require.NoError(t, err, "another cluster is local")
}
