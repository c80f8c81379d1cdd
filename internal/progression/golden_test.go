package progression_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/progression"
)

// Every example of seed 004 as a golden test.

type step = progression.Step

// mapGraph is a Graph written as a table, for the seed's abstract examples.
type mapGraph struct {
	root  step
	next  map[step][]step
	batch map[step]step
}

func (g mapGraph) Root() step                   { return g.root }
func (g mapGraph) Next(s step) []step           { return g.next[s] }
func (g mapGraph) BatchEnd(s step) (step, bool) { e, ok := g.batch[s]; return e, ok }

func s(name string) step { return step{Event: name, Target: "t"} }

func rev(name string, seq int64, done ...step) progression.Revision {
	r := progression.Revision{Name: name, Seq: seq, Done: map[step]bool{}, Running: map[step]bool{}, Failed: map[step]string{}}
	for _, d := range done {
		r.Done[d] = true
	}
	return r
}

// serially does one revision's work one step at a time, as the seed's loop
// does: each round plans, performs the first doable step and records it,
// together with why the frontier steps before it were skipped. Steps in
// external (artifacts, gates) are done as soon as they are doable, as if
// registered or approved at once.
func serially(t *testing.T, g progression.Graph, r progression.Revision, intro progression.Introductions) (order []step, skips []string) {
	t.Helper()
	for range 1000 {
		p := progression.New(g, []progression.Revision{r}, intro)
		rp := p.Revisions[0]
		if len(rp.Doable) == 0 {
			require.True(t, rp.Finished, "stuck with frontier %v", rp.Frontier)
			return order, skips
		}
		for _, f := range rp.Frontier {
			if f == rp.Doable[0] {
				break
			}
			skips = append(skips, fmt.Sprintf("%s: %s", f.Event, p.Status(rp, f).Why()))
		}
		r.Done[rp.Doable[0]] = true
		order = append(order, rp.Doable[0])
	}
	t.Fatal("did not finish in 1000 steps")
	return nil, nil
}

func events(steps []step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Event + " (" + s.Target + ")"
	}
	return out
}

// antGateway is the seed's simple pipeline:
//
//	[build] --> [ant-gateway/beta] -> [ant-gateway/prod]
//	                  antworker002          antworker001
func antGateway(t *testing.T, hostSteps ...string) *progression.Pipeline {
	t.Helper()
	if hostSteps == nil {
		hostSteps = []string{"artifact-replicated", "deployed"}
	}
	p := &progression.Pipeline{Name: "p1", Stages: []progression.Stage{
		{Name: "build", Artifacts: []string{"x86", "aarch64", "raspbian"}},
		{Name: "beta", After: []string{"build"}, HostSteps: hostSteps,
			HostGroups: []progression.HostGroup{{Name: "hg", Hosts: []string{"antworker002"}}}},
		{Name: "prod", After: []string{"beta"}, HostSteps: hostSteps,
			HostGroups: []progression.HostGroup{{Name: "hg", Hosts: []string{"antworker001"}}}},
	}}
	require.NoError(t, p.Compile())
	return p
}

func TestSimplePipelineWritesTheSeedsLog(t *testing.T) {
	p := antGateway(t)
	order, _ := serially(t, p, rev("version-123", 1), nil)
	// The seed's event log "before adding testing", entry for entry.
	require.Equal(t, []string{
		"pipeline-started (p1)",
		"stage-started (p1/build)",
		"build-stage-received-x86-artifact (p1/build)",
		"build-stage-received-aarch64-artifact (p1/build)",
		"build-stage-received-raspbian-artifact (p1/build)",
		"stage-finished-successfully (p1/build)",
		"stage-started (p1/beta)",
		"host-group-started (p1/beta/hg)",
		"host-started (p1/beta/hg/antworker002)",
		"host-artifact-replicated (p1/beta/hg/antworker002)",
		"host-deployed (p1/beta/hg/antworker002)",
		"host-finished-successfully (p1/beta/hg/antworker002)",
		"host-group-finished-successfully (p1/beta/hg)",
		"stage-finished-successfully (p1/beta)",
		"stage-started (p1/prod)",
		"host-group-started (p1/prod/hg)",
		"host-started (p1/prod/hg/antworker001)",
		"host-artifact-replicated (p1/prod/hg/antworker001)",
		"host-deployed (p1/prod/hg/antworker001)",
		"host-finished-successfully (p1/prod/hg/antworker001)",
		"host-group-finished-successfully (p1/prod/hg)",
		"stage-finished-successfully (p1/prod)",
		"pipeline-finished-successfully (p1)",
	}, events(order))
}

