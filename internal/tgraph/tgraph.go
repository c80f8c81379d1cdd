// Package tgraph discovers the Terragrunt units of an infrastructure
// checkout, what each depends on and what files each reads, so that a change
// can be mapped to the units it touches and everything downstream of them.
//
// A unit is a directory with a terragrunt.hcl (or terragrunt.hcl.json) that
// no other configuration includes and .terragrunt-excludes does not list,
// or one a terragrunt.stack.hcl generates. Its dependencies come from
// dependency blocks and
// dependencies { paths }, including those inherited from included files. Its
// reads are its own directory, the files it includes (transitively),
// read_terragrunt_config and file() targets, and the directory a local
// terraform { source } copies. Paths are evaluated with the Terragrunt
// functions and locals such blocks use; whatever cannot be evaluated is an
// error naming the file and line, never a silently missing edge; such an
// error breaks its unit (Unit.Errors), not the rest of the graph.
//
// The package only reads the checkout.
package tgraph

import (
	"cmp"
	"container/heap"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Graph is the units of a checkout and their dependencies. It is immutable
// and safe for concurrent use.
type Graph struct {
	// Units sorted by path.
	Units []*Unit

	byPath     map[string]*Unit
	excluded   map[string]bool // unit directories .terragrunt-excludes leaves out
	files      map[string]bool
	dependents map[string][]string
	readers    map[string][]string // file, or directory with a trailing slash → units
	ordered    []string
	pos        map[string]int
	state      *scanState // for Update
}

// Unit is a directory Terragrunt runs in.
type Unit struct {
	// Path is the directory relative to the repository root, with forward
	// slashes ("." for the root itself).
	Path string `json:"path"`
	// Dependencies are the units this one needs applied first, sorted.
	Dependencies []string `json:"dependencies"`
	// Reads are the files this unit's configuration reads, and directories
	// (with a trailing slash) whose whole content it uses: its own
	// directory, included files, read_terragrunt_config and file() targets,
	// local module source roots. Sorted.
	Reads []string `json:"reads"`
	// Errors say why the unit's configuration could not be fully evaluated
	// (a dependency directory that does not exist, an unsupported
	// function...), sorted. A unit with errors is broken: its Dependencies
	// and Reads are only what could be evaluated, and it must not run.
	Errors []*Error `json:"-"`

	edges    []edge
	searches []*search
}

// build assembles the graph from the evaluated candidates, leaving out
// those another configuration includes.
func (s *scanner) build(candidates []*unitJob, results []*unitResult) (*Graph, []*Error) {
	included := map[string]bool{}
	for _, r := range results {
		for _, f := range r.included {
			included[f] = true
		}
	}
	g := &Graph{
		Units:      make([]*Unit, 0, len(candidates)),
		byPath:     make(map[string]*Unit, len(candidates)),
		excluded:   s.excluded,
		files:      s.files,
		dependents: make(map[string][]string, len(candidates)),
		readers:    make(map[string][]string, len(s.files)/4),
	}
	var errs []*Error
	var kept []*unitResult
	for i, j := range candidates {
		dir := j.dir
		if included[j.file] {
			continue
		}
		r := results[i]
		u := &Unit{Path: dir, Errors: slices.Clone(r.errs)} // results may be shared with an earlier graph (Update)
		g.Units = append(g.Units, u)
		g.byPath[dir] = u
		kept = append(kept, r)
	}
	for i, u := range g.Units {
		r := kept[i]
		for _, e := range r.edges {
			if g.excluded[e.to] {
				continue // as Terragrunt, which leaves it out of the run
			}
			if g.byPath[e.to] == nil {
				u.Errors = append(u.Errors, &Error{File: e.file, Line: e.line,
					Message: fmt.Sprintf("%s: %s is a configuration other files include, not a unit", e.via(), e.to)})
				continue
			}
			u.edges = append(u.edges, e)
			if !slices.Contains(u.Dependencies, e.to) {
				u.Dependencies = append(u.Dependencies, e.to)
			}
		}
		slices.Sort(u.Dependencies)
		for _, d := range u.Dependencies {
			g.dependents[d] = append(g.dependents[d], u.Path)
		}
		u.Reads = r.reads
		own := dirKey(u.Path)
		for _, f := range u.Reads {
			if f != own {
				g.readers[f] = append(g.readers[f], u.Path)
			}
		}
		for _, f := range r.probes {
			if _, read := slices.BinarySearch(u.Reads, f); !read {
				g.readers[f] = append(g.readers[f], u.Path)
			}
		}
		if len(u.Errors) > 0 {
			for i, e := range u.Errors {
				if real := s.realPath(e.File); real != e.File || strings.HasSuffix(e.File, ".json") {
					moved := *e // errors may be shared between units
					s.jsonLine(&moved)
					moved.File = real
					u.Errors[i] = &moved
				}
			}
			u.Errors = sortErrors(u.Errors)
			errs = append(errs, u.Errors...)
		}
		u.searches = r.searches
	}
	return g, errs
}

// Broken returns the units with Errors, sorted by path.
func (g *Graph) Broken() []*Unit {
	var out []*Unit
	for _, u := range g.Units {
		if len(u.Errors) > 0 {
			out = append(out, u)
		}
	}
	return out
}

// UnitsUnder returns the units at dir or below it (repository-relative,
// "." for all of them), sorted by path.
func (g *Graph) UnitsUnder(dir string) []*Unit {
	dir = cleanDir(dir)
	var out []*Unit
	for _, u := range g.Units {
		if within(u.Path, dir) {
			out = append(out, u)
		}
	}
	return out
}

// Unit returns the unit at path, or nil.
func (g *Graph) Unit(path string) *Unit { return g.byPath[path] }

// DependenciesWithin returns the units of within that path depends on,
// directly or through units outside within, sorted: its dependencies once
// the graph is cut down to within. A run that applies only some units
// still orders them as the whole graph would.
func (g *Graph) DependenciesWithin(path string, within map[string]bool) []string {
	u := g.byPath[path]
	if u == nil {
		return nil
	}
	seen := map[string]bool{path: true}
	var out []string
	stack := slices.Clone(u.Dependencies)
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[d] {
			continue
		}
		seen[d] = true
		if within[d] {
			out = append(out, d)
			continue
		}
		if du := g.byPath[d]; du != nil {
			stack = append(stack, du.Dependencies...)
		}
	}
	slices.Sort(out)
	return out
}

