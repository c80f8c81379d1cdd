package daemonplan_test

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/gantryhq/gantry/internal/daemonplan"
)

// rolloutSnapshot is 10,000 matching instances mid-rollout: a tenth on the
// new version, most on the old one, some without a task, some crashed.
func rolloutSnapshot() daemonplan.Input {
	const n = 10_000
	in := daemonplan.Input{Version: "v2", MinHealthyPercent: 80, Attributes: []string{"role=log"},
		Backoff: daemonplan.DefaultBackoff, Now: t0, Crashes: map[string]daemonplan.CrashRecord{}}
	for i := range n {
		id := fmt.Sprintf("i-%05d", (i*7919)%n) // not in ID order
		in.Instances = append(in.Instances, daemonplan.Instance{ID: id, Status: daemonplan.InstanceActive,
			Attributes: map[string]string{"role": "log", "zone": "a"}})
		switch {
		case i%10 == 0:
			in.Tasks = append(in.Tasks, task("t-"+id, id, "v2", daemonplan.TaskRunning))
		case i%97 == 0:
			in.Crashes[id] = daemonplan.CrashRecord{Failures: 2, LastExit: t0}
		case i%89 == 0:
		default:
			in.Tasks = append(in.Tasks, task("t-"+id, id, "v1", daemonplan.TaskRunning))
		}
	}
	return in
}

// BenchmarkMake is the planner over 10,000 instances.
func BenchmarkMake(b *testing.B) {
	in := rolloutSnapshot()
	b.ResetTimer()
	for b.Loop() {
		daemonplan.Make(in)
	}
}

// BenchmarkSnapshotFloor is the floor the planner is compared with: one pass
// that only copies and sorts the same snapshot's instances and tasks by ID
// and groups the tasks by instance, as any planner must.
func BenchmarkSnapshotFloor(b *testing.B) {
	in := rolloutSnapshot()
	b.ResetTimer()
	for b.Loop() {
		instances := slices.Clone(in.Instances)
		slices.SortFunc(instances, func(a, b daemonplan.Instance) int { return cmp.Compare(a.ID, b.ID) })
		byInstance := make(map[string][]daemonplan.Task, len(instances))
		for _, t := range in.Tasks {
			byInstance[t.InstanceID] = append(byInstance[t.InstanceID], t)
		}
		if len(byInstance) == 0 {
			b.Fatal("empty snapshot")
		}
	}
}
