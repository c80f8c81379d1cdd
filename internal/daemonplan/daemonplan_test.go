package daemonplan_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/daemonplan"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func inst(id string, attrs ...string) daemonplan.Instance {
	m := map[string]string{}
	for i := 0; i+1 < len(attrs); i += 2 {
		m[attrs[i]] = attrs[i+1]
	}
	return daemonplan.Instance{ID: id, Status: daemonplan.InstanceActive, Attributes: m}
}

func task(id, instance, version string, state daemonplan.TaskState) daemonplan.Task {
	return daemonplan.Task{ID: id, InstanceID: instance, Version: version, State: state, StartedAt: t0}
}

// summary words a plan compactly so table cases read as a diff.
type summary struct {
	Start   []string // instance:reason
	Replace []string // instance:task
	Stop    []string // task:reason
	Waiting []string // task
	Backoff []string // instance
	Leave   []string // instance
}

func summarize(p daemonplan.Plan) summary {
	var s summary
	for _, a := range p.Start {
		s.Start = append(s.Start, a.InstanceID+":"+string(a.Reason))
	}
	for _, a := range p.Replace {
		s.Replace = append(s.Replace, a.InstanceID+":"+a.TaskID)
	}
	for _, a := range p.Stop {
		s.Stop = append(s.Stop, a.TaskID+":"+string(a.Reason))
	}
	for _, a := range p.Waiting {
		s.Waiting = append(s.Waiting, a.TaskID)
	}
	for _, a := range p.Backoff {
		s.Backoff = append(s.Backoff, a.InstanceID)
	}
	s.Leave = p.Leave
	return s
}