func TestBuildStageFinishesOnlyWithEveryArtifact(t *testing.T) {
	p := antGateway(t)
	build := "p1/build"
	r := rev("v1", 1, p.Root(), step{"stage-started", build}, step{"build-stage-received-x86-artifact", build})
	plan := progression.New(p, []progression.Revision{r}, nil)
	rp := plan.Revisions[0]
	require.ElementsMatch(t, []step{
		{"build-stage-received-aarch64-artifact", build}, {"build-stage-received-raspbian-artifact", build},
	}, rp.Doable, "the missing artifacts are the build's work")
	st := plan.Status(rp, step{"stage-finished-successfully", build})
	require.Equal(t, progression.NotReady, st.State, "reached through x86, but the other artifacts still lead to it")
	require.Equal(t, step{"build-stage-received-aarch64-artifact", build}, st.Cause)
}

// Gating: both beta stages before either prod.
//
//	          /--> [ant-data-farm/beta]  --\
//	[build]-|                                |--> [ant-data-farm/prod] --> [ant-on-the-web/prod]
//	          \--> [ant-on-the-web/beta] --/
func TestGatingWaitsForBothBetaStages(t *testing.T) {
	p := &progression.Pipeline{Name: "ants", Stages: []progression.Stage{
		{Name: "build"},
		{Name: "data-farm-beta", After: []string{"build"}, HostSteps: []string{"deployed"},
			HostGroups: []progression.HostGroup{{Name: "hg", Hosts: []string{"h1"}}}},
		{Name: "on-the-web-beta", After: []string{"build"}, HostSteps: []string{"deployed"},
			HostGroups: []progression.HostGroup{{Name: "hg", Hosts: []string{"h2"}}}},
		{Name: "data-farm-prod", After: []string{"data-farm-beta", "on-the-web-beta"}},
		{Name: "on-the-web-prod", After: []string{"data-farm-prod"}},
	}}
	require.NoError(t, p.Compile())
	built := rev("v1", 1, p.Root(), step{"stage-started", "ants/build"}, step{"stage-finished-successfully", "ants/build"})

	plan := progression.New(p, []progression.Revision{built}, nil)
	require.Equal(t, []step{{"stage-started", "ants/data-farm-beta"}, {"stage-started", "ants/on-the-web-beta"}},
		plan.Revisions[0].Doable, "build fans out: both beta stages start together")

	// data-farm/beta finished, on-the-web/beta still deploying.
	r := rev("v1", 1)
	for _, e := range []step{
		p.Root(), {"stage-started", "ants/build"}, {"stage-finished-successfully", "ants/build"},
		{"stage-started", "ants/data-farm-beta"}, {"host-group-started", "ants/data-farm-beta/hg"},
		{"host-started", "ants/data-farm-beta/hg/h1"}, {"host-deployed", "ants/data-farm-beta/hg/h1"},
		{"host-finished-successfully", "ants/data-farm-beta/hg/h1"}, {"host-group-finished-successfully", "ants/data-farm-beta/hg"},
		{"stage-finished-successfully", "ants/data-farm-beta"},
		{"stage-started", "ants/on-the-web-beta"}, {"host-group-started", "ants/on-the-web-beta/hg"},
		{"host-started", "ants/on-the-web-beta/hg/h2"},
	} {
		r.Done[e] = true
	}
	plan = progression.New(p, []progression.Revision{r}, nil)
	rp := plan.Revisions[0]
	prod := step{"stage-started", "ants/data-farm-prod"}
	require.Equal(t, []step{{"host-deployed", "ants/on-the-web-beta/hg/h2"}}, rp.Doable)
	require.Contains(t, rp.Frontier, prod)
	st := plan.Status(rp, prod)
	require.Equal(t, progression.NotReady, st.State)
	require.Equal(t, "not ready: waits for host-deployed@ants/on-the-web-beta/hg/h2, which leads to it", st.Why())

	order, _ := serially(t, p, r, nil)
	require.Equal(t, "stage-started (ants/data-farm-prod)", events(order)[4], "prod starts only after on-the-web/beta finished")
}

