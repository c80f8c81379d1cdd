package progression

import (
	"fmt"
	"slices"
	"strings"
)

// The events of a pipeline's steps, at each level (docs/log.md names).
const (
	PipelineStarted  = "pipeline-started"
	PipelineFinished = "pipeline-finished-successfully"
	PipelineFailed   = "pipeline-failed"
	StageStarted     = "stage-started"
	StageApproved    = "stage-approved"
	StageFinished    = "stage-finished-successfully"
	StageFailed      = "stage-failed"
	GroupStarted     = "host-group-started"
	GroupFinished    = "host-group-finished-successfully"
	GroupFailed      = "host-group-failed"
	HostStarted      = "host-started"
	HostFinished     = "host-finished-successfully"
	HostFailed       = "host-failed"
)

// ArtifactEvent is the event of a build stage receiving the artifact for
// arch ("build-stage-received-x86-artifact", as in the seed).
func ArtifactEvent(arch string) string { return "build-stage-received-" + arch + "-artifact" }

// HostStepEvent is the event of a host's step named name being done: steps
// are named in the past tense, as the seed's "host-deployed".
func HostStepEvent(name string) string { return "host-" + name }

// Pipeline is a release pipeline's shape: stages (in sequence or parallel
// by their After), each with host groups of hosts that run the stage's
// host steps, or with the artifacts a build needs. It is a Graph.
type Pipeline struct {
	Name   string
	Stages []Stage

	next  map[Step][]Step
	batch map[Step]Step
	kinds map[Step]StepInfo
}

// Stage is one stage of a pipeline.
type Stage struct {
	Name string
	// After are the stages that must finish before this one starts; none:
	// it starts with the pipeline.
	After []string
	// Artifacts are the architectures a build stage waits for.
	Artifacts []string
	// Gate: the stage starts only once voters approve it.
	Gate bool
	// HostGroups run in parallel; their hosts too.
	HostGroups []HostGroup
	// HostSteps are the names of the steps every host of the stage does,
	// in order.
	HostSteps []string
	// Batch, when set, makes a range of the stage hold one revision at a
	// time.
	Batch *BatchSpec
}

// BatchSpec is a stage's batch: the whole stage (no steps named), or on
// each host the host steps from First to Last (the seed's (deploy, test)).
type BatchSpec struct {
	First, Last string
}

// HostGroup is a set of hosts deployed in parallel.
type HostGroup struct {
	Name  string
	Hosts []string
}

// Kind is what doing a step means.
type Kind int

const (
	// Marker steps are bookkeeping: doing them is writing them.
	Marker Kind = iota
	// Command steps run a host step's command.
	Command
	// Artifact steps wait for a build artifact to be registered.
	Artifact
	// Gate steps wait for the voters.
	Gate
)

// StepInfo says where a step belongs and what doing it means.
type StepInfo struct {
	Kind      Kind
	Stage     string
	HostGroup string
	Host      string
	// Name is the host step's name (Command) or the architecture
	// (Artifact).
	Name string
}

// Targets of a pipeline's levels: a /-separated path from the outside in.

// StageTarget is stage's target.
func (p *Pipeline) StageTarget(stage string) string { return p.Name + "/" + stage }

// GroupTarget is a host group's target.
func (p *Pipeline) GroupTarget(stage, group string) string { return p.Name + "/" + stage + "/" + group }

// HostTarget is a host's target.
func (p *Pipeline) HostTarget(stage, group, host string) string {
	return p.Name + "/" + stage + "/" + group + "/" + host
}

