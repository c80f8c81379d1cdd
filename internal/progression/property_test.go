package progression_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/progression"
)

// randomPipeline is a random DAG of stages (each after some earlier ones),
// with host groups, hosts, host steps, gates, builds and batches.
func randomPipeline(rng *rand.Rand) *progression.Pipeline {
	p := &progression.Pipeline{Name: "p"}
	for i := range 1 + rng.IntN(6) {
		st := progression.Stage{Name: fmt.Sprintf("s%d", i)}
		for j := range i {
			if rng.IntN(3) == 0 || (j == i-1 && len(st.After) == 0 && rng.IntN(2) == 0) {
				st.After = append(st.After, fmt.Sprintf("s%d", j))
			}
		}
		switch rng.IntN(5) {
		case 0:
			st.Artifacts = []string{"x86", "arm"}[:1+rng.IntN(2)]
		default:
			for k := range 1 + rng.IntN(3) {
				st.HostSteps = append(st.HostSteps, fmt.Sprintf("step%d", k))
			}
			for g := range rng.IntN(3) {
				hg := progression.HostGroup{Name: fmt.Sprintf("g%d", g)}
				for h := range rng.IntN(4) {
					hg.Hosts = append(hg.Hosts, fmt.Sprintf("h%d", h))
				}
				st.HostGroups = append(st.HostGroups, hg)
			}
			switch rng.IntN(3) {
			case 0:
				st.Batch = &progression.BatchSpec{}
			case 1:
				first := rng.IntN(len(st.HostSteps))
				last := first + rng.IntN(len(st.HostSteps)-first)
				st.Batch = &progression.BatchSpec{First: st.HostSteps[first], Last: st.HostSteps[last]}
			}
		}
		st.Gate = rng.IntN(6) == 0
		p.Stages = append(p.Stages, st)
	}
	return p
}

// changed is p with one random change made while revisions are in flight:
// a host added, a host step inserted (recorded in intro), a stage inserted
// before another, or an architecture added.
func changed(rng *rand.Rand, p *progression.Pipeline, intro progression.Introductions, latest int64, n int) *progression.Pipeline {
	q := &progression.Pipeline{Name: p.Name}
	for _, st := range p.Stages {
		st.After = slices.Clone(st.After)
		st.HostSteps = slices.Clone(st.HostSteps)
		st.Artifacts = slices.Clone(st.Artifacts)
		st.HostGroups = slices.Clone(st.HostGroups)
		for i := range st.HostGroups {
			st.HostGroups[i].Hosts = slices.Clone(st.HostGroups[i].Hosts)
		}
		q.Stages = append(q.Stages, st)
	}
	st := &q.Stages[rng.IntN(len(q.Stages))]
	switch rng.IntN(4) {
	case 0:
		if len(st.HostGroups) > 0 {
			g := &st.HostGroups[rng.IntN(len(st.HostGroups))]
			g.Hosts = append(g.Hosts, fmt.Sprintf("new%d", n))
		}
	case 1:
		if len(st.HostSteps) > 0 {
			name := fmt.Sprintf("added%d", n)
			st.HostSteps = slices.Insert(st.HostSteps, rng.IntN(len(st.HostSteps)+1), name)
			intro[progression.HostStepEvent(name)] = latest
		}
	case 2:
		name := fmt.Sprintf("inserted%d", n)
		ins := progression.Stage{Name: name, After: st.After, HostSteps: []string{"deployed"},
			HostGroups: []progression.HostGroup{{Name: "g", Hosts: []string{"i1", "i2"}}}}
		st.After = []string{name}
		q.Stages = append(q.Stages, ins)
		intro[progression.HostStepEvent("deployed")] = latest
	case 3:
		if len(st.Artifacts) > 0 {
			arch := fmt.Sprintf("arch%d", n)
			st.Artifacts = append(st.Artifacts, arch)
			intro[progression.ArtifactEvent(arch)] = latest
		}
	}
	return q
}

