// Package infrarun is the engine of a deployment run (seed 000): which
// executions a merged pull request makes, and, as executions finish, which
// start next, which are aborted and when the run is over. It does no I/O;
// the infra service feeds it rows and writes back what it decides.
package infrarun

import (
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
)

// Execution statuses, as the seed names them.
const (
	Waiting   = "waiting"
	Running   = "running"
	Succeeded = "succeeded"
	Failed    = "failed"
	Aborted   = "aborted"
)

// Account is the part of a repository's account the engine needs.
type Account struct {
	Name      string
	Path      string // directory prefix of its units
	DependsOn []string
}

// Unit is a collected unit and the units it depends on (any, collected or not).
type Unit struct {
	Path string
	Deps []string
}

// Spec is an execution to create.
type Spec struct {
	ExecutionID string
	CfgPath     string
	CfgDeps     []string // collected units only
	Account     string
	AccountPath string
	AccountDeps []string
}

// Plan makes one execution per collected unit. cfg_deps are restricted to
// the collected units; account_deps are the account's depends_on. A unit
// under no account, or dependencies that together with the accounts'
// would wait on each other forever, are errors naming the units.
func Plan(pr int, commit string, units []Unit, accounts []Account, rnd *rand.Rand) ([]Spec, error) {
	collected := make(map[string]bool, len(units))
	for _, u := range units {
		collected[u.Path] = true
	}
	specs := make([]Spec, 0, len(units))
	var orphans []string
	used := make(map[string]bool, len(units))
	for _, u := range units {
		acc := accountFor(accounts, u.Path)
		if acc == nil {
			orphans = append(orphans, u.Path)
			continue
		}
		id, err := uniqueID(pr, commit, acc.Name, u.Path, rnd, used)
		if err != nil {
			return nil, err
		}
		var deps []string
		for _, d := range u.Deps {
			if collected[d] && d != u.Path {
				deps = append(deps, d)
			}
		}
		slices.Sort(deps)
		specs = append(specs, Spec{
			ExecutionID: id,
			CfgPath:     u.Path,
			CfgDeps:     slices.Compact(deps),
			Account:     acc.Name,
			AccountPath: acc.Path,
			AccountDeps: slices.Clone(acc.DependsOn),
		})
	}
	if len(orphans) > 0 {
		return nil, fmt.Errorf("no account's path contains %s: add an account for it in gantry.yaml", strings.Join(orphans, ", "))
	}
	states := make([]State, len(specs))
	for i, s := range specs {
		states[i] = State{ID: int64(i), CfgPath: s.CfgPath, Account: s.Account, CfgDeps: s.CfgDeps, AccountDeps: s.AccountDeps, Status: Waiting}
	}
	if cycle := waitCycle(states); cycle != nil {
		return nil, fmt.Errorf("these units would wait on each other forever (directory and account dependencies): %s", strings.Join(cycle, " -> "))
	}
	return specs, nil
}

// uniqueID draws an execution id whose three random digits no other
// execution of the run has: units with the same leaf name in one account
// (live/prod/<region>/vpc) would otherwise collide often.
func uniqueID(pr int, commit, account, cfgPath string, rnd *rand.Rand, used map[string]bool) (string, error) {
	start := rnd.IntN(1000)
	for i := range 1000 {
		id := ExecutionID(pr, commit, account, cfgPath, (start+i*7919)%1000)
		if !used[id] {
			used[id] = true
			return id, nil
		}
	}
	return "", fmt.Errorf("more than 1000 units named %s in account %s: the seed's execution ids (three digits) run out", path.Base(cfgPath), account)
}

// ExecutionID is the seed's id: run-{pr}-{commit[:4]}-{account}-{leaf}-{nnn}.
func ExecutionID(pr int, commit, account, cfgPath string, n int) string {
	short := commit
	if len(short) > 4 {
		short = short[:4]
	}
	return fmt.Sprintf("run-%d-%s-%s-%s-%03d", pr, short, account, path.Base(cfgPath), n%1000)
}

func accountFor(accounts []Account, dir string) *Account {
	paths := make([]string, len(accounts))
	for i, a := range accounts {
		paths[i] = a.Path
	}
	if i := AccountIndex(paths, dir); i >= 0 {
		return &accounts[i]
	}
	return nil
}

// AccountIndex returns the index of the account path that contains dir
// (whole directories: live/prod/ does not contain live/production), the
// longest when several do, or -1.
func AccountIndex(paths []string, dir string) int {
	best := -1
	for i, p := range paths {
		prefix := strings.TrimSuffix(p, "/") + "/"
		if strings.HasPrefix(dir+"/", prefix) && (best < 0 || len(p) > len(paths[best])) {
			best = i
		}
	}
	return best
}