// Compile builds the pipeline's next() and batch() tables; call it once
// after filling the stages. It refuses stages that name unknown stages or
// form a cycle (the configuration check reports those earlier with lines).
func (p *Pipeline) Compile() error {
	if cycle := p.StageCycle(); cycle != nil {
		return fmt.Errorf("stages form a cycle: %s", strings.Join(cycle, " → "))
	}
	p.next, p.batch, p.kinds = map[Step][]Step{}, map[Step]Step{}, map[Step]StepInfo{}
	byName := map[string]*Stage{}
	for i := range p.Stages {
		byName[p.Stages[i].Name] = &p.Stages[i]
	}
	root := p.Root()
	finished := Step{PipelineFinished, p.Name}
	p.kinds[root] = StepInfo{}
	p.kinds[finished] = StepInfo{}
	successors := map[string][]string{}
	for _, st := range p.Stages {
		for _, a := range st.After {
			if byName[a] == nil {
				return fmt.Errorf("stage %s comes after %s, which is not a stage", st.Name, a)
			}
			successors[a] = append(successors[a], st.Name)
		}
		if len(st.After) == 0 {
			p.next[root] = append(p.next[root], Step{StageStarted, p.StageTarget(st.Name)})
		}
	}
	if len(p.Stages) == 0 {
		p.next[root] = []Step{finished}
	}
	for _, st := range p.Stages {
		t := p.StageTarget(st.Name)
		started, end := Step{StageStarted, t}, Step{StageFinished, t}
		p.kinds[started] = StepInfo{Stage: st.Name}
		p.kinds[end] = StepInfo{Stage: st.Name}
		from := started
		if st.Gate {
			approved := Step{StageApproved, t}
			p.kinds[approved] = StepInfo{Kind: Gate, Stage: st.Name}
			p.next[started] = []Step{approved}
			from = approved
		}
		for _, arch := range st.Artifacts {
			a := Step{ArtifactEvent(arch), t}
			p.kinds[a] = StepInfo{Kind: Artifact, Stage: st.Name, Name: arch}
			p.next[from] = append(p.next[from], a)
			p.next[a] = []Step{end}
		}
		for _, hg := range st.HostGroups {
			gt := p.GroupTarget(st.Name, hg.Name)
			gs, ge := Step{GroupStarted, gt}, Step{GroupFinished, gt}
			p.kinds[gs] = StepInfo{Stage: st.Name, HostGroup: hg.Name}
			p.kinds[ge] = StepInfo{Stage: st.Name, HostGroup: hg.Name}
			p.next[from] = append(p.next[from], gs)
			p.next[ge] = []Step{end}
			for _, h := range hg.Hosts {
				ht := p.HostTarget(st.Name, hg.Name, h)
				prev := Step{HostStarted, ht}
				p.kinds[prev] = StepInfo{Stage: st.Name, HostGroup: hg.Name, Host: h}
				p.next[gs] = append(p.next[gs], prev)
				for _, name := range st.HostSteps {
					s := Step{HostStepEvent(name), ht}
					p.kinds[s] = StepInfo{Kind: Command, Stage: st.Name, HostGroup: hg.Name, Host: h, Name: name}
					p.next[prev] = []Step{s}
					prev = s
				}
				hf := Step{HostFinished, ht}
				p.kinds[hf] = StepInfo{Stage: st.Name, HostGroup: hg.Name, Host: h}
				p.next[prev] = []Step{hf}
				p.next[hf] = []Step{ge}
				if b := st.Batch; b != nil && b.First != "" {
					p.batch[Step{HostStepEvent(b.First), ht}] = Step{HostStepEvent(b.Last), ht}
				}
			}
			if len(hg.Hosts) == 0 {
				p.next[gs] = []Step{ge}
			}
		}
		if len(p.next[from]) == 0 {
			p.next[from] = []Step{end}
		}
		if b := st.Batch; b != nil && b.First == "" {
			p.batch[started] = end
		}
		for _, s := range successors[st.Name] {
			p.next[end] = append(p.next[end], Step{StageStarted, p.StageTarget(s)})
		}
		if len(successors[st.Name]) == 0 {
			p.next[end] = []Step{finished}
		}
	}
	return nil
}

// StageCycle is a cycle among the stages' After, as stage names from one
// back to itself, or nil.
func (p *Pipeline) StageCycle() []string {
	after := map[string][]string{}
	for _, st := range p.Stages {
		after[st.Name] = st.After
	}
	const (
		unvisited = iota
		onPath
		finished
	)
	color := map[string]int{}
	var path []string
	var visit func(s string) []string
	visit = func(s string) []string {
		color[s] = onPath
		path = append(path, s)
		for _, a := range after[s] {
			switch color[a] {
			case onPath:
				i := slices.Index(path, a)
				cycle := slices.Clone(path[i:])
				slices.Reverse(cycle)
				return append([]string{a}, cycle...)
			case unvisited:
				if _, known := after[a]; !known {
					continue
				}
				if c := visit(a); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		color[s] = finished
		return nil
	}
	for _, st := range p.Stages {
		if color[st.Name] == unvisited {
			if c := visit(st.Name); c != nil {
				return c
			}
		}
	}
	return nil
}

// Root is "pipeline-started" on the pipeline.
func (p *Pipeline) Root() Step { return Step{PipelineStarted, p.Name} }

// Next is the seed's next() over the compiled tables.
func (p *Pipeline) Next(s Step) []Step { return p.next[s] }

// BatchEnd is the seed's batch() over the compiled tables.
func (p *Pipeline) BatchEnd(s Step) (Step, bool) {
	e, ok := p.batch[s]
	return e, ok
}

// Info says where step s belongs and what doing it means; false when s is
// not a step of the pipeline.
func (p *Pipeline) Info(s Step) (StepInfo, bool) {
	i, ok := p.kinds[s]
	return i, ok
}

// Events are the distinct event names of the pipeline's steps, sorted:
// what the step introductions are recorded for.
func (p *Pipeline) Events() []string {
	seen := map[string]bool{}
	for s := range p.kinds {
		seen[s.Event] = true
	}
	out := make([]string, 0, len(seen))
	for e := range seen {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}
