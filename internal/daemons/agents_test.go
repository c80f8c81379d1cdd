package daemons_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/client"
	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/daemons"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// The local backend end to end: a real Gantry (web and workers) and real
// `gantry agent` processes running real task processes on this machine.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// gantryBinary builds cmd/gantry once per test binary.
func gantryBinary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gantry-daemons-test-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "gantry")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/gantryhq/gantry/cmd/gantry").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(tb, buildErr)
	return binPath
}

// cluster is a Gantry with agents.
type cluster struct {
	h      *harness
	bin    string
	token  string // an agent token
	pidDir string
	agents map[string]*agentProc
}

type agentProc struct {
	cmd *exec.Cmd
	out *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startCluster(tb testing.TB) *cluster {
	tb.Helper()
	srv := servertest.New(tb)
	svc := srv.Daemons()
	svc.StepInterval = 200 * time.Millisecond
	svc.HeartbeatInterval = time.Second
	svc.Backend.(*daemons.LocalBackend).TTL = 4 * time.Second
	srv.StartWorkers(tb)
	ctx := context.Background()
	u, err := access.CreateUser(ctx, srv.DB.Bun, access.NewUser{Email: "agents@example.com", Role: string(models.RoleOperator), Password: "a-long-enough-password"}, "test")
	require.NoError(tb, err)
	token, _, err := access.CreateToken(ctx, srv.DB.Bun, u, access.NewToken{Name: "agents", Scopes: []string{auth.ScopeAgent}}, "test")
	require.NoError(tb, err)
	c := &cluster{h: &harness{ctx: ctx, srv: srv, svc: svc}, bin: gantryBinary(tb), token: token, pidDir: tb.TempDir(), agents: map[string]*agentProc{}}
	if t, ok := tb.(*testing.T); ok {
		c.h.t = t
	}
	tb.Cleanup(func() {
		for _, a := range c.agents {
			_ = a.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, a := range c.agents {
			done := make(chan struct{})
			go func() { _ = a.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = a.cmd.Process.Kill()
			}
		}
	})
	return c
}

// agent starts `gantry agent` as instance id.
func (c *cluster) agent(tb testing.TB, id string, attrs ...string) {
	tb.Helper()
	args := []string{"agent", "--cluster", "web", "--id", id, "--server", c.h.srv.URL, "--poll", "2s"}
	for _, a := range attrs {
		args = append(args, "--attr", a)
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Env = []string{"GANTRY_TOKEN=" + c.token, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(tb, cmd.Start())
	c.agents[id] = &agentProc{cmd: cmd, out: out}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("agent %s said:\n%s", id, out.String())
		}
	})
}

// stopAgent ends an agent as an operator would (SIGTERM) and waits for it.
func (c *cluster) stopAgent(tb testing.TB, id string) {
	tb.Helper()
	a := c.agents[id]
	require.NoError(tb, a.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(tb, a.cmd.Wait(), a.out.String())
	delete(c.agents, id)
}

// taskCommand writes its pid where the test finds it, then runs as sleep.
func (c *cluster) taskCommand(seconds int) []string {
	return []string{"/bin/sh", "-c", fmt.Sprintf(`echo $$ > "%s/$GANTRY_DAEMON_TASK_ID"; exec sleep %d`, c.pidDir, seconds)}
}

// pid is a task's process, once it has written its pid file.
func (c *cluster) pid(taskID string) int {
	raw, err := os.ReadFile(filepath.Join(c.pidDir, taskID))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	return pid
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	// A zombie still answers signal 0: read its state.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat))
	return len(fields) > 2 && fields[2] != "Z"
}

func (c *cluster) activeInstances() []string {
	ins, err := models.DaemonClusterInstances(c.h.ctx, c.h.srv.DB.Bun, "web")
	require.NoError(c.h.t, err)
	var ids []string
	for _, in := range ins {
		if in.Status == "active" {
			ids = append(ids, in.ID)
		}
	}
	return ids
}

// runningOn is the environment's running task on each instance whose
// process is alive.
func (c *cluster) runningOn(env string) map[string]models.DaemonTask {
	out := map[string]models.DaemonTask{}
	for _, t := range c.h.tasks(env)["running"] {
		if alive(c.pid(t.ID.String())) {
			out[t.InstanceID] = t
		}
	}
	return out
}

func TestAgentsEndToEnd(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	h := c.h
	h.t = t
	for _, id := range []string{"a-1", "a-2", "a-3"} {
		c.agent(t, id, "role=web")
	}
	h.eventually("three agents registered", func() bool { return len(c.activeInstances()) == 3 })

	_, v1, err := h.svc.CreateEnvironment(h.ctx, "logs", daemons.Spec{
		TaskDefinition: daemons.TaskDefinition{Name: "logger", Command: c.taskCommand(1000)},
		InstanceGroup:  daemons.InstanceGroup{Cluster: "web", Attributes: []string{"role=web"}}, MinHealthyPercent: intp(50),
	}, "api", "test")
	require.NoError(t, err)
	d1, err := h.svc.StartDeployment(h.ctx, "logs", v1.ID, "test")
	require.NoError(t, err)
	h.waitState(d1.ID, models.DaemonComplete)
	h.eventually("a process on every instance", func() bool { return len(c.runningOn("logs")) == 3 })

	step(t, "a killed task is restarted", func() {
		victim := c.runningOn("logs")["a-2"]
		require.NoError(t, syscall.Kill(c.pid(victim.ID.String()), syscall.SIGKILL))
		h.eventually("restarted on a-2", func() bool {
			now, ok := c.runningOn("logs")["a-2"]
			return ok && now.ID != victim.ID
		})
		dead, err := models.LockDaemonTask(h.ctx, h.srv.DB.Bun, victim.ID)
		require.NoError(t, err)
		require.Equal(t, "failed", dead.State)
		require.Equal(t, "signal: killed", dead.Reason)
	})

	step(t, "a fourth agent gets a task", func() {
		c.agent(t, "a-4", "role=web")
		h.eventually("task on a-4", func() bool { _, ok := c.runningOn("logs")["a-4"]; return ok })
		c.agent(t, "a-db", "role=db")
		h.eventually("a-db registered", func() bool { return slices.Contains(c.activeInstances(), "a-db") })
		require.NoError(t, h.svc.ReconcileEnvironment(h.ctx, h.env("logs").ID))
		_, ok := c.runningOn("logs")["a-db"]
		require.False(t, ok, "an instance outside the group gets nothing")
	})

	step(t, "a stopped agent's task is cleaned up", func() {
		task := c.runningOn("logs")["a-4"]
		pid := c.pid(task.ID.String())
		c.stopAgent(t, "a-4")
		require.False(t, alive(pid), "the agent stopped its task")
		in, err := models.DaemonInstanceByID(h.ctx, h.srv.DB.Bun, "a-4")
		require.NoError(t, err)
		require.Equal(t, "gone", in.Status)
		got, err := models.LockDaemonTask(h.ctx, h.srv.DB.Bun, task.ID)
		require.NoError(t, err)
		require.Equal(t, "stopped", got.State)
		require.Len(t, c.runningOn("logs"), 3)
	})

	step(t, "an update at 50 % goes in batches", func() {
		v2, err := h.svc.UpdateEnvironment(h.ctx, "logs", daemons.Spec{TaskDefinition: daemons.TaskDefinition{Name: "logger", Command: c.taskCommand(2000)}}, "api", "test")
		require.NoError(t, err)
		d2, err := h.svc.StartDeployment(h.ctx, "logs", v2.ID, "test")
		require.NoError(t, err)
		// Never more than one of the three instances without a running task.
		maxDown := 0
		h.eventually("update complete", func() bool {
			maxDown = max(maxDown, 3-len(c.runningOn("logs")))
			return h.deployment(d2.ID).State == models.DaemonComplete
		})
		require.LessOrEqual(t, maxDown, 1)
		require.Equal(t, 3, h.deployment(d2.ID).Batches, "3 instances at 50 %: one at a time")
		h.eventually("all on v2", func() bool {
			on := c.runningOn("logs")
			for _, tk := range on {
				if tk.VersionID != v2.ID {
					return false
				}
			}
			return len(on) == 3
		})
	})

	step(t, "stop, delete refused while in progress, rollback", func() {
		// An instance whose agent vanished: its task never reports, so the
		// deployment stays in progress.
		_, err := h.svc.Register(h.ctx, daemons.Registration{ID: "ghost", Cluster: "web", Attributes: map[string]string{"role": "web"}}, "test")
		require.NoError(t, err)
		d3, err := h.svc.RollbackDeployment(h.ctx, "logs", nil, "test")
		require.NoError(t, err)
		h.waitState(d3.ID, models.DaemonInProgress)
		err = h.svc.DeleteEnvironment(h.ctx, "logs", "test")
		require.Equal(t, "conflict", appErr(t, err).Code)

		_, err = h.svc.StopDeployment(h.ctx, "logs", "test")
		require.NoError(t, err)
		require.Equal(t, models.DaemonStopped, h.deployment(d3.ID).State)
		require.False(t, h.env("logs").Active)

		// The ghost misses its heartbeat TTL: the sweep takes it out.
		h.eventually("ghost gone", func() bool {
			require.NoError(t, h.svc.Sweep(h.ctx))
			in, err := models.DaemonInstanceByID(h.ctx, h.srv.DB.Bun, "ghost")
			require.NoError(t, err)
			return in.Status == "gone"
		})
		require.ElementsMatch(t, []string{"a-1", "a-2", "a-3", "a-db"}, c.activeInstances(), "live agents keep their heartbeat")

		d4, err := h.svc.RollbackDeployment(h.ctx, "logs", &v1.ID, "test")
		require.NoError(t, err)
		h.waitState(d4.ID, models.DaemonComplete)
		h.eventually("all on v1", func() bool {
			on := c.runningOn("logs")
			for _, tk := range on {
				if tk.VersionID != v1.ID {
					return false
				}
			}
			return len(on) == 3
		})
	})

	step(t, "a command that does not exist fails the deployment with its reason", func() {
		v, err := h.svc.UpdateEnvironment(h.ctx, "logs", daemons.Spec{TaskDefinition: daemons.TaskDefinition{Name: "logger", Command: []string{"/nonexistent/logger"}}}, "api", "test")
		require.NoError(t, err)
		d, err := h.svc.StartDeployment(h.ctx, "logs", v.ID, "test")
		require.NoError(t, err)
		d = h.waitState(d.ID, models.DaemonUnhealthy)
		require.Contains(t, d.Reason, "/nonexistent/logger")
		env, err := h.svc.GetEnvironment(h.ctx, "logs")
		require.NoError(t, err)
		require.False(t, env.Healthy())
	})

	step(t, "delete stops every task", func() {
		pids := []int{}
		for _, tk := range c.runningOn("logs") {
			pids = append(pids, c.pid(tk.ID.String()))
		}
		require.NotEmpty(t, pids)
		require.NoError(t, h.svc.DeleteEnvironment(h.ctx, "logs", "test"))
		h.eventually("processes gone", func() bool {
			for _, p := range pids {
				if alive(p) {
					return false
				}
			}
			return true
		})
	})
}

// step runs one part of a long scenario, naming it in the output; a
// failure ends the whole test (later parts build on earlier ones).
func step(t *testing.T, name string, f func()) {
	t.Helper()
	t.Logf("step: %s", name)
	f()
}

// BenchmarkTaskRestart measures, with three real agents, how long a killed
// task takes to run again (its replacement reported running), against the
// floor of one heartbeat round trip (an agent's poll answered at once),
// measured in the same run. Reported: restart_p50_ms, restart_p90_ms,
// heartbeat_p50_ms and their ratio.
func BenchmarkTaskRestart(b *testing.B) {
	c := startCluster(b)
	h := c.h
	h.t = &testing.T{}
	c.h.svc.CrashReset = 200 * time.Millisecond // each kill is a fresh failure, not a crash loop
	for _, id := range []string{"b-1", "b-2", "b-3"} {
		c.agent(b, id)
	}
	wait := func(what string, cond func() bool) {
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				b.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait("agents", func() bool {
		ins, _ := models.DaemonClusterInstances(h.ctx, h.srv.DB.Bun, "web")
		return len(ins) == 3
	})
	_, v1, err := h.svc.CreateEnvironment(h.ctx, "bench", daemons.Spec{TaskDefinition: daemons.TaskDefinition{Name: "bench", Command: c.taskCommand(1000)},
		InstanceGroup: daemons.InstanceGroup{Cluster: "web"}}, "api", "test")
	require.NoError(b, err)
	_, err = h.svc.StartDeployment(h.ctx, "bench", v1.ID, "test")
	require.NoError(b, err)
	running := func() map[string]models.DaemonTask {
		var ts []models.DaemonTask
		require.NoError(b, h.srv.DB.Bun.NewSelect().Model(&ts).Where("state = 'running'").Scan(h.ctx))
		out := map[string]models.DaemonTask{}
		for _, t := range ts {
			out[t.InstanceID] = t
		}
		return out
	}
	wait("3 running", func() bool { return len(running()) == 3 && c.pid(running()["b-1"].ID.String()) > 0 })

	api := client.New(h.srv.URL, client.WithToken(c.token))
	var restarts, beats []time.Duration
	b.ResetTimer()
	for i := range b.N {
		instance := []string{"b-1", "b-2", "b-3"}[i%3]
		victim := running()[instance]
		var pid int
		wait("pid", func() bool { pid = c.pid(victim.ID.String()); return pid > 0 })
		time.Sleep(300 * time.Millisecond) // past CrashReset: a fresh failure
		began := time.Now()
		require.NoError(b, syscall.Kill(pid, syscall.SIGKILL))
		wait("restart", func() bool { t, ok := running()[instance]; return ok && t.ID != victim.ID })
		restarts = append(restarts, time.Since(began))

		began = time.Now()
		_, err := api.PollAgent(h.ctx, "b-1", "", 0)
		require.NoError(b, err)
		beats = append(beats, time.Since(began))
	}
	b.StopTimer()
	slices.Sort(restarts)
	slices.Sort(beats)
	p := func(ds []time.Duration, q float64) float64 {
		return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(p(restarts, .5), "restart_p50_ms")
	b.ReportMetric(p(restarts, .9), "restart_p90_ms")
	b.ReportMetric(p(beats, .5), "heartbeat_p50_ms")
	b.ReportMetric(p(restarts, .5)/p(beats, .5), "restart/heartbeat")
}
