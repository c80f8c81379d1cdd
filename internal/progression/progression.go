// Package progression is the engine that moves revisions through a release
// pipeline by reading the deployment log (seed 004, "Progressing the event
// log"). It is pure: the caller gives it the pipeline's shape (a Graph: the
// seed's next and batch functions), the revisions in flight with the steps
// the log says they completed, and when new kinds of step were introduced;
// it answers which steps are doable now and, for every other step, why not.
//
// The seed's definitions, as implemented here (docs/areas/pipelines.md):
//
//   - next(s): Graph.Next; after(s): every step reachable from next(s).
//   - frontier: flood-fill from Graph.Root, expanding complete steps, with a
//     seen set so that cycles end; incomplete steps are the frontier.
//   - new: no step in after(s) is complete. An incomplete step that is not
//     new was added behind the revision (seed case 010): the flood fill
//     passes over it to the work deeper in the pipeline.
//   - introduced steps: a kind of step (an event name) introduced while
//     revision r was registered or before is done for r only if r never
//     completed, anywhere, an event of the steps that follow it (seed case
//     011); otherwise it is passed over like a step that is not new.
//   - ready: no other frontier step t has s in after(t) (fan-in waits for
//     every path).
//   - unlocked: no revision holds a batch that s opens. A batch (s, e) is
//     held by a revision that has s complete, running or failed and e not
//     complete. Revisions are planned oldest first, so the oldest takes a
//     free batch.
//   - doable: new, ready and unlocked, in a revision that no failed step
//     blocks.
package progression

import (
	"fmt"
	"slices"
)

// Step is one entry the log can hold for a revision: Event happened to
// Target. The seed's uniqueness is (deployment, target, event); a revision
// is one deployment.
type Step struct {
	Event  string
	Target string
}

func (s Step) String() string { return s.Event + "@" + s.Target }

// Graph is the shape of a pipeline, as the seed's functions over entries.
type Graph interface {
	// Root is the step every other step comes after ("pipeline-started").
	Root() Step
	// Next is the steps to do once s is complete (the seed's next).
	Next(s Step) []Step
	// BatchEnd, when s opens a batch, is the step that closes it (the
	// seed's batch(s) = (s, end)).
	BatchEnd(s Step) (Step, bool)
}

// Revision is one revision in flight and what the log says of it.
type Revision struct {
	Name string
	// Seq orders revisions by registration: lower is older.
	Seq int64
	// Done are the steps the log has as completed (or skipped by an
	// operator) for this revision.
	Done map[Step]bool
	// Running are the steps whose work is under way.
	Running map[Step]bool
	// Failed are the steps whose work failed and that no operator has
	// retried or skipped yet, with why; they block the revision.
	Failed map[Step]string
}

// Introductions says, per event name, the Seq of the latest revision
// registered when that kind of step was introduced (the seed's
// deployment_step_introduction.revision_after).
type Introductions map[string]int64

// State is where one step stands for one revision.
type State int

const (
	// Pending: beyond the frontier; Cause is the frontier step before it.
	Pending State = iota
	// Done: complete in the log.
	Done
	// NotNew: incomplete, but Cause, a step after it, is complete.
	NotNew
	// NotIntroduced: a kind of step introduced after the revision had
	// completed Cause, a step that follows it.
	NotIntroduced
	// Doable: on the frontier, new, ready and unlocked.
	Doable
	// Running: its work is under way.
	Running
	// Failed: its work failed; the revision is blocked.
	Failed
	// NotReady: on the frontier, but Cause, another frontier step, leads
	// to it.
	NotReady
	// Locked: it opens a batch that revision Holder holds.
	Locked
	// Blocked: on the frontier of a revision blocked by the failed Cause.
	Blocked
	// Unreachable: no path from the root leads to it (only when asked
	// about a step that is not in the pipeline).
	Unreachable
)