// State is an execution as the engine sees it.
type State struct {
	ID          int64
	CfgPath     string
	Account     string
	CfgDeps     []string
	AccountDeps []string
	Status      string
	// NewResources is set on an execution whose apply recorded resources
	// of new providers: a failed run rolls it back.
	NewResources bool
	// RollbackOf marks a rollback execution (0: not one): the execution
	// whose new provider resources it destroys. A rollback carries the
	// cfg_deps and account_deps of that execution.
	RollbackOf int64
	// Resolved is set on a failed rollback an operator marked resolved.
	Resolved bool
}

// Step is what to do now.
type Step struct {
	Start []int64 // waiting executions whose dependencies all succeeded
	Abort []int64 // waiting executions with a failed or aborted dependency, however far up
	Done  bool    // nothing waits or runs (after Start and Abort)
	// Succeeded is set with Done when every execution succeeded (a failed
	// rollback marked resolved counts as done, not as succeeded).
	Succeeded bool
	// RollBack are the executions to make rollbacks of now: the run's
	// executions ended, not all succeeded, and these recorded new
	// provider resources and have no rollback yet.
	RollBack []int64
	// Held are failed rollbacks that wait for an operator (retry or mark
	// resolved): they are never retried on their own, and the rollbacks
	// waiting for them wait too.
	Held []int64
}

// Next decides what follows the executions' current states. An execution
// waits on the executions of its cfg_deps and on every execution of the
// accounts in its account_deps. Rollbacks begin once the other executions
// have all ended, in reverse order: a rollback waits for the rollbacks of
// the executions that waited on the one it rolls back.
func Next(states []State) Step {
	var forward, rollbacks []State
	for _, s := range states {
		if s.RollbackOf != 0 {
			rollbacks = append(rollbacks, s)
		} else {
			forward = append(forward, s)
		}
	}
	step := next(forward)
	if !step.Done {
		return step
	}
	if !step.Succeeded {
		made := make(map[int64]bool, len(rollbacks))
		for _, r := range rollbacks {
			made[r.RollbackOf] = true
		}
		for _, s := range forward {
			if s.NewResources && !made[s.ID] {
				step.RollBack = append(step.RollBack, s.ID)
			}
		}
		if len(step.RollBack) > 0 {
			step.Done = false
			return step
		}
	}
	back := nextRollbacks(rollbacks)
	step.Start, step.Held = back.Start, back.Held
	step.Done = back.Done
	step.Succeeded = step.Succeeded && back.Succeeded
	if !step.Done {
		step.Succeeded = false
	}
	return step
}

// nextRollbacks is Next for the rollbacks alone, once the other
// executions have ended.
func nextRollbacks(rollbacks []State) Step {
	waitsOn := rollbackOrder(rollbacks)
	byID := make(map[int64]State, len(rollbacks))
	for _, r := range rollbacks {
		byID[r.ID] = r
	}
	done := func(r State) bool {
		return r.Status == Succeeded || r.Status == Aborted || (r.Status == Failed && r.Resolved)
	}
	step := Step{Done: true, Succeeded: true}
	for _, r := range rollbacks {
		switch {
		case r.Status == Waiting:
			step.Done = false
			ready := true
			for _, w := range waitsOn[r.ID] {
				if !done(byID[w]) {
					ready = false
					break
				}
			}
			if ready {
				step.Start = append(step.Start, r.ID)
			}
		case r.Status == Running:
			step.Done = false
		case r.Status == Failed && !r.Resolved:
			step.Done = false
			step.Held = append(step.Held, r.ID)
		case r.Status != Succeeded:
			step.Succeeded = false
		}
	}
	if !step.Done {
		step.Succeeded = false
	}
	return step
}

// next is Next for the executions that are not rollbacks.
func next(states []State) Step {
	status := make(map[int64]string, len(states))
	for _, s := range states {
		status[s.ID] = s.Status
	}
	deps := dependencies(states)
	var step Step
	// Aborts spread down the graph; repeat until nothing changes.
	for changed := true; changed; {
		changed = false
		for _, s := range states {
			if status[s.ID] != Waiting {
				continue
			}
			for _, d := range deps[s.ID] {
				if st := status[d]; st == Failed || st == Aborted {
					status[s.ID] = Aborted
					step.Abort = append(step.Abort, s.ID)
					changed = true
					break
				}
			}
		}
	}
	for _, s := range states {
		if status[s.ID] != Waiting {
			continue
		}
		ready := true
		for _, d := range deps[s.ID] {
			if status[d] != Succeeded {
				ready = false
				break
			}
		}
		if ready {
			step.Start = append(step.Start, s.ID)
		}
	}
	if len(step.Start) > 0 {
		return step
	}
	step.Done, step.Succeeded = true, true
	for _, s := range states {
		switch status[s.ID] {
		case Waiting, Running:
			step.Done, step.Succeeded = false, false
		case Failed, Aborted:
			step.Succeeded = false
		}
	}
	if !step.Done {
		step.Succeeded = false
	}
	return step
}

