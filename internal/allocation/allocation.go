// Package allocation decides which environments of a pool serve an allocation
// request. It is pure: no database, no clock, no I/O. The caller loads the
// pool's environments (locking the available ones with FOR UPDATE SKIP
// LOCKED), calls Match, and persists the picks in the same transaction.
//
// The rules, in order:
//
//   - An environment matches a requirement when it has every required
//     capability with exactly the required value; an empty requirement
//     matches any environment.
//   - An allocation is all-or-nothing: one distinct available environment per
//     requirement, or none at all. Match finds an assignment whenever one
//     exists (bipartite matching with augmenting paths), also where taking
//     each requirement's favourite first would fail.
//   - Among the assignments, the preferred one spreads wear: environments
//     never released come first, then the one released longest ago, ties by
//     ID (Compare). Match returns the assignment whose set of environments is
//     best in that order: sort any other valid assignment's environments by
//     preference and each of ours is at least as preferred as theirs at the
//     same position. Identical requirements therefore get exactly the k most
//     preferred matching environments, requirement 0 the most preferred.
//   - A failure says whether waiting can help. ErrUnsatisfiableNow (HTTP 423):
//     the pool's registered environments could serve the request if they were
//     free. *NeverSatisfiableError (HTTP 400, errors.Is ErrNeverSatisfiable):
//     not even then; it names the requirement and, where one explains it, the
//     capability. Environments being deregistered do not count as registered:
//     they never come back.
package allocation

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Status is where an environment is in its lifecycle.
type Status string

// Statuses, as stored.
const (
	StatusAvailable     Status = "available"     // may be allocated
	StatusInUse         Status = "in_use"        // held by an allocation
	StatusCleaning      Status = "cleaning"      // released, cleanup running
	StatusDirty         Status = "dirty"         // cleanup failed or hung; a human must look
	StatusDeregistering Status = "deregistering" // removed from configuration, draining
)

// Environment is what the engine needs to know about one environment.
type Environment struct {
	ID             int64
	Pool           string
	Capabilities   map[string]string
	Status         Status
	LastReleasedAt time.Time // zero: never released
}

// Requirement is one environment wanted by a request.
type Requirement struct {
	Capabilities map[string]string // every key must be present with this value; empty matches any
}

