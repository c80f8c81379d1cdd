// Package daemonplan decides, for one daemon environment, what to do on each
// instance of its cluster: start a task, replace one, stop one, or leave it.
// It is pure (no database, no clock, no I/O), in the style of Nomad's
// per-node diff: the caller loads a snapshot, calls Plan, and persists the
// actions.
//
// The rules:
//
//   - An instance matches when it is active and carries every attribute of
//     the instance group ("name" = present, "name=value" = that value).
//   - At most one task per (environment, instance): the planner never starts
//     a task on an instance that keeps a live one, and stops extra live tasks
//     on one instance, keeping the best (desired version, running, newest).
//   - A matching instance without a live task gets one (Start), at once and
//     outside the budget, unless its last task failed recently: then it
//     waits out a crash-loop backoff (Backoff) that doubles with each
//     consecutive failure.
//   - A live task of another version is replaced: it is stopped and the
//     desired version started on the same instance (the agent starts the new
//     one once the old one has exited). Replacing a task that is still
//     launching is free. Replacing a running one takes its instance down, so
//     those replacements keep at least Matching − AllowedDown(Matching,
//     minHealthy) matching instances with a running task. Missing and failed
//     tasks use none of that budget (they are started at once), and when
//     nothing is launching or starting a plan replaces at least one running
//     task, so a
//     rollout at 100 % (or with many failed instances) never deadlocks.
//     Running tasks past the budget wait (Waiting) for the next plan.
//   - A live task on an instance that no longer matches (left the cluster,
//     draining, attributes changed) is stopped (Stop).
//   - Finished tasks (stopped, failed) are history and take no action.
//
// Applying a plan (starts and replacements launching, stops stopping) and
// planning again gives no action: the budget is then used by the work in
// flight.
package daemonplan

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// InstanceStatus is whether an instance takes tasks.
type InstanceStatus string

// Instance statuses, as stored.
const (
	InstanceActive   InstanceStatus = "active"   // registered and heartbeating
	InstanceDraining InstanceStatus = "draining" // leaving: its tasks are stopped, none started
	InstanceGone     InstanceStatus = "gone"     // left the cluster or missed its heartbeat TTL
)

// TaskState is where a task is in its life.
type TaskState string

// Task states, as stored.
const (
	TaskLaunching TaskState = "launching" // asked for, not yet reported running
	TaskRunning   TaskState = "running"
	TaskStopping  TaskState = "stopping" // asked to stop, not yet reported stopped
	TaskStopped   TaskState = "stopped"  // stopped on request
	TaskFailed    TaskState = "failed"   // exited on its own or never started
)

// Live says whether the task occupies its instance (it is, or may soon be,
// a running process).
func (s TaskState) Live() bool {
	return s == TaskLaunching || s == TaskRunning || s == TaskStopping
}

// Instance is one machine of the cluster.
type Instance struct {
	ID         string
	Status     InstanceStatus
	Attributes map[string]string
}

// Task is one task of the environment.
type Task struct {
	ID         string
	InstanceID string
	Version    string // the environment version it runs
	State      TaskState
	StartedAt  time.Time // when it was asked for; ties prefer the newest
}

// CrashRecord is an instance's history of failed tasks for the environment:
// how many failed in a row and when the last one ended.
type CrashRecord struct {
	Failures int
	LastExit time.Time
}

// Input is the snapshot the planner works from.
type Input struct {
	Version           string   // the desired environment version
	Attributes        []string // the instance group's filter
	MinHealthyPercent int      // 0–100
	Instances         []Instance
	Tasks             []Task
	Crashes           map[string]CrashRecord // by instance ID
	Backoff           Backoff
	Now               time.Time
}

// Backoff is the crash-loop delay: none after the first failure, then Base
// doubling with each further consecutive failure, at most Max.
type Backoff struct {
	Base time.Duration
	Max  time.Duration
}