// Batch is a range of steps that holds one revision at a time.
type Batch struct {
	Start, End Step
}

func (b Batch) String() string { return "(" + b.Start.String() + ", " + b.End.String() + ")" }

// Work is one doable step of one revision.
type Work struct {
	Revision string
	Step     Step
}

// Plan is the engine's answer for a pipeline at one moment.
type Plan struct {
	// Doable is the work to start now, oldest revision first.
	Doable []Work
	// Revisions are the revisions planned, oldest first.
	Revisions []*RevisionPlan

	g *compiled
}

// RevisionPlan is one revision's part of the plan.
type RevisionPlan struct {
	Name string
	Seq  int64
	// Frontier is the incomplete steps the flood fill stopped at, in
	// next() order.
	Frontier []Step
	// Doable is the frontier's doable steps.
	Doable []Step
	// Finished is true when nothing is left on the frontier: every path
	// of the pipeline is complete for the revision.
	Finished bool
	// Holds are the batches this revision holds.
	Holds []Batch

	state  []State
	cause  []int32 // a node, or -1
	holder []string
	failed []string
}

// StepStatus is one step of a revision with where it stands and why.
type StepStatus struct {
	Step  Step
	State State
	// Cause is the step the state refers to (see State); zero if none.
	Cause Step
	// Holder is the revision holding the batch, for Locked.
	Holder string
	// Batch is the batch, for Locked.
	Batch Batch
	// Reason is why a failed step failed.
	Reason string
}

// compiled is a Graph flattened into node numbers: every step reachable
// from the root, in breadth-first next() order, so that each revision's
// pass is over arrays rather than maps.
type compiled struct {
	steps   []Step
	index   map[Step]int32
	next    [][]int32
	prev    [][]int32 // next, reversed
	batchOf []int32   // the batch's end node for a step that opens one, else -1
	starts  []int32   // the nodes that open a batch
}

func compile(g Graph) *compiled {
	c := &compiled{index: map[Step]int32{}}
	add := func(s Step) int32 {
		if i, ok := c.index[s]; ok {
			return i
		}
		i := int32(len(c.steps))
		c.index[s] = i
		c.steps = append(c.steps, s)
		return i
	}
	add(g.Root())
	for i := 0; i < len(c.steps); i++ {
		var ns []int32
		for _, n := range g.Next(c.steps[i]) {
			ns = append(ns, add(n))
		}
		c.next = append(c.next, ns)
	}
	c.dropBackEdges()
	c.prev = make([][]int32, len(c.steps))
	for s, ns := range c.next {
		for _, m := range ns {
			c.prev[m] = append(c.prev[m], int32(s))
		}
	}
	c.batchOf = make([]int32, len(c.steps))
	for i, s := range c.steps {
		c.batchOf[i] = -1
		if end, ok := g.BatchEnd(s); ok {
			if e, ok := c.index[end]; ok {
				c.batchOf[i] = e
				c.starts = append(c.starts, int32(i))
			}
		}
	}
	return c
}

// dropBackEdges removes the edges that close a cycle (to a step on the
// path from the root, depth first in next() order): the seed's seen set.
// Without them a↔b is a↔b once, and after(b) does not hold a, which comes
// before it.
func (c *compiled) dropBackEdges() {
	const (
		unvisited = iota
		onPath
		finished
	)
	color := make([]uint8, len(c.steps))
	type frame struct {
		node  int32
		child int
	}
	stack := []frame{{0, 0}}
	color[0] = onPath
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.child == len(c.next[top.node]) {
			color[top.node] = finished
			stack = stack[:len(stack)-1]
			continue
		}
		i := top.child
		m := c.next[top.node][i]
		top.child++
		switch color[m] {
		case onPath:
			c.next[top.node] = slices.Delete(slices.Clone(c.next[top.node]), i, i+1)
			top.child--
		case unvisited:
			color[m] = onPath
			stack = append(stack, frame{m, 0})
		}
	}
}