// Matches reports whether e offers every capability r asks for. It ignores
// e's status.
func (r Requirement) Matches(e Environment) bool {
	for k, v := range r.Capabilities {
		if got, ok := e.Capabilities[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Compare orders environments by preference: never released first, then
// released longest ago, then by ID. It suits slices.SortFunc and is what
// "ORDER BY last_released_at ASC NULLS FIRST, id" gives in SQL.
func Compare(a, b Environment) int {
	if c := cmp.Compare(boolRank(!a.LastReleasedAt.IsZero()), boolRank(!b.LastReleasedAt.IsZero())); c != 0 {
		return c
	}
	if c := a.LastReleasedAt.Compare(b.LastReleasedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ErrUnsatisfiableNow means the pool could serve the request once enough of
// the matching environments are free again: answer 423 and let the client
// retry.
var ErrUnsatisfiableNow = errors.New("allocation: not enough matching environments are available now")

// ErrNeverSatisfiable is what a *NeverSatisfiableError matches with
// errors.Is: the pool could not serve the request even if all its
// environments were free, so retrying is pointless (400).
var ErrNeverSatisfiable = errors.New("allocation: the pool can never satisfy the request")

// NeverSatisfiableError explains why a pool can never serve a request. Field
// and Reason are ready for a 400 response; Field uses the request's JSON
// names, as the validation errors do.
type NeverSatisfiableError struct {
	// Requirement is the index of the requirement at fault.
	Requirement int
	// Capability is the capability key that no registered environment
	// offers with the wanted value; empty when no single capability explains
	// the failure.
	Capability string
	// Competing lists, when the requirements are each satisfiable alone but
	// not together, the requirements that need more distinct environments
	// than the pool has matching any of them (sorted, includes Requirement).
	Competing []int
	Field     string
	Reason    string
}

func (e *NeverSatisfiableError) Error() string {
	return "allocation: " + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrNeverSatisfiable) true.
func (e *NeverSatisfiableError) Is(target error) bool { return target == ErrNeverSatisfiable }

// Match assigns one distinct environment to each requirement and returns
// their IDs, picks[i] serving reqs[i].
//
// candidates are the environments the caller may hand out now: it holds their
// row locks. Only those with StatusAvailable are used, so a candidate list
// that is a little stale is harmless. all is every environment of the pool
// whatever its status (candidates may or may not be repeated in it); it is
// read only to explain a failure. Both must be one pool's environments.
//
// Errors: ErrUnsatisfiableNow when all could serve the request but candidates
// cannot; a *NeverSatisfiableError when all cannot either.
func Match(candidates, all []Environment, reqs []Requirement) ([]int64, error) {
	if len(reqs) == 0 {
		return nil, errors.New("allocation: a request needs at least one requirement")
	}
	g := solve(filter(candidates, func(e Environment) bool { return e.Status == StatusAvailable }), reqs)
	if g.complete() {
		picks := make([]int64, len(reqs))
		for r, e := range g.envOf {
			picks[r] = g.envs[e].ID
		}
		return picks, nil
	}
	if err := Classify(slices.Concat(all, candidates), reqs); err != nil {
		return nil, err
	}
	return nil, ErrUnsatisfiableNow
}

// Classify reports whether the pool's registered environments (all, any
// status but StatusDeregistering) could serve reqs if every one were free:
// nil when they could, else a *NeverSatisfiableError. Match calls it on
// failure; a handler may also call it before taking any lock.
func Classify(all []Environment, reqs []Requirement) error {
	g := solve(filter(all, func(e Environment) bool { return e.Status != StatusDeregistering }), reqs)
	if g.complete() {
		return nil
	}
	return g.explain()
}

func filter(envs []Environment, keep func(Environment) bool) []Environment {
	out := make([]Environment, 0, len(envs))
	seen := make(map[int64]bool, len(envs))
	for _, e := range envs {
		if keep(e) && !seen[e.ID] {
			seen[e.ID] = true
			out = append(out, e)
		}
	}
	return out
}

// graph is the bipartite graph between environments (sorted by preference)
// and requirements, with a matching.
type graph struct {
	envs  []Environment
	reqs  []Requirement
	adj   [][]int // environment → requirements it matches, ascending
	radj  [][]int // requirement → environments matching it, by preference
	reqOf []int   // environment → requirement it serves, or -1
	envOf []int   // requirement → environment serving it, or -1
	size  int
}

// solve builds the graph and runs the greedy algorithm of a transversal
// matroid: environments are offered in preference order, and each is kept
// when the kept set plus it can still be matched to distinct requirements
// (an augmenting path from it reaches a requirement not yet served). Kept
// environments stay matched, so the final set is the preference-best basis,
// and the matching is maximum, so the request is served whenever it can be.
// Cost: O(environments × requirements²).
func solve(envs []Environment, reqs []Requirement) *graph {
	envs = slices.Clone(envs)
	slices.SortFunc(envs, Compare)
	g := &graph{
		envs:  envs,
		reqs:  reqs,
		adj:   make([][]int, len(envs)),
		radj:  make([][]int, len(reqs)),
		reqOf: make([]int, len(envs)),
		envOf: make([]int, len(reqs)),
	}
	for r := range g.envOf {
		g.envOf[r] = -1
	}
	for e, env := range envs {
		g.reqOf[e] = -1
		for r, req := range reqs {
			if req.Matches(env) {
				g.adj[e] = append(g.adj[e], r)
				g.radj[r] = append(g.radj[r], e)
			}
		}
	}
	visited := make([]bool, len(reqs))
	for e := range envs {
		if g.complete() {
			break
		}
		clear(visited)
		if g.augment(e, visited) {
			g.size++
		}
	}
	return g
}

func (g *graph) complete() bool { return g.size == len(g.reqs) }

// augment looks for an alternating path from environment e (unmatched) to a
// requirement not yet served and flips it. A free requirement is taken
// directly before anyone is moved, so identical requirements keep the order
// in which they were served.
func (g *graph) augment(e int, visited []bool) bool {
	for _, r := range g.adj[e] {
		if g.envOf[r] < 0 {
			g.envOf[r], g.reqOf[e] = e, r
			return true
		}
	}
	for _, r := range g.adj[e] {
		if visited[r] {
			continue
		}
		visited[r] = true
		if g.augment(g.envOf[r], visited) {
			g.envOf[r], g.reqOf[e] = e, r
			return true
		}
	}
	return false
}

// explain turns a maximum matching that leaves requirements unserved into the
// most useful error: first a requirement no environment matches at all,
// naming the capability when one does it; otherwise a set of requirements
// that together need more environments than match any of them (Hall's
// condition, found by following alternating paths from an unserved
// requirement).
func (g *graph) explain() *NeverSatisfiableError {
	if len(g.envs) == 0 {
		return &NeverSatisfiableError{Field: "pool", Reason: "the pool has no registered environments"}
	}
	for r, envs := range g.radj {
		if len(envs) == 0 {
			return g.explainRequirement(r)
		}
	}
	first := slices.Index(g.envOf, -1)
	seenReq := map[int]bool{first: true}
	seenEnv := map[int]bool{}
	queue := []int{first}
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		for _, e := range g.radj[r] {
			if seenEnv[e] {
				continue
			}
			seenEnv[e] = true
			// e is served (the matching is maximum), so follow it back.
			if next := g.reqOf[e]; next >= 0 && !seenReq[next] {
				seenReq[next] = true
				queue = append(queue, next)
			}
		}
	}
	// Every requirement that matches only environments found above competes
	// for them too: naming them all tells "10 wanted, 4 match" rather than
	// the smallest such set.
	for r, envs := range g.radj {
		if !seenReq[r] && !slices.ContainsFunc(envs, func(e int) bool { return !seenEnv[e] }) {
			seenReq[r] = true
		}
	}
	competing := slices.Sorted(maps.Keys(seenReq))
	names := make([]string, len(competing))
	for i, r := range competing {
		names[i] = strconv.Itoa(r)
	}
	var reason string
	if len(competing) == 1 {
		// Cannot happen: a requirement with a matching environment but
		// nothing reachable would have been served. Kept for safety.
		reason = fmt.Sprintf("requirement %d cannot be served", first)
	} else {
		have := fmt.Sprintf("only %d registered environments match", len(seenEnv))
		if len(seenEnv) == 1 {
			have = "only 1 registered environment matches"
		}
		if len(competing) == len(g.reqs) {
			reason = fmt.Sprintf("the request needs %d environments, but %s it", len(competing), have)
		} else {
			reason = fmt.Sprintf("requirements %s need %d distinct environments, but %s any of them",
				strings.Join(names, ", "), len(competing), have)
		}
	}
	return &NeverSatisfiableError{Requirement: first, Competing: competing, Field: "requirements", Reason: reason}
}

// explainRequirement explains a requirement that no registered environment
// matches.
func (g *graph) explainRequirement(r int) *NeverSatisfiableError {
	want := g.reqs[r].Capabilities
	field := fmt.Sprintf("requirements[%d].capabilities", r)
	for _, k := range slices.Sorted(maps.Keys(want)) {
		offered := map[string]bool{}
		has := false
		for _, e := range g.envs {
			if v, ok := e.Capabilities[k]; ok {
				offered[v] = true
				has = has || v == want[k]
			}
		}
		if has {
			continue
		}
		reason := fmt.Sprintf("no environment in the pool has capability %q", k)
		if len(offered) > 0 {
			reason = fmt.Sprintf("no environment in the pool has %s=%q (offered: %s)", k, want[k], quoteSome(slices.Sorted(maps.Keys(offered)), 10))
		}
		return &NeverSatisfiableError{Requirement: r, Capability: k, Field: field + "." + k, Reason: reason}
	}
	pairs := make([]string, 0, len(want))
	for _, k := range slices.Sorted(maps.Keys(want)) {
		pairs = append(pairs, fmt.Sprintf("%s=%q", k, want[k]))
	}
	return &NeverSatisfiableError{
		Requirement: r,
		Field:       field,
		Reason:      "no environment in the pool has all of " + strings.Join(pairs, ", ") + " together",
	}
}

func quoteSome(values []string, limit int) string {
	parts := make([]string, 0, min(len(values), limit)+1)
	for i, v := range values {
		if i == limit {
			parts = append(parts, fmt.Sprintf("and %d more", len(values)-limit))
			break
		}
		parts = append(parts, strconv.Quote(v))
	}
	return strings.Join(parts, ", ")
}
