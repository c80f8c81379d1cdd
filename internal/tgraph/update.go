package tgraph

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// scanState is what a scan keeps for Update: the scanner (the checkout's
// paths and every file it parsed) and each candidate unit with its
// evaluation, in the same order.
type scanState struct {
	s       *scanner
	units   []*unitJob
	results []*unitResult
}

// Update is Scan of the checkout at dir after a change, given g, the graph
// of the checkout before it, and the files the change added, modified or
// deleted (as git diff --name-only lists them between the two commits).
// Only the changed files are read and parsed again, and only the units
// whose evaluation the change can alter (those Affected names, those
// depending on a deleted unit, the broken ones, the new ones) are evaluated
// again; the rest is taken from g, which is left as it is. A change to
// .terragrunt-excludes or a stack, or a repository with stacks, is scanned
// whole. The result, errors included, is Scan's.
func (g *Graph) Update(dir string, changed []string) (*Graph, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("scanning %s: %w", dir, err)
	}
	return g.UpdateFS(os.DirFS(abs), filepath.ToSlash(abs), changed)
}

// UpdateFS is Update for a checkout in fsys whose absolute path is root,
// as ScanFS is for Scan. The checkout may be another copy of the same
// commit than the one g was scanned from.
func (g *Graph) UpdateFS(fsys fs.FS, root string, changed []string) (*Graph, error) {
	prev := g.state
	if prev == nil || len(prev.s.stackRoots) > 0 {
		return ScanFS(fsys, root)
	}
	var files []string
	for _, f := range changed {
		f = cleanRel(f)
		if f == "" || walkSkips(f) {
			continue
		}
		if f == excludesFile || path.Base(f) == stackFile {
			return ScanFS(fsys, root)
		}
		files = append(files, f)
	}

	s := newScanner(fsys, root)
	s.files, s.dirs = maps.Clone(prev.s.files), maps.Clone(prev.s.dirs)
	s.excluded, s.excludes = prev.s.excluded, prev.s.excludes
	s.parsed, s.jsonLines = maps.Clone(prev.s.parsed), maps.Clone(prev.s.jsonLines)
	unitDirs := map[string]bool{} // directories whose unit file changed
	var modified, addedOrDeleted []string
	for _, f := range files {
		existed := s.files[f]
		delete(s.parsed, f)
		delete(s.jsonLines, f)
		info, err := fs.Stat(fsys, f)
		switch {
		case err == nil && !info.IsDir():
			if existed {
				modified = append(modified, f)
			} else {
				addedOrDeleted = append(addedOrDeleted, f)
			}
			s.files[f] = true
			for d := path.Dir(f); !s.dirs[d]; d = path.Dir(d) {
				s.dirs[d] = true
			}
		case err == nil || errors.Is(err, fs.ErrNotExist):
			addedOrDeleted = append(addedOrDeleted, f)
			delete(s.files, f)
			for d := path.Dir(f); d != "." && s.dirs[d]; d = path.Dir(d) {
				if _, err := fs.Stat(fsys, d); err == nil {
					break
				}
				delete(s.dirs, d)
			}
		default:
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		if isUnitFile(path.Base(f)) {
			unitDirs[path.Dir(f)] = true
		}
	}

	// What to evaluate again: the units reading a modified file as a file
	// (a configuration, a file() target; a file merely inside a directory
	// a unit copies changes nothing evaluated), and every unit an added or
	// deleted file can concern (through a search, a probe, a directory
	// that appears or goes).
	redo := map[string]bool{}
	for _, f := range modified {
		for _, u := range g.readers[f] {
			redo[u] = true
		}
	}
	for _, u := range g.Affected(addedOrDeleted).Changed {
		redo[u] = true
	}
	for _, u := range g.Units {
		if len(u.Errors) > 0 {
			redo[u.Path] = true
		}
	}
	for d := range unitDirs {
		redo[d] = true
		if s.unitFileIn(d) == "" {
			for _, dep := range g.dependents[d] {
				redo[dep] = true
			}
		}
	}

	// The candidates: the previous ones, less those whose unit file is
	// gone, with those whose unit file changed parsed again.
	units := make([]*unitJob, 0, len(prev.units)+len(unitDirs))
	results := make([]*unitResult, 0, cap(units))
	for i, j := range prev.units {
		if unitDirs[j.dir] {
			continue
		}
		units = append(units, j)
		results = append(results, prev.results[i])
	}
	for d := range unitDirs {
		if f := s.unitFileIn(d); f != "" && !s.excludes.match(d) {
			j := &unitJob{dir: d, file: f}
			j.c, j.errs = s.parse(f, false)
			units = append(units, j)
			results = append(results, nil)
		}
	}
	order := make([]int, len(units))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(units[a].dir, units[b].dir) })
	sortedUnits := make([]*unitJob, len(units))
	sortedResults := make([]*unitResult, len(units))
	var which []int
	for k, i := range order {
		sortedUnits[k], sortedResults[k] = units[i], results[i]
		if redo[units[i].dir] || results[i] == nil {
			sortedResults[k] = nil
			which = append(which, k)
		}
	}
	s.evalUnits(sortedUnits, which, sortedResults)
	return s.finish(sortedUnits, sortedResults)
}

// walkSkips reports whether the walk never enters a directory of p.
func walkSkips(p string) bool {
	for _, seg := range strings.Split(path.Dir(p), "/") {
		if skipDirs[seg] {
			return true
		}
	}
	return false
}