// revisionPass is the flood fill and the per-step facts of one revision.
type revisionPass struct {
	done, running []bool
	failed        []string
	rp            *RevisionPlan
	frontier      []int32
}

// New plans every revision in revs (any order; they are planned oldest
// first) over g.
func New(g Graph, revs []Revision, intro Introductions) *Plan {
	c := compile(g)
	sorted := slices.Clone(revs)
	slices.SortStableFunc(sorted, func(a, b Revision) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	p := &Plan{g: c}
	passes := make([]*revisionPass, len(sorted))
	for i := range sorted {
		passes[i] = c.flood(&sorted[i], intro)
		p.Revisions = append(p.Revisions, passes[i].rp)
	}

	// The active batches across all revisions, before any decision.
	held := map[int32]int{} // batch start → index of the holding revision
	for i, ps := range passes {
		for _, s := range c.starts {
			if (ps.done[s] || ps.running[s] || ps.failed[s] != "") && !ps.done[c.batchOf[s]] {
				if _, ok := held[s]; !ok {
					held[s] = i
				}
				ps.rp.Holds = append(ps.rp.Holds, Batch{Start: c.steps[s], End: c.steps[c.batchOf[s]]})
			}
		}
	}

	// Oldest first: a revision that starts a free batch takes it before
	// any newer one is considered.
	for i, ps := range passes {
		rp := ps.rp
		var blocker int32 = -1
		for _, f := range ps.frontier {
			if ps.failed[f] != "" {
				blocker = f
				break
			}
		}
		waits := c.waits(ps.frontier)
		for _, f := range ps.frontier {
			switch {
			case ps.failed[f] != "":
				rp.state[f] = Failed
			case ps.running[f]:
				rp.state[f] = Running
			case blocker >= 0:
				rp.state[f], rp.cause[f] = Blocked, blocker
			case waits[f] >= 0:
				rp.state[f], rp.cause[f] = NotReady, waits[f]
			default:
				if h, ok := held[f]; ok && h != i {
					rp.state[f], rp.holder[f] = Locked, passes[h].rp.Name
					continue
				}
				rp.state[f] = Doable
				if c.batchOf[f] >= 0 {
					held[f] = i
				}
				rp.Doable = append(rp.Doable, c.steps[f])
				p.Doable = append(p.Doable, Work{Revision: rp.Name, Step: c.steps[f]})
			}
		}
	}
	return p
}

// flood is the seed's frontier computation for one revision: from the
// root, expand complete steps (and steps passed over: not new, or not
// introduced for this revision) through next(), each step once (seen);
// stop at the others, which are the frontier.
func (c *compiled) flood(r *Revision, intro Introductions) *revisionPass {
	n := len(c.steps)
	ps := &revisionPass{done: make([]bool, n), running: make([]bool, n), failed: make([]string, n)}
	rp := &RevisionPlan{Name: r.Name, Seq: r.Seq, state: make([]State, n), cause: make([]int32, n), holder: make([]string, n)}
	ps.rp = rp
	rp.failed = ps.failed
	doneEvents := map[string]Step{}
	for s, ok := range r.Done {
		if !ok {
			continue
		}
		if _, seen := doneEvents[s.Event]; !seen {
			doneEvents[s.Event] = s
		}
		if i, found := c.index[s]; found {
			ps.done[i] = true
		}
	}
	for s, ok := range r.Running {
		if i, found := c.index[s]; found && ok {
			ps.running[i] = true
		}
	}
	for s, why := range r.Failed {
		if i, found := c.index[s]; found {
			ps.failed[i] = why
		}
	}
	for i := range rp.cause {
		rp.cause[i] = -1
	}
	later := c.laterDone(ps.done)

	seen := make([]bool, n)
	queue := make([]int32, 1, n)
	seen[0] = true
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		pass := ps.done[s]
		switch {
		case ps.done[s]:
			rp.state[s] = Done
		case ps.running[s] || ps.failed[s] != "":
			// Work under way or failed stays on the frontier, new or not:
			// it must end (or be retried or skipped) before anything else.
		case later[s] >= 0:
			rp.state[s], rp.cause[s], pass = NotNew, later[s], true
		default:
			if by, ok := c.notIntroduced(s, r, intro, doneEvents); ok {
				rp.state[s], rp.cause[s], pass = NotIntroduced, by, true
			}
		}
		if !pass {
			ps.frontier = append(ps.frontier, s)
			rp.Frontier = append(rp.Frontier, c.steps[s])
			continue
		}
		for _, m := range c.next[s] {
			if !seen[m] {
				seen[m] = true
				queue = append(queue, m)
			}
		}
	}
	rp.Finished = len(ps.frontier) == 0
	// What lies beyond the frontier waits for the frontier step it comes
	// after.
	onFrontier := make([]bool, n)
	for _, f := range ps.frontier {
		onFrontier[f] = true
	}
	for _, f := range ps.frontier {
		c.markPending(f, rp, onFrontier)
	}
	return ps
}