// The coalescing appendix: step1 → step2 and step1 → step3 → … → step6 →
// step2.
func TestCoalescingWorkOrder(t *testing.T) {
	g := mapGraph{root: s("step1"), next: map[step][]step{
		s("step1"): {s("step2"), s("step3")},
		s("step3"): {s("step4")},
		s("step4"): {s("step5")},
		s("step5"): {s("step6")},
		s("step6"): {s("step2")},
	}}
	order, skips := serially(t, g, rev("r", 1), nil)
	require.Equal(t, []string{"step1", "step3", "step4", "step5", "step6", "step2"}, names(order))
	require.Equal(t, "step2: not ready: waits for step3@t, which leads to it", skips[0], "the seed's 'step2 | skip; step2 in after(step3)'")
	require.Len(t, skips, 4, "step2 is skipped while step3, step4, step5 and step6 lead to it")
}

func names(steps []step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Event
	}
	return out
}

// Cycle detection: a <---> b is done once each, and the loop ends.
func TestCycleIsWalkedOnce(t *testing.T) {
	g := mapGraph{root: s("start"), next: map[step][]step{
		s("start"): {s("a")},
		s("a"):     {s("b")},
		s("b"):     {s("a")},
	}}
	order, _ := serially(t, g, rev("r", 1), nil)
	require.Equal(t, []string{"start", "a", "b"}, names(order))
	p := progression.New(g, []progression.Revision{rev("r", 1)}, nil)
	require.Equal(t, []step{s("b")}, p.After(s("a")), "the edge back to a closes the cycle and is not followed")
}