// DefaultBackoff is 5 s, 10 s, 20 s, … up to 5 minutes.
var DefaultBackoff = Backoff{Base: 5 * time.Second, Max: 5 * time.Minute}

// Delay is how long after the last of failures consecutive failures the
// next start waits.
func (b Backoff) Delay(failures int) time.Duration {
	if failures <= 1 || b.Base <= 0 {
		return 0
	}
	d := b.Base
	for range failures - 2 {
		d *= 2
		if b.Max > 0 && d >= b.Max {
			return b.Max
		}
	}
	if b.Max > 0 && d > b.Max {
		return b.Max
	}
	return d
}

// StartReason says why an instance gets a task.
type StartReason string

// Start reasons.
const (
	StartNew    StartReason = "new"    // the instance has never run this environment's task here, or its task was stopped
	StartRepair StartReason = "repair" // its last task failed
)

// Start is a task to start on an instance that has no live task.
type Start struct {
	InstanceID string
	Reason     StartReason
}

// Replace is a live task of another version to stop, and the desired
// version to start on the same instance once it has stopped.
type Replace struct {
	InstanceID string
	TaskID     string
	Version    string // the version being replaced
	Running    bool   // whether it used the budget (a running task)
}

// StopReason says why a task is stopped.
type StopReason string

// Stop reasons.
const (
	StopNotMatching StopReason = "not-matching" // the instance left, drains, or no longer matches the group
	StopDuplicate   StopReason = "duplicate"    // another live task of the environment is on the instance
)

// Stop is a live task to stop without a replacement.
type Stop struct {
	InstanceID string
	TaskID     string
	Reason     StopReason
}

// Wait is a running task of another version held back by the budget.
type Wait struct {
	InstanceID string
	TaskID     string
}

// BackingOff is an instance whose restart waits for the crash-loop backoff.
type BackingOff struct {
	InstanceID string
	Until      time.Time
	Failures   int
}

// Plan is what to do. Every matching instance is in exactly one of Start,
// Replace, Waiting, Backoff or Leave; every live task on a non-matching
// instance is in Stop, as is every extra live task.
type Plan struct {
	Start   []Start
	Replace []Replace
	Stop    []Stop
	Waiting []Wait
	Backoff []BackingOff
	Leave   []string // matching instances already running (or launching) the desired version
	// Matching is the number of matching instances, Healthy how many of
	// them run a task (any version), InFlight how many have a task still
	// launching, AllowedDown how many may be without a running task.
	Matching, Healthy, InFlight, AllowedDown int
}

// Empty says whether the plan has nothing to do now (waiting and backing
// off are not actions).
func (p Plan) Empty() bool {
	return len(p.Start) == 0 && len(p.Replace) == 0 && len(p.Stop) == 0
}

// Converged says whether every matching instance runs or launches the
// desired version and nothing else is live.
func (p Plan) Converged() bool {
	return p.Empty() && len(p.Waiting) == 0 && len(p.Backoff) == 0
}

// AllowedDown is how many of n matching instances a rollout may take down
// at once: floor(n × (100 − minHealthy) / 100).
func AllowedDown(n, minHealthyPercent int) int {
	return n * (100 - minHealthyPercent) / 100
}

// Matches says whether an instance belongs to the instance group.
func Matches(in Instance, attributes []string) bool {
	if in.Status != InstanceActive {
		return false
	}
	for _, a := range attributes {
		name, value, hasValue := strings.Cut(a, "=")
		got, ok := in.Attributes[name]
		if !ok || (hasValue && got != value) {
			return false
		}
	}
	return true
}