// Dependents returns the units that depend directly on the unit at path,
// sorted.
func (g *Graph) Dependents(path string) []string { return slices.Clone(g.dependents[path]) }

// Order returns every unit path with each unit after all of its
// dependencies; among units free to go next, the smallest path goes first.
func (g *Graph) Order() ([]string, error) {
	if g.ordered != nil {
		return slices.Clone(g.ordered), nil
	}
	return g.order()
}

// order is Kahn's algorithm with a heap for deterministic ties; on a cycle
// it reports one, at the file and line of an edge on it.
func (g *Graph) order() ([]string, error) {
	indeg := make(map[string]int, len(g.Units))
	ready := &pathHeap{}
	for _, u := range g.Units {
		indeg[u.Path] = len(u.Dependencies)
		if len(u.Dependencies) == 0 {
			*ready = append(*ready, u.Path)
		}
	}
	heap.Init(ready)
	out := make([]string, 0, len(g.Units))
	for ready.Len() > 0 {
		p := heap.Pop(ready).(string)
		out = append(out, p)
		for _, d := range g.dependents[p] {
			if indeg[d]--; indeg[d] == 0 {
				heap.Push(ready, d)
			}
		}
	}
	if len(out) < len(g.Units) {
		return nil, g.cycle()
	}
	return out, nil
}

type pathHeap []string