// Batching: (deploy, test) on prod holds one revision at a time, the
// oldest first.
func TestBatchDeployTestHoldsOneRevision(t *testing.T) {
	p := &progression.Pipeline{Name: "web", Stages: []progression.Stage{
		{Name: "prod", HostSteps: []string{"deployed", "tested"}, Batch: &progression.BatchSpec{First: "deployed", Last: "tested"},
			HostGroups: []progression.HostGroup{{Name: "hg", Hosts: []string{"h1"}}}},
	}}
	require.NoError(t, p.Compile())
	host := "web/prod/hg/h1"
	upToDeploy := []step{p.Root(), {"stage-started", "web/prod"}, {"host-group-started", "web/prod/hg"}, {"host-started", host}}
	deployed, tested := step{"host-deployed", host}, step{"host-tested", host}

	t.Run("both at deploy: the older takes it", func(t *testing.T) {
		v1, v2 := rev("41", 1, upToDeploy...), rev("42", 2, upToDeploy...)
		plan := progression.New(p, []progression.Revision{v2, v1}, nil)
		require.Equal(t, []progression.Work{{Revision: "41", Step: deployed}}, plan.Doable)
		st := plan.Status(plan.Revision("42"), deployed)
		require.Equal(t, "locked: revision 41 holds the batch (host-deployed@web/prod/hg/h1, host-tested@web/prod/hg/h1)", st.Why())
	})
	t.Run("v1 deploying: v2 may not start", func(t *testing.T) {
		v1, v2 := rev("41", 1, upToDeploy...), rev("42", 2, upToDeploy...)
		v1.Running[deployed] = true
		plan := progression.New(p, []progression.Revision{v1, v2}, nil)
		require.Empty(t, plan.Doable)
		require.Equal(t, progression.Locked, plan.Status(plan.Revision("42"), deployed).State)
	})
	t.Run("v1 deployed and testing: v2 may not deploy", func(t *testing.T) {
		v1, v2 := rev("41", 1, append(upToDeploy, deployed)...), rev("42", 2, upToDeploy...)
		v1.Running[tested] = true
		plan := progression.New(p, []progression.Revision{v1, v2}, nil)
		require.Empty(t, plan.Doable)
		require.Equal(t, []progression.Batch{{Start: deployed, End: tested}}, plan.Revision("41").Holds)
	})
	t.Run("v1 tested: v2 deploys", func(t *testing.T) {
		v1, v2 := rev("41", 1, append(upToDeploy, deployed, tested)...), rev("42", 2, upToDeploy...)
		plan := progression.New(p, []progression.Revision{v1, v2}, nil)
		require.Contains(t, plan.Doable, progression.Work{Revision: "42", Step: deployed})
	})
	t.Run("a newer revision holding it keeps it", func(t *testing.T) {
		v1, v2 := rev("41", 1, upToDeploy...), rev("42", 2, append(upToDeploy, deployed)...)
		plan := progression.New(p, []progression.Revision{v1, v2}, nil)
		require.Equal(t, []progression.Work{{Revision: "42", Step: tested}}, plan.Doable)
		require.Equal(t, progression.Locked, plan.Status(plan.Revision("41"), deployed).State)
	})
	t.Run("a failed step keeps its batch until retried or skipped", func(t *testing.T) {
		v1, v2 := rev("41", 1, append(upToDeploy, deployed)...), rev("42", 2, upToDeploy...)
		v1.Failed[tested] = "exit status 1"
		plan := progression.New(p, []progression.Revision{v1, v2}, nil)
		require.Empty(t, plan.Doable)
		require.Equal(t, "failed: exit status 1 (the revision waits for an operator to retry or skip it)", plan.Status(plan.Revision("41"), tested).Why())
	})
}

func TestWholeStageBatch(t *testing.T) {
	p := &progression.Pipeline{Name: "web", Stages: []progression.Stage{
		{Name: "prod", HostSteps: []string{"deployed"}, Batch: &progression.BatchSpec{},
			HostGroups: []progression.HostGroup{{Name: "hg", Hosts: []string{"h1", "h2"}}}},
	}}
	require.NoError(t, p.Compile())
	v1 := rev("1", 1, p.Root(), step{"stage-started", "web/prod"})
	v2 := rev("2", 2, p.Root())
	plan := progression.New(p, []progression.Revision{v1, v2}, nil)
	require.Equal(t, []progression.Work{{Revision: "1", Step: step{"host-group-started", "web/prod/hg"}}}, plan.Doable)
	require.Equal(t, progression.Locked, plan.Status(plan.Revision("2"), step{"stage-started", "web/prod"}).State)
}

