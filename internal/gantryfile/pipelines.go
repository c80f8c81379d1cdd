package gantryfile

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/progression"
)

// PipelinesKey is the pipelines area's top-level key.
const PipelinesKey = "pipelines"

// Pipeline is a release pipeline (seed 004): stages in sequence or in
// parallel by their after, each a build (artifacts), a gate (approval), or
// host groups whose hosts run the stage's steps.
type Pipeline struct {
	Name string `yaml:"name"`
	// Timeout bounds each step's command unless the step says otherwise
	// (default 10m).
	Timeout string          `yaml:"timeout"`
	Stages  []PipelineStage `yaml:"stages"`

	StepTimeout time.Duration `yaml:"-"`
}

// PipelineStage is one stage.
type PipelineStage struct {
	Name  string   `yaml:"name"`
	After []string `yaml:"after"`
	// Artifacts are the architectures a build stage waits for.
	Artifacts []string `yaml:"artifacts"`
	// Approval makes the stage wait for votes before its hosts.
	Approval   *PipelineApproval `yaml:"approval"`
	HostGroups []HostGroup       `yaml:"host_groups"`
	Steps      []PipelineStep    `yaml:"steps"`
	// Batch is "stage" (the whole stage holds one revision at a time) or
	// [first, last], two steps: on each host, from first to last.
	Batch any `yaml:"batch"`

	BatchSpec *progression.BatchSpec `yaml:"-"`
}

// HostGroup is a set of hosts deployed in parallel.
type HostGroup struct {
	Name  string   `yaml:"name"`
	Hosts []string `yaml:"hosts"`
	// Arch is the architecture whose artifact its hosts get as
	// {artifact}; default the pipeline's first.
	Arch string `yaml:"arch"`
}

// PipelineStep is a step every host of a stage does: a command with
// {host}, {revision}, {artifact}, {pipeline}, {stage} and {group}.
type PipelineStep struct {
	// Name in the past tense ("deployed"): its event is host-<name>.
	Name    string   `yaml:"name"`
	Run     []string `yaml:"run"`
	Timeout string   `yaml:"timeout"`
	// RunsOn is where the command runs: "worker" (default, a Gantry
	// worker) or "agent" (the host's own gantry agent, the one registered
	// with attribute host=<host>).
	RunsOn string `yaml:"runs_on"`

	CommandTimeout time.Duration `yaml:"-"`
}

// Where a step's command runs.
const (
	RunsOnWorker = "worker"
	RunsOnAgent  = "agent"
)

// OnAgent says whether the step's command runs on its host's agent.
func (s PipelineStep) OnAgent() bool { return s.RunsOn == RunsOnAgent }

// PipelineApproval is a gate's voters and thresholds (one each by default).
type PipelineApproval struct {
	Voters               []string `yaml:"voters"`
	WrittenMinApprovals  *int     `yaml:"min_approvals"`
	WrittenMinRejections *int     `yaml:"min_rejections"`
	MinApprovals         int      `yaml:"-"`
	MinRejections        int      `yaml:"-"`
}

// Policy is the gate's approval policy.
func (a *PipelineApproval) Policy() approval.Policy {
	return approval.Policy{Voters: a.Voters, MinApprovals: a.MinApprovals, MinRejections: a.MinRejections}
}

// StepPlaceholders are what a step's command may use.
var StepPlaceholders = []string{"{host}", "{revision}", "{artifact}", "{pipeline}", "{stage}", "{group}"}