// Make computes the plan for in.
func Make(in Input) Plan {
	var p Plan
	instances := slices.Clone(in.Instances)
	slices.SortFunc(instances, func(a, b Instance) int { return cmp.Compare(a.ID, b.ID) })

	live := map[string][]Task{}
	for _, t := range in.Tasks {
		if t.State.Live() {
			live[t.InstanceID] = append(live[t.InstanceID], t)
		}
	}
	matching := make(map[string]bool, len(instances))
	for _, inst := range instances {
		if Matches(inst, in.Attributes) {
			matching[inst.ID] = true
		}
	}

	// Stop what runs where it should not: live tasks on non-matching or
	// unknown instances, and every live task but the best one per matching
	// instance. Tasks already stopping are left to finish.
	keep := make(map[string]Task, len(live))
	for _, id := range sortedKeys(live) {
		tasks := sortedTasks(live[id])
		if !matching[id] {
			for _, t := range tasks {
				if t.State != TaskStopping {
					p.Stop = append(p.Stop, Stop{InstanceID: id, TaskID: t.ID, Reason: StopNotMatching})
				}
			}
			continue
		}
		slices.SortFunc(tasks, func(a, b Task) int { return better(a, b, in.Version) })
		if tasks[0].State == TaskStopping {
			continue // nothing left to keep: the instance gets a new task
		}
		keep[id] = tasks[0]
		for _, t := range tasks[1:] {
			if t.State != TaskStopping {
				p.Stop = append(p.Stop, Stop{InstanceID: id, TaskID: t.ID, Reason: StopDuplicate})
			}
		}
	}

	var candidates []Task // running tasks of another version, replaced within the budget
	for _, inst := range instances {
		if !matching[inst.ID] {
			continue
		}
		p.Matching++
		t, ok := keep[inst.ID]
		switch {
		case !ok:
			c := in.Crashes[inst.ID]
			if c.Failures == 0 {
				p.Start = append(p.Start, Start{InstanceID: inst.ID, Reason: StartNew})
				continue
			}
			if until := c.LastExit.Add(in.Backoff.Delay(c.Failures)); in.Now.Before(until) {
				p.Backoff = append(p.Backoff, BackingOff{InstanceID: inst.ID, Until: until, Failures: c.Failures})
				continue
			}
			p.Start = append(p.Start, Start{InstanceID: inst.ID, Reason: StartRepair})
		case t.Version == in.Version:
			if t.State == TaskRunning {
				p.Healthy++
			} else {
				p.InFlight++
			}
			p.Leave = append(p.Leave, inst.ID)
		case t.State == TaskLaunching:
			// Another version, not yet available: replacing it costs nothing.
			p.Replace = append(p.Replace, Replace{InstanceID: inst.ID, TaskID: t.ID, Version: t.Version})
			p.InFlight++
		default:
			p.Healthy++
			candidates = append(candidates, t)
		}
	}

	p.AllowedDown = AllowedDown(p.Matching, in.MinHealthyPercent)
	budget := p.Healthy - (p.Matching - p.AllowedDown)
	if p.InFlight == 0 && len(p.Start) == 0 {
		// Nothing that could raise the count of running tasks is under way:
		// go one at a time rather than deadlock.
		budget = max(budget, 1)
	}
	for _, t := range candidates {
		if budget > 0 {
			p.Replace = append(p.Replace, Replace{InstanceID: t.InstanceID, TaskID: t.ID, Version: t.Version, Running: true})
			budget--
			continue
		}
		p.Waiting = append(p.Waiting, Wait{InstanceID: t.InstanceID, TaskID: t.ID})
	}
	return p
}

// better orders an instance's live tasks, the one to keep first: not
// stopping, the desired version, running, newest, then by ID.
func better(a, b Task, version string) int {
	rank := func(t Task) int {
		r := 0
		if t.State == TaskStopping {
			r += 4
		}
		if t.Version != version {
			r += 2
		}
		if t.State != TaskRunning {
			r++
		}
		return r
	}
	if c := cmp.Compare(rank(a), rank(b)); c != 0 {
		return c
	}
	if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

func sortedKeys(m map[string][]Task) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func sortedTasks(ts []Task) []Task {
	ts = slices.Clone(ts)
	slices.SortFunc(ts, func(a, b Task) int { return cmp.Compare(a.ID, b.ID) })
	return ts
}