// Introducing new workflow steps: host-tested added after host-deployed.
func TestIntroducingANewStep(t *testing.T) {
	before := antGateway(t)                                             // artifact-replicated, deployed
	after := antGateway(t, "artifact-replicated", "deployed", "tested") // host-tested added
	intro := progression.Introductions{"host-tested": 5}                // introduced when revision 5 was the latest
	betaHost, prodHost := "p1/beta/hg/antworker002", "p1/prod/hg/antworker001"
	tested := func(h string) step { return step{"host-tested", h} }

	// A log in progress under the old pipeline, up to (and including) upTo.
	logUpTo := func(name string, seq int64, upTo string) progression.Revision {
		order, _ := serially(t, before, rev(name, seq), nil)
		r := rev(name, seq)
		for _, e := range order {
			r.Done[e] = true
			if e.String() == upTo {
				break
			}
		}
		return r
	}

	t.Run("010: the next step is already done here, so the new step is passed over", func(t *testing.T) {
		r := logUpTo("4", 4, "host-finished-successfully@"+prodHost)
		plan := progression.New(after, []progression.Revision{r}, intro)
		rp := plan.Revisions[0]
		st := plan.Status(rp, tested(prodHost))
		require.Equal(t, progression.NotNew, st.State)
		require.Equal(t, "not new: host-finished-successfully@p1/prod/hg/antworker001, after it, is already done for this revision", st.Why())
		require.Equal(t, []step{{"host-group-finished-successfully", "p1/prod/hg"}}, rp.Doable, "the work deeper in the pipeline goes on")
	})
	t.Run("011, revision registered after the introduction: the new step is done", func(t *testing.T) {
		r := logUpTo("6", 6, "host-deployed@"+betaHost)
		plan := progression.New(after, []progression.Revision{r}, intro)
		require.Equal(t, []step{tested(betaHost)}, plan.Revisions[0].Doable)
	})
	t.Run("011, revision from before but it never finished a host: the new step is done", func(t *testing.T) {
		r := logUpTo("4", 4, "host-deployed@"+betaHost)
		plan := progression.New(after, []progression.Revision{r}, intro)
		require.Equal(t, []step{tested(betaHost)}, plan.Revisions[0].Doable)
	})
	t.Run("011, revision from before that finished a host elsewhere: not run first in prod", func(t *testing.T) {
		r := logUpTo("4", 4, "host-deployed@"+prodHost)
		plan := progression.New(after, []progression.Revision{r}, intro)
		rp := plan.Revisions[0]
		st := plan.Status(rp, tested(prodHost))
		require.Equal(t, progression.NotIntroduced, st.State)
		require.Equal(t, "not for this revision: host-tested was introduced after the revision reached host-finished-successfully@p1/beta/hg/antworker002", st.Why())
		require.Equal(t, []step{{"host-finished-successfully", prodHost}}, rp.Doable)
	})
	t.Run("a new revision does the whole new pipeline", func(t *testing.T) {
		order, _ := serially(t, after, rev("6", 6), intro)
		joined := strings.Join(events(order), "\n")
		require.Contains(t, joined, "host-tested ("+betaHost+")")
		require.Contains(t, joined, "host-tested ("+prodHost+")")
	})
}