var (
	hostPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	stepPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,40}$`)
)

// DefaultStepTimeout bounds a step's command when nothing says otherwise;
// MaxStepTimeout is the longest a step may be given (jobs.PipelinesLongestJob
// leaves the margin to record its outcome).
const (
	DefaultStepTimeout = 10 * time.Minute
	MaxStepTimeout     = time.Hour
)

// PipelinesSection reads and checks the pipelines key.
var PipelinesSection = Section{Key: PipelinesKey, Read: func(r *SectionReader) any {
	var ps []Pipeline
	if !r.Decode(&ps) {
		return nil
	}
	r.v.checkPipelines(ps)
	return ps
}}

// Shape is the pipeline as the progression engine sees it (compiled).
func (p Pipeline) Shape() (*progression.Pipeline, error) {
	shape := &progression.Pipeline{Name: p.Name}
	for _, st := range p.Stages {
		s := progression.Stage{Name: st.Name, After: st.After, Artifacts: st.Artifacts, Gate: st.Approval != nil, Batch: st.BatchSpec}
		for _, step := range st.Steps {
			s.HostSteps = append(s.HostSteps, step.Name)
		}
		for _, g := range st.HostGroups {
			s.HostGroups = append(s.HostGroups, progression.HostGroup{Name: g.Name, Hosts: g.Hosts})
		}
		shape.Stages = append(shape.Stages, s)
	}
	return shape, shape.Compile()
}

// Stage is the named stage, or nil.
func (p Pipeline) Stage(name string) *PipelineStage {
	for i := range p.Stages {
		if p.Stages[i].Name == name {
			return &p.Stages[i]
		}
	}
	return nil
}

// Architectures are every architecture the pipeline's builds wait for, in
// order of appearance.
func (p Pipeline) Architectures() []string {
	var out []string
	for _, st := range p.Stages {
		for _, a := range st.Artifacts {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

func (v *validator) checkPipelines(ps []Pipeline) {
	names := map[string]bool{}
	for i := range ps {
		p := &ps[i]
		key := fmt.Sprintf("pipelines[%d]", i)
		switch {
		case !namePattern.MatchString(p.Name):
			v.add(key+".name", "must be lower-case letters, digits, - or _ (got %q)", p.Name)
		case names[p.Name]:
			v.add(key+".name", "pipeline %q is defined twice", p.Name)
		}
		names[p.Name] = true
		p.StepTimeout = v.duration(key+".timeout", p.Timeout, DefaultStepTimeout)
		if len(p.Stages) == 0 {
			v.add(key+".stages", "a pipeline needs at least one stage")
		}
		stages := map[string]int{}
		for j := range p.Stages {
			st := &p.Stages[j]
			if !namePattern.MatchString(st.Name) {
				v.add(fmt.Sprintf("%s.stages[%d].name", key, j), "must be lower-case letters, digits, - or _ (got %q)", st.Name)
			} else if _, dup := stages[st.Name]; dup {
				v.add(fmt.Sprintf("%s.stages[%d].name", key, j), "stage %q is defined twice in pipeline %s", st.Name, p.Name)
			}
			stages[st.Name] = j
		}
		archs := p.Architectures()
		for j := range p.Stages {
			v.checkStage(fmt.Sprintf("%s.stages[%d]", key, j), p, &p.Stages[j], stages, archs)
		}
		shape := &progression.Pipeline{Name: p.Name}
		for _, st := range p.Stages {
			shape.Stages = append(shape.Stages, progression.Stage{Name: st.Name, After: st.After})
		}
		if cycle := shape.StageCycle(); cycle != nil {
			v.add(fmt.Sprintf("%s.stages[%d].after", key, stages[cycle[0]]), "after has a cycle: %s", strings.Join(cycle, " → "))
		}
	}
}

func (v *validator) checkStage(key string, p *Pipeline, st *PipelineStage, stages map[string]int, archs []string) {
	for k, a := range st.After {
		switch _, ok := stages[a]; {
		case !ok:
			v.add(fmt.Sprintf("%s.after[%d]", key, k), "no stage named %q in pipeline %s", a, p.Name)
		case a == st.Name:
			v.add(fmt.Sprintf("%s.after[%d]", key, k), "a stage cannot come after itself")
		}
	}
	for k, a := range st.Artifacts {
		if !namePattern.MatchString(a) {
			v.add(fmt.Sprintf("%s.artifacts[%d]", key, k), "must be lower-case letters, digits, - or _ (got %q)", a)
		}
	}
	if len(st.Artifacts) > 0 && (len(st.HostGroups) > 0 || len(st.Steps) > 0) {
		v.add(key+".artifacts", "a build stage waits for artifacts and has no host groups or steps")
	}
	if len(st.HostGroups) > 0 && len(st.Steps) == 0 {
		v.add(key+".steps", "a stage with host groups needs at least one step for its hosts")
	}
	groups := map[string]bool{}
	for k := range st.HostGroups {
		g := &st.HostGroups[k]
		gkey := fmt.Sprintf("%s.host_groups[%d]", key, k)
		switch {
		case !namePattern.MatchString(g.Name):
			v.add(gkey+".name", "must be lower-case letters, digits, - or _ (got %q)", g.Name)
		case groups[g.Name]:
			v.add(gkey+".name", "host group %q is defined twice in stage %s", g.Name, st.Name)
		}
		groups[g.Name] = true
		hosts := map[string]bool{}
		for h, host := range g.Hosts {
			switch {
			case !hostPattern.MatchString(host):
				v.add(fmt.Sprintf("%s.hosts[%d]", gkey, h), "must be a host name: letters, digits, '.', - or _ (got %q)", host)
			case hosts[host]:
				v.add(fmt.Sprintf("%s.hosts[%d]", gkey, h), "host %q is listed twice", host)
			}
			hosts[host] = true
		}
		if g.Arch != "" && !slices.Contains(archs, g.Arch) {
			v.add(gkey+".arch", "no build stage of pipeline %s waits for architecture %q (it has %s)", p.Name, g.Arch, orNone(archs))
		}
	}
	steps := map[string]int{}
	for k := range st.Steps {
		s := &st.Steps[k]
		skey := fmt.Sprintf("%s.steps[%d]", key, k)
		switch {
		case !stepPattern.MatchString(s.Name):
			v.add(skey+".name", "must be lower-case letters, digits or -, in the past tense such as deployed (got %q)", s.Name)
		case steps[s.Name] > 0:
			v.add(skey+".name", "step %q is defined twice in stage %s", s.Name, st.Name)
		}
		steps[s.Name] = k + 1
		if len(s.Run) == 0 || strings.TrimSpace(s.Run[0]) == "" {
			v.add(skey+".run", "is required: the command as an argument vector, such as [./deploy.sh, \"{host}\", \"{revision}\"]")
		}
		for _, arg := range s.Run {
			for _, ph := range placeholder.FindAllString(arg, -1) {
				if !slices.Contains(StepPlaceholders, ph) {
					v.add(skey+".run", "unknown placeholder %s: use %s", ph, strings.Join(StepPlaceholders, ", "))
				}
			}
		}
		if s.RunsOn != "" && s.RunsOn != RunsOnWorker && s.RunsOn != RunsOnAgent {
			v.add(skey+".runs_on", "must be worker (a Gantry worker runs the command) or agent (the host's gantry agent runs it) (got %q)", s.RunsOn)
		}
		s.CommandTimeout = v.duration(skey+".timeout", s.Timeout, p.StepTimeout)
		if s.CommandTimeout > MaxStepTimeout {
			v.add(skey+".timeout", "must be at most %s: a longer step would be taken for lost and run again", MaxStepTimeout)
		}
	}
	v.checkBatch(key, st, steps)
	if a := st.Approval; a != nil {
		a.MinApprovals, a.MinRejections = 1, 1
		if a.WrittenMinApprovals != nil {
			a.MinApprovals = *a.WrittenMinApprovals
		}
		if a.WrittenMinRejections != nil {
			a.MinRejections = *a.WrittenMinRejections
		}
		if err := a.Policy().Validate(); err != nil {
			var ae *apperr.Error
			if errors.As(err, &ae) {
				for field, reason := range ae.Fields {
					v.add(key+".approval."+field, "%s", reason)
				}
			} else {
				v.add(key+".approval", "%v", err)
			}
		}
	}
}

// checkBatch reads batch: stage, or [first, last] naming two of the
// stage's steps in order.
func (v *validator) checkBatch(key string, st *PipelineStage, steps map[string]int) {
	switch b := st.Batch.(type) {
	case nil:
	case string:
		if b != "stage" {
			v.add(key+".batch", "must be stage or a list [first, last] of two of the stage's steps (got %q)", b)
			return
		}
		st.BatchSpec = &progression.BatchSpec{}
	case []any:
		if len(b) != 2 {
			v.add(key+".batch", "must name two steps, the first and the last of the batch (got %d)", len(b))
			return
		}
		first, _ := b[0].(string)
		last, _ := b[1].(string)
		switch {
		case steps[first] == 0:
			v.add(key+".batch", "no step named %q in stage %s", first, st.Name)
		case steps[last] == 0:
			v.add(key+".batch", "no step named %q in stage %s", last, st.Name)
		case steps[last] < steps[first]:
			v.add(key+".batch", "%s comes before %s: the batch runs from its first step to its last", last, first)
		default:
			st.BatchSpec = &progression.BatchSpec{First: first, Last: last}
		}
	default:
		v.add(key+".batch", "must be stage or a list [first, last] of two of the stage's steps")
	}
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}
