package progression_test

import (
	"fmt"
	"testing"

	"github.com/gantryhq/gantry/internal/progression"
)

// benchPipeline is build → beta (2 groups, 100 hosts) → prod (9 groups,
// 900 hosts), each host replicating, deploying and testing, prod batching
// (deployed, tested): 1,000 hosts.
func benchPipeline(b *testing.B) *progression.Pipeline {
	group := func(name string, n int) progression.HostGroup {
		g := progression.HostGroup{Name: name}
		for i := range n {
			g.Hosts = append(g.Hosts, fmt.Sprintf("%s-%03d", name, i))
		}
		return g
	}
	steps := []string{"artifact-replicated", "deployed", "tested"}
	p := &progression.Pipeline{Name: "web", Stages: []progression.Stage{
		{Name: "build", Artifacts: []string{"x86", "arm64"}},
		{Name: "beta", After: []string{"build"}, HostSteps: steps,
			HostGroups: []progression.HostGroup{group("beta-a", 50), group("beta-b", 50)}},
		{Name: "approval", After: []string{"beta"}, Gate: true},
		{Name: "prod", After: []string{"approval"}, HostSteps: steps, Batch: &progression.BatchSpec{First: "deployed", Last: "tested"}},
	}}
	for i := range 9 {
		p.Stages[3].HostGroups = append(p.Stages[3].HostGroups, group(fmt.Sprintf("prod-%d", i), 100))
	}
	if err := p.Compile(); err != nil {
		b.Fatal(err)
	}
	return p
}

// benchLog is 50 revisions in flight, spread over the pipeline: revision i
// has completed the first i/50 of the steps (in breadth-first order), as
// log entries.
func benchLog(p *progression.Pipeline) []progression.Work {
	steps := progression.New(p, nil, nil).Steps()
	var log []progression.Work
	for i := range 50 {
		for _, s := range steps[:len(steps)*(i+1)/51] {
			log = append(log, progression.Work{Revision: fmt.Sprint(i), Step: s})
		}
	}
	return log
}

// revisionsOf reads the log into the engine's input: the floor any caller
// pays, one pass over the entries.
func revisionsOf(log []progression.Work) []progression.Revision {
	byName := map[string]*progression.Revision{}
	var order []string
	for _, e := range log {
		r, ok := byName[e.Revision]
		if !ok {
			r = &progression.Revision{Name: e.Revision, Seq: int64(len(order)), Done: map[progression.Step]bool{}}
			byName[e.Revision] = r
			order = append(order, e.Revision)
		}
		r.Done[e.Step] = true
	}
	revs := make([]progression.Revision, len(order))
	for i, n := range order {
		revs[i] = *byName[n]
	}
	return revs
}

// BenchmarkFrontierAndDoable is the frontier and doable set of every
// revision for 1,000 hosts and 50 revisions in flight (issue 14's aim:
// under 100 ms). The baseline, BenchmarkReadLogBaseline, is one linear pass
// over the same log.
func BenchmarkFrontierAndDoable(b *testing.B) {
	p := benchPipeline(b)
	revs := revisionsOf(benchLog(p))
	b.ReportAllocs()
	for b.Loop() {
		plan := progression.New(p, revs, nil)
		if len(plan.Doable) == 0 {
			b.Fatal("nothing doable")
		}
	}
}

func BenchmarkReadLogBaseline(b *testing.B) {
	p := benchPipeline(b)
	log := benchLog(p)
	b.ReportMetric(float64(len(log)), "entries")
	b.ReportAllocs()
	for b.Loop() {
		if len(revisionsOf(log)) != 50 {
			b.Fatal("lost revisions")
		}
	}
}