func TestIntroducingHostsStagesAndArchitectures(t *testing.T) {
	base := antGateway(t)
	betaHost := "p1/beta/hg/antworker002"
	logUpTo := func(upTo string) progression.Revision {
		order, _ := serially(t, base, rev("4", 4), nil)
		r := rev("4", 4)
		for _, e := range order {
			r.Done[e] = true
			if e.String() == upTo {
				break
			}
		}
		return r
	}
	withBeta := func(hosts ...string) *progression.Pipeline {
		p := antGateway(t)
		p.Stages[1].HostGroups[0].Hosts = hosts
		require.NoError(t, p.Compile())
		return p
	}

	t.Run("a host added to a group the revision is deploying is deployed before the group finishes", func(t *testing.T) {
		p := withBeta("antworker002", "antworker003")
		r := logUpTo("host-finished-successfully@" + betaHost)
		plan := progression.New(p, []progression.Revision{r}, nil)
		rp := plan.Revisions[0]
		require.Equal(t, []step{{"host-started", "p1/beta/hg/antworker003"}}, rp.Doable)
		require.Equal(t, progression.NotReady, plan.Status(rp, step{"host-group-finished-successfully", "p1/beta/hg"}).State)
	})
	t.Run("a host added to a group the revision finished is passed over", func(t *testing.T) {
		p := withBeta("antworker002", "antworker003")
		r := logUpTo("stage-started@p1/prod")
		plan := progression.New(p, []progression.Revision{r}, nil)
		rp := plan.Revisions[0]
		require.Equal(t, progression.NotNew, plan.Status(rp, step{"host-started", "p1/beta/hg/antworker003"}).State)
		require.Equal(t, []step{{"host-group-started", "p1/prod/hg"}}, rp.Doable)
	})
	insertCanary := func() *progression.Pipeline {
		p := antGateway(t)
		p.Stages = append(p.Stages, progression.Stage{Name: "canary", After: []string{"beta"}, HostSteps: []string{"deployed"},
			HostGroups: []progression.HostGroup{{Name: "hg", Hosts: []string{"c1"}}}})
		p.Stages[2].After = []string{"canary"}
		require.NoError(t, p.Compile())
		return p
	}
	t.Run("a stage inserted before where the revision is is passed over", func(t *testing.T) {
		r := logUpTo("stage-started@p1/prod")
		plan := progression.New(insertCanary(), []progression.Revision{r}, nil)
		rp := plan.Revisions[0]
		require.Equal(t, progression.NotNew, plan.Status(rp, step{"stage-started", "p1/canary"}).State)
		require.Equal(t, []step{{"host-group-started", "p1/prod/hg"}}, rp.Doable)
	})
	t.Run("a stage inserted ahead of the revision is deployed", func(t *testing.T) {
		r := logUpTo("host-deployed@" + betaHost)
		order, _ := serially(t, insertCanary(), r, nil)
		require.Contains(t, events(order), "host-deployed (p1/canary/hg/c1)")
	})
	withRiscv := func() *progression.Pipeline {
		p := antGateway(t)
		p.Stages[0].Artifacts = append(p.Stages[0].Artifacts, "riscv")
		require.NoError(t, p.Compile())
		return p
	}
	intro := progression.Introductions{progression.ArtifactEvent("riscv"): 4}
	t.Run("an architecture added after the build finished does not hold the revision back", func(t *testing.T) {
		r := logUpTo("stage-started@p1/beta")
		plan := progression.New(withRiscv(), []progression.Revision{r}, intro)
		rp := plan.Revisions[0]
		require.Equal(t, progression.NotNew, plan.Status(rp, step{"build-stage-received-riscv-artifact", "p1/build"}).State)
		require.Equal(t, []step{{"host-group-started", "p1/beta/hg"}}, rp.Doable)
	})
	t.Run("an architecture added while the revision builds is waited for", func(t *testing.T) {
		r := logUpTo("build-stage-received-x86-artifact@p1/build")
		plan := progression.New(withRiscv(), []progression.Revision{r}, intro)
		require.Contains(t, plan.Revisions[0].Doable, step{"build-stage-received-riscv-artifact", "p1/build"})
	})
	t.Run("a removed host is no longer waited for", func(t *testing.T) {
		p := withBeta()
		r := logUpTo("host-group-started@p1/beta/hg")
		plan := progression.New(p, []progression.Revision{r}, nil)
		require.Equal(t, []step{{"host-group-finished-successfully", "p1/beta/hg"}}, plan.Revisions[0].Doable)
	})
}

func TestFailedStepBlocksItsRevisionOnly(t *testing.T) {
	p := antGateway(t)
	deployed := step{"host-deployed", "p1/beta/hg/antworker002"}
	r1 := logRev(t, p, "1", 1, "host-artifact-replicated@p1/beta/hg/antworker002")
	r1.Failed[deployed] = "exit status 3"
	r2 := rev("2", 2, p.Root())
	plan := progression.New(p, []progression.Revision{r1, r2}, nil)
	require.Equal(t, []progression.Work{{Revision: "2", Step: step{"stage-started", "p1/build"}}}, plan.Doable)
	require.Equal(t, progression.Failed, plan.Status(plan.Revision("1"), deployed).State)
}

func TestStageCycleIsNamed(t *testing.T) {
	p := &progression.Pipeline{Name: "p", Stages: []progression.Stage{
		{Name: "build"}, {Name: "a", After: []string{"build", "b"}}, {Name: "b", After: []string{"a"}},
	}}
	require.Equal(t, []string{"a", "b", "a"}, p.StageCycle())
	require.ErrorContains(t, p.Compile(), "stages form a cycle: a → b → a")
}

func logRev(t *testing.T, p progression.Graph, name string, seq int64, upTo string) progression.Revision {
	t.Helper()
	order, _ := serially(t, p, rev(name, seq), nil)
	r := rev(name, seq)
	for _, e := range order {
		r.Done[e] = true
		if e.String() == upTo {
			return r
		}
	}
	t.Fatalf("%s is not a step", upTo)
	return r
}
