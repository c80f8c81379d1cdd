package infrarun

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Ripple makes the executions a run gains when the apply of its execution
// at source changed outputs: one per reader (a unit outside the run that
// reads source's outputs through a dependency block), waiting for source
// and for the run's other units it depends on (readers' Deps are their
// dependencies among the run's units and the other readers, as
// tgraph.DependenciesWithin gives them). Readers already in the run are
// left out: they wait for source already. ids are the run's execution ids,
// which the new ones must not repeat. Readers under no account cannot be
// placed: they are returned apart (orphans), the others are added all the
// same. Executions that would wait on each other forever are an error
// naming them; nothing is added then.
func Ripple(pr int, commit, source string, readers []Unit, run []State, ids []string, accounts []Account, rnd *rand.Rand) (specs []Spec, orphans []string, err error) {
	inRun := make(map[string]bool, len(run))
	for _, s := range run {
		inRun[s.CfgPath] = true
	}
	if !inRun[source] {
		return nil, nil, fmt.Errorf("%s is not a unit of the run", source)
	}
	// added: the readers placed in the run; an orphan is not, and no
	// other reader may wait for it.
	added := map[string]bool{}
	for _, r := range readers {
		switch {
		case inRun[r.Path] || added[r.Path] || slices.Contains(orphans, r.Path):
		case accountFor(accounts, r.Path) == nil:
			orphans = append(orphans, r.Path)
		default:
			added[r.Path] = true
		}
	}
	used := make(map[string]bool, len(ids))
	for _, id := range ids {
		used[id] = true
	}
	for _, r := range readers {
		if !added[r.Path] || slices.ContainsFunc(specs, func(s Spec) bool { return s.CfgPath == r.Path }) {
			continue
		}
		acc := accountFor(accounts, r.Path)
		id, err := uniqueID(pr, commit, acc.Name, r.Path, rnd, used)
		if err != nil {
			return nil, nil, err
		}
		deps := []string{source}
		for _, d := range r.Deps {
			if (inRun[d] || added[d]) && d != r.Path {
				deps = append(deps, d)
			}
		}
		slices.Sort(deps)
		specs = append(specs, Spec{
			ExecutionID: id, CfgPath: r.Path, CfgDeps: slices.Compact(deps), // reduced below
			Account: acc.Name, AccountPath: acc.Path, AccountDeps: slices.Clone(acc.DependsOn),
		})
	}
	reduceDeps(specs, run)
	// Only waiting executions can wait forever: one that runs or ended
	// waits for nothing any more.
	var states []State
	next := int64(0)
	for _, s := range run {
		next = max(next, s.ID+1)
		if s.Status == Waiting {
			states = append(states, s)
		}
	}
	for i, s := range specs {
		states = append(states, State{ID: next + int64(i), CfgPath: s.CfgPath, Account: s.Account, CfgDeps: s.CfgDeps, AccountDeps: s.AccountDeps, Status: Waiting})
	}
	if cycle := waitCycle(states); cycle != nil {
		return nil, orphans, fmt.Errorf("adding %s would make units wait on each other forever (directory and account dependencies): %s",
			strings.Join(paths(specs), ", "), strings.Join(cycle, " -> "))
	}
	return specs, orphans, nil
}

func paths(specs []Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.CfgPath
	}
	return out
}

// reduceDeps drops from each spec's cfg_deps those another of its deps
// already waits for, however far up (readers come with every unit they
// depend on): ec2 waits for rds, not also for the vpc rds waits for.
func reduceDeps(specs []Spec, run []State) {
	deps := map[string][]string{}
	for _, s := range run {
		deps[s.CfgPath] = s.CfgDeps
	}
	for _, s := range specs {
		deps[s.CfgPath] = s.CfgDeps
	}
	reaches := func(from, to string) bool {
		seen := map[string]bool{}
		stack := slices.Clone(deps[from])
		for len(stack) > 0 {
			d := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if d == to {
				return true
			}
			if !seen[d] {
				seen[d] = true
				stack = append(stack, deps[d]...)
			}
		}
		return false
	}
	for i := range specs {
		var kept []string
		for _, d := range specs[i].CfgDeps {
			if !slices.ContainsFunc(specs[i].CfgDeps, func(e string) bool { return e != d && reaches(e, d) }) {
				kept = append(kept, d)
			}
		}
		specs[i].CfgDeps = kept
	}
}

// Rewait makes the run's waiting executions wait for the units a ripple
// added that they depend on: below lists, for each added unit, every unit
// that depends on it however far down. A run unit that reads an added
// unit (through units outside the run) must be planned after that unit's
// apply, not alongside it. It returns the new cfg_deps by execution, or an
// error when they would make executions wait on each other forever.
func Rewait(run []State, added []Spec, below map[string][]string) (map[int64][]string, error) {
	out := map[int64][]string{}
	var states []State
	for _, s := range run {
		if s.Status != Waiting {
			continue
		}
		deps := slices.Clone(s.CfgDeps)
		for _, a := range added {
			if slices.Contains(below[a.CfgPath], s.CfgPath) && !slices.Contains(deps, a.CfgPath) {
				deps = append(deps, a.CfgPath)
			}
		}
		if len(deps) > len(s.CfgDeps) {
			slices.Sort(deps)
			out[s.ID] = deps
			s.CfgDeps = deps
		}
		states = append(states, s)
	}
	next := int64(0)
	for _, s := range run {
		next = max(next, s.ID+1)
	}
	for i, a := range added {
		states = append(states, State{ID: next + int64(i), CfgPath: a.CfgPath, Account: a.Account, CfgDeps: a.CfgDeps, AccountDeps: a.AccountDeps, Status: Waiting})
	}
	if cycle := waitCycle(states); cycle != nil {
		return nil, fmt.Errorf("waiting for %s would make units wait on each other forever (directory and account dependencies): %s",
			strings.Join(paths(added), ", "), strings.Join(cycle, " -> "))
	}
	return out, nil
}
