package daemonplan_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/daemonplan"
)

var (
	versions       = []string{"v1", "v2", "v3"}
	taskStates     = []daemonplan.TaskState{daemonplan.TaskLaunching, daemonplan.TaskRunning, daemonplan.TaskRunning, daemonplan.TaskRunning, daemonplan.TaskStopping, daemonplan.TaskStopped, daemonplan.TaskFailed}
	instanceStates = []daemonplan.InstanceStatus{daemonplan.InstanceActive, daemonplan.InstanceActive, daemonplan.InstanceActive, daemonplan.InstanceActive, daemonplan.InstanceDraining, daemonplan.InstanceGone}
)

// randomInput is a random snapshot: instances with random attributes and
// status, zero to three tasks each in random versions and states (so
// duplicates happen), tasks on unknown instances, crash records.
func randomInput(rng *rand.Rand) daemonplan.Input {
	in := daemonplan.Input{
		Version:           versions[rng.IntN(len(versions))],
		MinHealthyPercent: []int{0, 25, 50, 80, 100, rng.IntN(101)}[rng.IntN(6)],
		Now:               t0.Add(time.Duration(rng.IntN(60)) * time.Second),
		Backoff:           daemonplan.DefaultBackoff,
		Crashes:           map[string]daemonplan.CrashRecord{},
	}
	if rng.IntN(3) == 0 {
		in.Attributes = []string{"role=log"}
	}
	n := rng.IntN(30)
	taskID := 0
	for i := range n {
		id := fmt.Sprintf("i-%02d", i)
		attrs := map[string]string{}
		if rng.IntN(3) > 0 {
			attrs["role"] = []string{"log", "web"}[rng.IntN(2)]
		}
		in.Instances = append(in.Instances, daemonplan.Instance{ID: id, Status: instanceStates[rng.IntN(len(instanceStates))], Attributes: attrs})
		for range []int{0, 1, 1, 1, 2, 3}[rng.IntN(6)] {
			taskID++
			in.Tasks = append(in.Tasks, daemonplan.Task{
				ID: fmt.Sprintf("t%03d", taskID), InstanceID: id, Version: versions[rng.IntN(len(versions))],
				State: taskStates[rng.IntN(len(taskStates))], StartedAt: t0.Add(time.Duration(rng.IntN(5)) * time.Second),
			})
		}
		if rng.IntN(4) == 0 {
			in.Crashes[id] = daemonplan.CrashRecord{Failures: 1 + rng.IntN(5), LastExit: t0.Add(time.Duration(rng.IntN(30)) * time.Second)}
		}
	}
	if rng.IntN(4) == 0 {
		in.Tasks = append(in.Tasks, daemonplan.Task{ID: "t-orphan", InstanceID: "i-unknown", Version: in.Version, State: daemonplan.TaskRunning})
	}
	return in
}

// apply does what the service does with a plan: starts and replacements
// become launching tasks of the desired version, replaced and stopped tasks
// stopping. A start on an instance clears its crash record only when the
// task later runs, so records stay.
func apply(in daemonplan.Input, p daemonplan.Plan, seq *int) daemonplan.Input {
	out := in
	out.Tasks = append([]daemonplan.Task(nil), in.Tasks...)
	setState := func(id string, s daemonplan.TaskState) {
		for i := range out.Tasks {
			if out.Tasks[i].ID == id {
				out.Tasks[i].State = s
			}
		}
	}
	launch := func(instance string) {
		*seq++
		out.Tasks = append(out.Tasks, daemonplan.Task{ID: fmt.Sprintf("n%04d", *seq), InstanceID: instance, Version: in.Version, State: daemonplan.TaskLaunching, StartedAt: in.Now})
	}
	for _, s := range p.Start {
		launch(s.InstanceID)
	}
	for _, r := range p.Replace {
		setState(r.TaskID, daemonplan.TaskStopping)
		launch(r.InstanceID)
	}
	for _, s := range p.Stop {
		setState(s.TaskID, daemonplan.TaskStopping)
	}
	return out
}