// TestPropertiesOverRandomPipelines drives random pipelines with several
// revisions in flight, starting and finishing random subsets of the doable
// work (as concurrent workers would), failing and retrying some, and
// changing the pipeline midway. It checks:
//   - no step is handed out twice for one revision;
//   - no batch ever holds two revisions;
//   - a step is completed only when every step leading to it is complete
//     (or passed over as not new or not introduced): fan-in waits for all
//     of its inputs (for work started under the pipeline's current shape);
//   - a kind of step introduced after a revision was registered never
//     runs for it once it completed what follows that step anywhere;
//   - every revision finishes.
func TestPropertiesOverRandomPipelines(t *testing.T) {
	for seed := range uint64(400) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 4))
			p := randomPipeline(rng)
			require.NoError(t, p.Compile())
			intro := progression.Introductions{}
			var revs []progression.Revision
			nrev := 1 + rng.IntN(4)
			for i := range nrev {
				revs = append(revs, rev(fmt.Sprint(i), int64(i)))
			}
			started := make([]map[step]bool, nrev)
			for i := range started {
				started[i] = map[step]bool{}
			}
			changes := 0
			// Work under way when the pipeline changes was started under the
			// old shape; its inputs are checked against that one.
			startedBefore := map[string]bool{}
			for round := 0; ; round++ {
				require.Less(t, round, 5000, "revisions never finished")
				if changes < 2 && rng.IntN(15) == 0 {
					changes++
					for _, r := range revs {
						for s := range r.Running {
							startedBefore[r.Name+" "+s.String()] = true
						}
					}
					p = changed(rng, p, intro, int64(rng.IntN(nrev)), changes)
					require.NoError(t, p.Compile())
				}
				plan := progression.New(p, revs, intro)
				checkBatches(t, p, plan, revs)
				finished := true
				for _, rp := range plan.Revisions {
					finished = finished && rp.Finished
				}
				if finished {
					return
				}
				// Start a random part of the doable work.
				for _, w := range plan.Doable {
					i := index(revs, w.Revision)
					require.False(t, started[i][w.Step], "%s handed out twice to revision %s", w.Step, w.Revision)
					checkIntroducedSafely(t, p, intro, revs[i], w.Step)
					if rng.IntN(3) > 0 {
						started[i][w.Step] = true
						revs[i].Running[w.Step] = true
					}
				}
				// Finish (or fail, or retry) a random part of what runs.
				for i := range revs {
					for s := range revs[i].Running {
						if rng.IntN(2) == 0 {
							continue
						}
						delete(revs[i].Running, s)
						if rng.IntN(12) == 0 {
							revs[i].Failed[s] = "boom"
							continue
						}
						if !startedBefore[revs[i].Name+" "+s.String()] {
							checkInputsDone(t, p, plan, plan.Revision(revs[i].Name), s)
						}
						revs[i].Done[s] = true
					}
					for s := range revs[i].Failed {
						if rng.IntN(3) == 0 {
							delete(revs[i].Failed, s) // an operator retries: the step may be handed out again
							delete(started[i], s)
						}
					}
				}
			}
		})
	}
}

func index(revs []progression.Revision, name string) int {
	return slices.IndexFunc(revs, func(r progression.Revision) bool { return r.Name == name })
}

// checkBatches: for every batch (start, end), at most one revision has
// start under way or done and end not done, counting the work just handed
// out.
func checkBatches(t *testing.T, p *progression.Pipeline, plan *progression.Plan, revs []progression.Revision) {
	t.Helper()
	for _, s := range plan.Steps() {
		end, ok := p.BatchEnd(s)
		if !ok {
			continue
		}
		var in []string
		for _, r := range revs {
			if (r.Done[s] || r.Running[s] || r.Failed[s] != "") && !r.Done[end] {
				in = append(in, r.Name)
			}
		}
		for _, w := range plan.Doable {
			if w.Step == s && !slices.Contains(in, w.Revision) {
				in = append(in, w.Revision)
			}
		}
		require.LessOrEqual(t, len(in), 1, "batch (%s, %s) holds revisions %v", s, end, in)
	}
}

// checkInputsDone: every step with an edge into s is complete or passed
// over for the revision.
func checkInputsDone(t *testing.T, p *progression.Pipeline, plan *progression.Plan, rp *progression.RevisionPlan, s step) {
	t.Helper()
	for _, q := range plan.Steps() {
		if !slices.Contains(p.Next(q), s) || q == s {
			continue
		}
		st := plan.Status(rp, q)
		require.Contains(t, []progression.State{progression.Done, progression.NotNew, progression.NotIntroduced}, st.State,
			"%s completed for %s while its input %s is %s", s, rp.Name, q, st.State)
	}
}

// checkIntroducedSafely: s's kind, if introduced at or after r's
// registration, is handed out only while r never completed an event of the
// steps after s.
func checkIntroducedSafely(t *testing.T, p *progression.Pipeline, intro progression.Introductions, r progression.Revision, s step) {
	t.Helper()
	at, ok := intro[s.Event]
	if !ok || r.Seq > at {
		return
	}
	for _, n := range p.Next(s) {
		for d := range r.Done {
			require.NotEqual(t, n.Event, d.Event, "%s (introduced at %d) handed out to revision %s, which already did %s", s, at, r.Name, d)
		}
	}
}