func (h pathHeap) Len() int           { return len(h) }
func (h pathHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h pathHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pathHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *pathHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// cycle finds the first dependency cycle in path order and describes it.
func (g *Graph) cycle() error {
	const (
		white = iota
		grey
		black
	)
	color := make(map[string]int, len(g.Units))
	var stack []string
	var found *Error
	var visit func(p string)
	visit = func(p string) {
		color[p] = grey
		stack = append(stack, p)
		u := g.byPath[p]
		for _, d := range u.Dependencies {
			if found != nil {
				return
			}
			switch color[d] {
			case grey:
				i := slices.Index(stack, d)
				loop := append(slices.Clone(stack[i:]), d)
				e := u.edgeTo(d)
				found = &Error{File: e.file, Line: e.line,
					Message: fmt.Sprintf("%s: dependency cycle: %s", e.via(), strings.Join(loop, " -> "))}
				return
			case white:
				visit(d)
			}
		}
		stack = stack[:len(stack)-1]
		color[p] = black
	}
	for _, u := range g.Units {
		if color[u.Path] == white && found == nil {
			visit(u.Path)
		}
	}
	if found == nil {
		return fmt.Errorf("dependency cycle")
	}
	return found
}

func (u *Unit) edgeTo(dep string) edge {
	for _, e := range u.edges {
		if e.to == dep {
			return e
		}
	}
	return edge{to: dep, file: path.Join(u.Path, unitFile)}
}

// Owner returns the unit a file of the checkout belongs to: the nearest
// directory at or above it that is a unit.
func (g *Graph) Owner(file string) (string, bool) {
	file = cleanRel(file)
	for d := path.Dir(file); ; d = path.Dir(d) {
		if g.byPath[d] != nil {
			return d, true
		}
		if d == "." || g.excluded[d] {
			return "", false
		}
	}
}

// searchedThrough reports whether one of u's find_in_parent_folders
// searches passed the place of file f, which was missing or is now gone:
// had f been there, the search would have stopped at it.
func (u *Unit) searchedThrough(f string) bool {
	for _, sr := range u.searches {
		dir, ok := strings.CutSuffix(f, "/"+sr.name)
		if !ok {
			if f != sr.name {
				continue
			}
			dir = "."
		}
		if !within(sr.start, dir) {
			continue
		}
		if sr.found == "" || sr.found != f && within(dir, path.Dir(sr.found)) && dir != path.Dir(sr.found) {
			return true
		}
	}
	return false
}

// within reports whether p is dir or below it (repository-relative).
func within(p, dir string) bool {
	return dir == "." || p == dir || strings.HasPrefix(p, dir+"/")
}

func cleanRel(p string) string {
	return strings.TrimPrefix(path.Clean("/"+filepath.ToSlash(p)), "/")
}

// cleanDir is cleanRel for a directory, "." for the root.
func cleanDir(dir string) string {
	if d := cleanRel(dir); d != "" {
		return d
	}
	return "."
}

// Affected is what a change to the checkout touches.
type Affected struct {
	// Changed are the units whose own or read files changed, in dependency
	// order.
	Changed []string
	// Selected are Changed plus every unit that depends on one of them,
	// transitively, in dependency order.
	Selected []string
	// Deleted are the directories whose unit the change removed (a changed
	// terragrunt.hcl that is no longer there), sorted.
	Deleted []string
	// Files maps each Changed unit to the changed files that put it there.
	Files map[string][]string
}

// Affected maps the files a change touched (added, modified or deleted,
// relative to the repository root, as git diff --name-only lists them) to
// units. The graph must be of the checkout after the change.
func (g *Graph) Affected(changedFiles []string) Affected {
	a := Affected{Files: map[string][]string{}}
	deleted := map[string]bool{}
	for _, f := range changedFiles {
		f = cleanRel(f)
		if isUnitFile(path.Base(f)) && !g.files[f] && g.byPath[path.Dir(f)] == nil && !deleted[path.Dir(f)] {
			deleted[path.Dir(f)] = true
			a.Deleted = append(a.Deleted, path.Dir(f))
		}
	}
	slices.Sort(a.Deleted)
	add := func(u, f string) {
		if !slices.Contains(a.Files[u], f) {
			a.Files[u] = append(a.Files[u], f)
		}
	}
	for _, f := range changedFiles {
		f = cleanRel(f)
		for d := path.Dir(f); ; d = path.Dir(d) {
			if deleted[d] || g.excluded[d] {
				break
			}
			if g.byPath[d] != nil {
				add(d, f)
				break
			}
			if d == "." {
				break
			}
		}
		for _, u := range g.readers[f] {
			add(u, f)
		}
		if !g.files[f] {
			for _, u := range g.Units {
				if u.searchedThrough(f) {
					add(u.Path, f)
				}
			}
		}
		for d := path.Dir(f); ; d = path.Dir(d) {
			for _, u := range g.readers[dirKey(d)] {
				add(u, f)
			}
			if d == "." {
				break
			}
		}
	}
	selected := map[string]bool{}
	var queue []string
	for u := range a.Files {
		a.Changed = append(a.Changed, u)
		selected[u] = true
		queue = append(queue, u)
	}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, d := range g.dependents[u] {
			if !selected[d] {
				selected[d] = true
				queue = append(queue, d)
			}
		}
	}
	for u := range selected {
		a.Selected = append(a.Selected, u)
	}
	byOrder := func(x, y string) int { return cmp.Compare(g.pos[x], g.pos[y]) }
	slices.SortFunc(a.Changed, byOrder)
	slices.SortFunc(a.Selected, byOrder)
	for _, fs := range a.Files {
		slices.Sort(fs)
	}
	return a
}
