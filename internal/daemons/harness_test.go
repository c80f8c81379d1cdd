package daemons_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/daemons"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// harness is a Gantry with workers and the daemons service tuned for tests
// (short steps), and a simulated cluster: instances registered as agents
// would, task starts and exits reported as agents would.
type harness struct {
	t   *testing.T
	ctx context.Context
	srv *servertest.Server
	svc *daemons.Service
}

func setup(t *testing.T) *harness {
	t.Helper()
	srv := servertest.Services(t)
	svc := srv.Daemons()
	svc.StepInterval = 100 * time.Millisecond
	srv.StartWorkers(t)
	return &harness{t: t, ctx: context.Background(), srv: srv, svc: svc}
}

func (h *harness) register(id, cluster string, attrs ...string) {
	h.t.Helper()
	m := map[string]string{}
	for i := 0; i+1 < len(attrs); i += 2 {
		m[attrs[i]] = attrs[i+1]
	}
	_, err := h.svc.Register(h.ctx, daemons.Registration{ID: id, Cluster: cluster, Hostname: id, Attributes: m}, "test")
	require.NoError(h.t, err)
}

func intp(i int) *int { return &i }

func (h *harness) create(name, task, cluster string, minHealthy int, attrs ...string) *models.DaemonVersion {
	h.t.Helper()
	_, v, err := h.svc.CreateEnvironment(h.ctx, name, daemons.Spec{
		TaskDefinition: daemons.TaskDefinition{Name: task, Command: []string{"/bin/sleep", "1000"}},
		InstanceGroup:  daemons.InstanceGroup{Cluster: cluster, Attributes: attrs}, MinHealthyPercent: intp(minHealthy),
	}, "api", "test")
	require.NoError(h.t, err)
	return v
}

func (h *harness) env(name string) *models.DaemonEnvironment {
	h.t.Helper()
	e, err := models.DaemonEnvironmentByName(h.ctx, h.srv.DB.Bun, name)
	require.NoError(h.t, err)
	return e
}

// tasks are the environment's tasks by state.
func (h *harness) tasks(name string) map[string][]models.DaemonTask {
	h.t.Helper()
	var ts []models.DaemonTask
	// The environment of that name created last, deleted or not.
	var envID int64
	require.NoError(h.t, h.srv.DB.Bun.NewSelect().Model((*models.DaemonEnvironment)(nil)).Column("id").Where("name = ?", name).
		OrderExpr("id DESC").Limit(1).Scan(h.ctx, &envID))
	require.NoError(h.t, h.srv.DB.Bun.NewSelect().Model(&ts).Where("environment_id = ?", envID).OrderExpr("created_at").Scan(h.ctx))
	out := map[string][]models.DaemonTask{}
	for _, t := range ts {
		out[t.State] = append(out[t.State], t)
	}
	return out
}

// agentsAct is every agent doing its job once: launching tasks report
// running, stopping ones report their exit.
func (h *harness) agentsAct(name string) (started, stopped int) {
	h.t.Helper()
	ts := h.tasks(name)
	for _, t := range ts["launching"] {
		require.NoError(h.t, h.svc.ReportTask(h.ctx, t.InstanceID, t.ID, daemons.Report{State: "running", PID: intp(100)}, "agent"))
		started++
	}
	for _, t := range ts["stopping"] {
		require.NoError(h.t, h.svc.ReportTask(h.ctx, t.InstanceID, t.ID, daemons.Report{State: "exited", ExitCode: intp(0)}, "agent"))
		stopped++
	}
	return started, stopped
}

func (h *harness) deployment(id uuid.UUID) *models.DaemonDeployment {
	h.t.Helper()
	d, err := models.DaemonDeploymentByID(h.ctx, h.srv.DB.Bun, id)
	require.NoError(h.t, err)
	return d
}

// eventually polls cond with a generous deadline (the machine is shared).
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (h *harness) waitState(id uuid.UUID, state string) *models.DaemonDeployment {
	h.t.Helper()
	var d *models.DaemonDeployment
	h.eventually(fmt.Sprintf("deployment %s %s", id, state), func() bool {
		d = h.deployment(id)
		return d.State == state
	})
	return d
}

func slicesSort(s []string) { slices.Sort(s) }