// laterDone is, for each step, a complete step in after(step), or -1: the
// seed's "new" is later[s] < 0. It walks the edges backwards from every
// complete step once, so it costs one pass over the graph.
func (c *compiled) laterDone(done []bool) []int32 {
	n := len(c.steps)
	later := make([]int32, n)
	for i := range later {
		later[i] = -1
	}
	queue := make([]int32, 0, n)
	for s := range n {
		if done[s] {
			queue = append(queue, int32(s))
		}
	}
	// witness[s] is the complete step that s reaches; BFS backwards from
	// all complete steps at once.
	witness := make([]int32, n)
	for _, s := range queue {
		witness[s] = s
	}
	for len(queue) > 0 {
		m := queue[0]
		queue = queue[1:]
		for _, p := range c.prev[m] {
			if later[p] < 0 {
				later[p] = witness[m]
				witness[p] = witness[m]
				queue = append(queue, p)
			}
		}
	}
	return later
}

// notIntroduced reports whether step s, of a kind introduced at or after
// r's registration, is passed over for r because r already completed an
// event of the steps that follow it somewhere (seed case 011, third
// bullet), and which entry shows it.
func (c *compiled) notIntroduced(s int32, r *Revision, intro Introductions, doneEvents map[string]Step) (int32, bool) {
	after, ok := intro[c.steps[s].Event]
	if !ok || r.Seq > after {
		return -1, false
	}
	for _, m := range c.next[s] {
		if e, ok := doneEvents[c.steps[m].Event]; ok {
			if i, found := c.index[e]; found {
				return i, true
			}
			return m, true
		}
	}
	return -1, false
}

// waits is, for each frontier step, another frontier step t with the step
// in after(t) (so it is not ready), or -1. One breadth-first pass from all
// of the frontier, each step remembering up to two distinct sources that
// reach it: a step reached by a source other than itself is not ready.
func (c *compiled) waits(frontier []int32) []int32 {
	n := len(c.steps)
	first := make([]int32, n)
	second := make([]int32, n)
	for i := range first {
		first[i], second[i] = -1, -1
	}
	type visit struct{ node, src int32 }
	queue := make([]visit, 0, 2*n)
	push := func(m, src int32) {
		switch {
		case first[m] < 0:
			first[m] = src
		case first[m] != src && second[m] < 0:
			second[m] = src
		default:
			return
		}
		queue = append(queue, visit{m, src})
	}
	for _, f := range frontier {
		for _, m := range c.next[f] {
			push(m, f)
		}
	}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, m := range c.next[v.node] {
			push(m, v.src)
		}
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = -1
	}
	for _, f := range frontier {
		switch {
		case first[f] >= 0 && first[f] != f:
			out[f] = first[f]
		case second[f] >= 0 && second[f] != f:
			out[f] = second[f]
		}
	}
	return out
}