// dependencies resolves every execution's cfg_deps and account_deps to
// the executions it waits on.
func dependencies(states []State) map[int64][]int64 {
	byPath := make(map[string]int64, len(states))
	byAccount := map[string][]int64{}
	for _, s := range states {
		byPath[s.CfgPath] = s.ID
		byAccount[s.Account] = append(byAccount[s.Account], s.ID)
	}
	deps := make(map[int64][]int64, len(states))
	for _, s := range states {
		var ds []int64
		for _, p := range s.CfgDeps {
			if id, ok := byPath[p]; ok && id != s.ID {
				ds = append(ds, id)
			}
		}
		for _, a := range s.AccountDeps {
			if a != s.Account {
				ds = append(ds, byAccount[a]...)
			}
		}
		deps[s.ID] = ds
	}
	return deps
}

// waitCycle returns the paths of a cycle of waiting executions, or nil.
func waitCycle(states []State) []string {
	deps := dependencies(states)
	pathOf := make(map[int64]string, len(states))
	for _, s := range states {
		pathOf[s.ID] = s.CfgPath
	}
	mark := map[int64]int{}
	var stack []int64
	var visit func(id int64) []string
	visit = func(id int64) []string {
		mark[id] = 1
		stack = append(stack, id)
		for _, d := range deps[id] {
			switch mark[d] {
			case 1:
				i := slices.Index(stack, d)
				var cycle []string
				for _, x := range stack[i:] {
					cycle = append(cycle, pathOf[x])
				}
				return append(cycle, pathOf[d])
			case 0:
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		mark[id] = 2
		return nil
	}
	for _, s := range states {
		if mark[s.ID] == 0 {
			if c := visit(s.ID); c != nil {
				return c
			}
		}
	}
	return nil
}

// rollbackOrder is what each rollback waits on: r waits on the rollbacks
// of the units that depended on the one r rolls back (its dependencies,
// reversed: an execution whose cfg_deps name r's unit, or whose account
// depends on r's), and rollbacks of one unit (several runs' resources) go
// newest first. Rollbacks of units a merge deleted carry the dependencies
// of the runs that applied them, which may disagree (u2 read u1 in one
// run, u1 read u2 in a later one); when the order they give has a cycle,
// every rollback of the run goes one at a time, newest first, so that
// something can always start.
func rollbackOrder(rollbacks []State) map[int64][]int64 {
	waitsOn := rollbackDeps(rollbacks)
	if !cyclic(rollbacks, waitsOn) {
		return waitsOn
	}
	for _, r := range rollbacks {
		waitsOn[r.ID] = nil
		for _, o := range rollbacks {
			if o.RollbackOf > r.RollbackOf || (o.RollbackOf == r.RollbackOf && o.ID > r.ID) {
				waitsOn[r.ID] = append(waitsOn[r.ID], o.ID)
			}
		}
	}
	return waitsOn
}

// RollbacksInTurn reports whether a run's rollbacks go one at a time,
// newest first, because their runs' dependencies disagree (rollbackOrder).
func RollbacksInTurn(rollbacks []State) bool {
	return cyclic(rollbacks, rollbackDeps(rollbacks))
}

// rollbackDeps is the order of rollbacks from their dependencies and,
// for one unit, newest first.
func rollbackDeps(rollbacks []State) map[int64][]int64 {
	waitsOn := make(map[int64][]int64, len(rollbacks))
	for _, r := range rollbacks {
		for _, o := range rollbacks {
			switch {
			case o.ID == r.ID:
			case o.CfgPath == r.CfgPath:
				if o.RollbackOf > r.RollbackOf {
					waitsOn[r.ID] = append(waitsOn[r.ID], o.ID)
				}
			case slices.Contains(o.CfgDeps, r.CfgPath), o.Account != r.Account && slices.Contains(o.AccountDeps, r.Account):
				waitsOn[r.ID] = append(waitsOn[r.ID], o.ID)
			}
		}
	}
	return waitsOn
}

// cyclic reports whether edges (from each state's id) have a cycle.
func cyclic(states []State, edges map[int64][]int64) bool {
	mark := make(map[int64]int, len(states)) // 1: on the path, 2: done
	var visit func(id int64) bool
	visit = func(id int64) bool {
		mark[id] = 1
		for _, d := range edges[id] {
			if mark[d] == 1 || (mark[d] == 0 && visit(d)) {
				return true
			}
		}
		mark[id] = 2
		return false
	}
	for _, s := range states {
		if mark[s.ID] == 0 && visit(s.ID) {
			return true
		}
	}
	return false
}