// settle is the cluster catching up: launching tasks run, stopping ones stop.
func settle(in daemonplan.Input) daemonplan.Input {
	out := in
	out.Tasks = append([]daemonplan.Task(nil), in.Tasks...)
	for i := range out.Tasks {
		switch out.Tasks[i].State {
		case daemonplan.TaskLaunching:
			out.Tasks[i].State = daemonplan.TaskRunning
		case daemonplan.TaskStopping:
			out.Tasks[i].State = daemonplan.TaskStopped
		}
	}
	return out
}

func checkInvariants(t *testing.T, in daemonplan.Input, p daemonplan.Plan, seq *int) {
	t.Helper()
	matching := map[string]bool{}
	for _, i := range in.Instances {
		if daemonplan.Matches(i, in.Attributes) {
			matching[i.ID] = true
		}
	}
	require.Equal(t, len(matching), p.Matching)

	// Every matching instance is in exactly one bucket.
	seen := map[string]string{}
	note := func(id, bucket string) {
		require.True(t, matching[id], "%s in %s is not a matching instance", id, bucket)
		require.Empty(t, seen[id], "%s in both %s and %s", id, seen[id], bucket)
		seen[id] = bucket
	}
	for _, s := range p.Start {
		note(s.InstanceID, "start")
	}
	for _, r := range p.Replace {
		note(r.InstanceID, "replace")
	}
	for _, w := range p.Waiting {
		note(w.InstanceID, "waiting")
	}
	for _, b := range p.Backoff {
		note(b.InstanceID, "backoff")
		require.True(t, in.Now.Before(b.Until))
	}
	for _, id := range p.Leave {
		note(id, "leave")
	}
	require.Len(t, seen, len(matching))

	// After applying: at most one task per instance that is not on its way
	// out, and none on an instance that does not match.
	after := apply(in, p, seq)
	occupying := map[string]int{}
	for _, tk := range after.Tasks {
		if tk.State == daemonplan.TaskLaunching || tk.State == daemonplan.TaskRunning {
			occupying[tk.InstanceID]++
			require.True(t, matching[tk.InstanceID], "task %s kept on non-matching %s", tk.ID, tk.InstanceID)
		}
	}
	for id, n := range occupying {
		require.Equal(t, 1, n, "instance %s has %d tasks", id, n)
	}

	// The budget: running replacements leave Matching − AllowedDown running
	// tasks, except the single step taken when nothing else is under way.
	required := p.Matching - p.AllowedDown
	runningReplaced := 0
	for _, r := range p.Replace {
		if r.Running {
			runningReplaced++
		}
	}
	forced := p.InFlight == 0 && len(p.Start) == 0
	if runningReplaced > 0 && p.Healthy-runningReplaced < required {
		require.True(t, forced && runningReplaced == 1, "over budget: healthy %d, replaced %d, required %d", p.Healthy, runningReplaced, required)
	}
	// At least one per batch: never a deadlock.
	if forced && len(p.Waiting)+runningReplaced > 0 {
		require.Positive(t, runningReplaced, "waiting with nothing under way")
	}

	// Idempotence: planning again over the applied plan does nothing.
	again := daemonplan.Make(after)
	require.True(t, again.Empty(), "second plan not empty: %+v", summarize(again))
}

func TestMakeProperties(t *testing.T) {
	t.Parallel()
	for seed := range uint64(3000) {
		rng := rand.New(rand.NewPCG(seed, 13))
		in := randomInput(rng)
		seq := 0
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := daemonplan.Make(in)
			checkInvariants(t, in, p, &seq)
			require.Equal(t, p, daemonplan.Make(in), "not deterministic")
		})
	}
}

// TestMakeConverges: with the cluster carrying out each plan, every rollout
// ends with the desired version on every matching instance, within as many
// rounds as a one-at-a-time rollout needs.
func TestMakeConverges(t *testing.T) {
	t.Parallel()
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 7))
		in := randomInput(rng)
		in.Crashes = nil // a crash loop never converges by design
		seq := 0
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			for round := 0; ; round++ {
				p := daemonplan.Make(in)
				checkInvariants(t, in, p, &seq)
				if p.Converged() {
					break
				}
				require.LessOrEqual(t, round, len(in.Instances)+2, "no convergence")
				in = settle(apply(in, p, &seq))
			}
		})
	}
}