// markPending marks the incomplete steps after frontier step f that the
// flood fill did not reach as pending on f (the first frontier step to
// reach them keeps them).
func (c *compiled) markPending(f int32, rp *RevisionPlan, onFrontier []bool) {
	queue := slices.Clone(c.next[f])
	for len(queue) > 0 {
		m := queue[0]
		queue = queue[1:]
		if rp.state[m] != Pending || rp.cause[m] >= 0 || m == 0 || onFrontier[m] {
			continue
		}
		rp.cause[m] = f
		queue = append(queue, c.next[m]...)
	}
}

// Revision is the plan of the named revision, or nil.
func (p *Plan) Revision(name string) *RevisionPlan {
	for _, rp := range p.Revisions {
		if rp.Name == name {
			return rp
		}
	}
	return nil
}

// Steps is every step of the pipeline, in breadth-first next() order from
// the root.
func (p *Plan) Steps() []Step { return slices.Clone(p.g.steps) }

// Status is where step s stands for revision rp, and why.
func (p *Plan) Status(rp *RevisionPlan, s Step) StepStatus {
	i, ok := p.g.index[s]
	if !ok {
		return StepStatus{Step: s, State: Unreachable}
	}
	st := StepStatus{Step: s, State: rp.state[i], Reason: rp.failed[i], Holder: rp.holder[i]}
	if c := rp.cause[i]; c >= 0 {
		st.Cause = p.g.steps[c]
	}
	if st.State == Locked {
		st.Batch = Batch{Start: s, End: p.g.steps[p.g.batchOf[i]]}
	}
	return st
}

// Statuses is Status for every step of the pipeline, in Steps order.
func (p *Plan) Statuses(rp *RevisionPlan) []StepStatus {
	out := make([]StepStatus, len(p.g.steps))
	for i, s := range p.g.steps {
		out[i] = p.Status(rp, s)
	}
	return out
}

// After is the seed's after(s): every step reachable from next(s), in
// breadth-first order.
func (p *Plan) After(s Step) []Step {
	i, ok := p.g.index[s]
	if !ok {
		return nil
	}
	seen := make([]bool, len(p.g.steps))
	var out []Step
	queue := slices.Clone(p.g.next[i])
	for len(queue) > 0 {
		m := queue[0]
		queue = queue[1:]
		if seen[m] {
			continue
		}
		seen[m] = true
		out = append(out, p.g.steps[m])
		queue = append(queue, p.g.next[m]...)
	}
	return out
}

// Why is the status in words, for the pages: "not ready: waits for …".
func (st StepStatus) Why() string {
	switch st.State {
	case Done:
		return "done"
	case Doable:
		return "doable: starting"
	case Running:
		return "running"
	case Failed:
		return "failed: " + st.Reason + " (the revision waits for an operator to retry or skip it)"
	case NotNew:
		return fmt.Sprintf("not new: %s, after it, is already done for this revision", st.Cause)
	case NotIntroduced:
		return fmt.Sprintf("not for this revision: %s was introduced after the revision reached %s", st.Step.Event, st.Cause)
	case NotReady:
		return fmt.Sprintf("not ready: waits for %s, which leads to it", st.Cause)
	case Locked:
		return fmt.Sprintf("locked: revision %s holds the batch %s", st.Holder, st.Batch)
	case Blocked:
		return fmt.Sprintf("blocked: %s failed", st.Cause)
	case Unreachable:
		return "not in the pipeline"
	}
	if st.Cause != (Step{}) {
		return fmt.Sprintf("pending: comes after %s", st.Cause)
	}
	return "pending"
}

// String names a state for pages and the API.
func (s State) String() string {
	return [...]string{"pending", "done", "not-new", "not-introduced", "doable", "running", "failed", "not-ready", "locked", "blocked", "unreachable"}[s]
}