func TestMake(t *testing.T) {
	t.Parallel()
	const v1, v2 = "v1", "v2"
	running := daemonplan.TaskRunning
	cases := []struct {
		name string
		in   daemonplan.Input
		want summary
	}{
		{
			name: "first deployment starts one task on every instance of the cluster",
			in: daemonplan.Input{Version: v1, MinHealthyPercent: 50,
				Instances: []daemonplan.Instance{inst("i-b"), inst("i-a"), inst("i-c")}},
			want: summary{Start: []string{"i-a:new", "i-b:new", "i-c:new"}},
		},
		{
			name: "an attribute filter selects the instances (name and name=value)",
			in: daemonplan.Input{Version: v1, Attributes: []string{"role=log", "ssd"},
				Instances: []daemonplan.Instance{inst("i-a", "role", "log", "ssd", "1"), inst("i-b", "role", "log"), inst("i-c", "role", "web", "ssd", "1")}},
			want: summary{Start: []string{"i-a:new"}},
		},
		{
			name: "a filter that matches nothing plans nothing",
			in: daemonplan.Input{Version: v1, Attributes: []string{"gpu"},
				Instances: []daemonplan.Instance{inst("i-a"), inst("i-b")}},
			want: summary{},
		},
		{
			name: "a new instance joining gets a task, the others are left",
			in: daemonplan.Input{Version: v1,
				Instances: []daemonplan.Instance{inst("i-a"), inst("i-b")},
				Tasks:     []daemonplan.Task{task("t1", "i-a", v1, running)}},
			want: summary{Start: []string{"i-b:new"}, Leave: []string{"i-a"}},
		},
		{
			name: "a dead task is restarted on its instance",
			in: daemonplan.Input{Version: v1, Now: t0.Add(time.Minute), Backoff: daemonplan.DefaultBackoff,
				Instances: []daemonplan.Instance{inst("i-a")},
				Tasks:     []daemonplan.Task{task("t1", "i-a", v1, daemonplan.TaskFailed)},
				Crashes:   map[string]daemonplan.CrashRecord{"i-a": {Failures: 1, LastExit: t0}}},
			want: summary{Start: []string{"i-a:repair"}},
		},
		{
			name: "a task that keeps dying waits out the crash-loop backoff",
			in: daemonplan.Input{Version: v1, Now: t0.Add(9 * time.Second), Backoff: daemonplan.DefaultBackoff,
				Instances: []daemonplan.Instance{inst("i-a")},
				Crashes:   map[string]daemonplan.CrashRecord{"i-a": {Failures: 3, LastExit: t0}}},
			want: summary{Backoff: []string{"i-a"}},
		},
		{
			name: "after the backoff the task is restarted",
			in: daemonplan.Input{Version: v1, Now: t0.Add(10 * time.Second), Backoff: daemonplan.DefaultBackoff,
				Instances: []daemonplan.Instance{inst("i-a")},
				Crashes:   map[string]daemonplan.CrashRecord{"i-a": {Failures: 3, LastExit: t0}}},
			want: summary{Start: []string{"i-a:repair"}},
		},
		{
			name: "tasks on an instance that left the cluster are cleaned up",
			in: daemonplan.Input{Version: v1,
				Instances: []daemonplan.Instance{inst("i-a"), {ID: "i-b", Status: daemonplan.InstanceGone}},
				Tasks:     []daemonplan.Task{task("t1", "i-a", v1, running), task("t2", "i-b", v1, running), task("t3", "i-x", v1, running)}},
			want: summary{Stop: []string{"t2:not-matching", "t3:not-matching"}, Leave: []string{"i-a"}},
		},
		{
			name: "an instance that no longer matches the attributes loses its task",
			in: daemonplan.Input{Version: v1, Attributes: []string{"role=log"},
				Instances: []daemonplan.Instance{inst("i-a", "role", "web")},
				Tasks:     []daemonplan.Task{task("t1", "i-a", v1, running)}},
			want: summary{Stop: []string{"t1:not-matching"}},
		},
		{
			name: "two live tasks on one instance: the desired running one stays",
			in: daemonplan.Input{Version: v2,
				Instances: []daemonplan.Instance{inst("i-a")},
				Tasks:     []daemonplan.Task{task("t1", "i-a", v1, running), task("t2", "i-a", v2, running)}},
			want: summary{Stop: []string{"t1:duplicate"}, Leave: []string{"i-a"}},
		},
		{
			name: "an update at 50 % replaces half of the instances per batch",
			in: daemonplan.Input{Version: v2, MinHealthyPercent: 50,
				Instances: []daemonplan.Instance{inst("i-1"), inst("i-2"), inst("i-3"), inst("i-4")},
				Tasks: []daemonplan.Task{task("t1", "i-1", v1, running), task("t2", "i-2", v1, running),
					task("t3", "i-3", v1, running), task("t4", "i-4", v1, running)}},
			want: summary{Replace: []string{"i-1:t1", "i-2:t2"}, Waiting: []string{"t3", "t4"}},
		},
		{
			name: "the next batch waits while the first one is launching",
			in: daemonplan.Input{Version: v2, MinHealthyPercent: 50,
				Instances: []daemonplan.Instance{inst("i-1"), inst("i-2"), inst("i-3"), inst("i-4")},
				Tasks: []daemonplan.Task{task("t1", "i-1", v1, daemonplan.TaskStopping), task("t5", "i-1", v2, daemonplan.TaskLaunching),
					task("t2", "i-2", v1, daemonplan.TaskStopping), task("t6", "i-2", v2, daemonplan.TaskLaunching),
					task("t3", "i-3", v1, running), task("t4", "i-4", v1, running)}},
			want: summary{Waiting: []string{"t3", "t4"}, Leave: []string{"i-1", "i-2"}},
		},
		{
			name: "once the first batch runs, the second goes",
			in: daemonplan.Input{Version: v2, MinHealthyPercent: 50,
				Instances: []daemonplan.Instance{inst("i-1"), inst("i-2"), inst("i-3"), inst("i-4")},
				Tasks: []daemonplan.Task{task("t5", "i-1", v2, running), task("t6", "i-2", v2, running),
					task("t3", "i-3", v1, running), task("t4", "i-4", v1, running)}},
			want: summary{Replace: []string{"i-3:t3", "i-4:t4"}, Leave: []string{"i-1", "i-2"}},
		},
		{
			name: "at 100 % min-healthy one instance moves at a time",
			in: daemonplan.Input{Version: v2, MinHealthyPercent: 100,
				Instances: []daemonplan.Instance{inst("i-1"), inst("i-2"), inst("i-3")},
				Tasks:     []daemonplan.Task{task("t1", "i-1", v1, running), task("t2", "i-2", v1, running), task("t3", "i-3", v1, running)}},
			want: summary{Replace: []string{"i-1:t1"}, Waiting: []string{"t2", "t3"}},
		},
		{
			name: "failed and missing tasks are started outside the budget",
			in: daemonplan.Input{Version: v2, MinHealthyPercent: 50, Now: t0,
				Instances: []daemonplan.Instance{inst("i-1"), inst("i-2"), inst("i-3"), inst("i-4")},
				Tasks: []daemonplan.Task{task("t1", "i-1", v1, daemonplan.TaskFailed),
					task("t3", "i-3", v1, running), task("t4", "i-4", v1, running)},
				Crashes: map[string]daemonplan.CrashRecord{"i-1": {Failures: 1, LastExit: t0}}},
			// 4 matching, 2 must stay running and only 2 run: the starts go
			// now, the replacements wait for them.
			want: summary{Start: []string{"i-1:repair", "i-2:new"}, Waiting: []string{"t3", "t4"}},
		},
		{
			name: "with instances crash-looping, the rollout still moves one at a time",
			in: daemonplan.Input{Version: v2, MinHealthyPercent: 50, Now: t0, Backoff: daemonplan.DefaultBackoff,
				Instances: []daemonplan.Instance{inst("i-1"), inst("i-2"), inst("i-3"), inst("i-4")},
				Tasks:     []daemonplan.Task{task("t3", "i-3", v1, running), task("t4", "i-4", v1, running)},
				Crashes:   map[string]daemonplan.CrashRecord{"i-1": {Failures: 4, LastExit: t0}, "i-2": {Failures: 4, LastExit: t0}}},
			want: summary{Replace: []string{"i-3:t3"}, Waiting: []string{"t4"}, Backoff: []string{"i-1", "i-2"}},
		},
		{
			name: "a launching task of the old version is replaced at once",
			in: daemonplan.Input{Version: v2, MinHealthyPercent: 100,
				Instances: []daemonplan.Instance{inst("i-1"), inst("i-2")},
				Tasks:     []daemonplan.Task{task("t1", "i-1", v1, daemonplan.TaskLaunching), task("t2", "i-2", v1, running)}},
			want: summary{Replace: []string{"i-1:t1"}, Waiting: []string{"t2"}},
		},
		{
			name: "a draining instance's task is stopped and nothing started there",
			in: daemonplan.Input{Version: v1,
				Instances: []daemonplan.Instance{{ID: "i-a", Status: daemonplan.InstanceDraining}},
				Tasks:     []daemonplan.Task{task("t1", "i-a", v1, running)}},
			want: summary{Stop: []string{"t1:not-matching"}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, summarize(daemonplan.Make(c.in)))
		})
	}
}

func TestAllowedDown(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ n, pct, want int }{
		{0, 50, 0}, {1, 50, 0}, {2, 50, 1}, {3, 50, 1}, {10, 50, 5}, {10, 0, 10}, {10, 100, 0}, {7, 80, 1},
	} {
		require.Equal(t, c.want, daemonplan.AllowedDown(c.n, c.pct), fmt.Sprintf("n=%d pct=%d", c.n, c.pct))
	}
}

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	b := daemonplan.Backoff{Base: 5 * time.Second, Max: time.Minute}
	got := []time.Duration{}
	for f := 0; f <= 7; f++ {
		got = append(got, b.Delay(f))
	}
	s := time.Second
	require.Equal(t, []time.Duration{0, 0, 5 * s, 10 * s, 20 * s, 40 * s, 60 * s, 60 * s}, got)
}
