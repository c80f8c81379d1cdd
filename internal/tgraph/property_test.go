package tgraph

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// randomRepo is a generated checkout with a known graph: units with
// dependencies on earlier units, each unit with a main.tf, some including a
// shared file.
type randomRepo struct {
	files  repo
	units  []string            // in generation order, a dependency order
	deps   map[string][]string // unit → dependencies, sorted
	shared map[string][]string // shared file → units including it
}

// genRandomRepo writes n units with random dependencies on earlier ones,
// declared in random ways: dependency blocks with relative or
// get_repo_root() paths, dependencies blocks, or inherited from a shared
// included file.
func genRandomRepo(rng *rand.Rand, n int) randomRepo {
	r := randomRepo{files: repo{}, deps: map[string][]string{}, shared: map[string][]string{}}
	areas := []string{"net", "data", "apps", "apps/web", "ops"}
	for i := range n {
		u := fmt.Sprintf("%s/u%02d", areas[rng.IntN(len(areas))], i)
		r.units = append(r.units, u)
	}
	// Shared files each declaring a dependency on an early unit.
	var sharedFiles []string
	for k := range 3 {
		f := fmt.Sprintf("common/c%d.hcl", k)
		sharedFiles = append(sharedFiles, f)
	}
	for i, u := range r.units {
		var b strings.Builder
		deps := map[string]bool{}
		if i > 0 {
			for range rng.IntN(4) {
				d := r.units[rng.IntN(i)]
				deps[d] = true
				switch rng.IntN(3) {
				case 0:
					fmt.Fprintf(&b, "dependency %q {\n  config_path = %q\n}\n", fmt.Sprintf("d%d", len(deps))+strings.ReplaceAll(path.Base(d), "/", "_")+fmt.Sprint(rng.IntN(1000)), relPath("/"+u, "/"+d))
				case 1:
					fmt.Fprintf(&b, "dependency %q {\n  config_path = \"${get_repo_root()}/%s\"\n}\n", fmt.Sprintf("r%d", rng.IntN(1_000_000)), d)
				case 2:
					fmt.Fprintf(&b, "dependencies {\n  paths = [%q]\n}\n", relPath("/"+u, "/"+d))
				}
			}
		}
		// At most one dependencies block per file: merge them.
		body := mergeDependenciesBlocks(b.String())
		if rng.IntN(3) == 0 && i > 0 {
			f := sharedFiles[rng.IntN(len(sharedFiles))]
			r.shared[f] = append(r.shared[f], u)
			body = fmt.Sprintf("include \"common\" {\n  path = \"${get_repo_root()}/%s\"\n}\n", f) + body
		}
		r.files[path.Join(u, unitFile)] = body
		r.files[path.Join(u, "main.tf")] = "# " + u
		r.deps[u] = slices.Sorted(func(yield func(string) bool) {
			for d := range deps {
				if !yield(d) {
					return
				}
			}
		})
	}
	// Shared files depend on the first unit, which every includer comes
	// after.
	for _, f := range sharedFiles {
		r.files[f] = fmt.Sprintf("dependency \"first\" {\n  config_path = \"${get_repo_root()}/%s\"\n}\n", r.units[0])
		for _, u := range r.shared[f] {
			if !slices.Contains(r.deps[u], r.units[0]) {
				r.deps[u] = append(r.deps[u], r.units[0])
				slices.Sort(r.deps[u])
			}
		}
	}
	return r
}

// mergeDependenciesBlocks folds several dependencies blocks into one.
func mergeDependenciesBlocks(body string) string {
	var paths []string
	var rest []string
	for _, block := range strings.SplitAfter(body, "}\n") {
		if p, ok := strings.CutPrefix(block, "dependencies {\n  paths = ["); ok {
			paths = append(paths, strings.TrimSuffix(p, "]\n}\n"))
			continue
		}
		rest = append(rest, block)
	}
	if len(paths) > 0 {
		rest = append(rest, "dependencies {\n  paths = ["+strings.Join(paths, ", ")+"]\n}\n")
	}
	return strings.Join(rest, "")
}

// referenceOrder is Kahn's algorithm picking the smallest ready path, done
// naively.
func referenceOrder(deps map[string][]string) []string {
	done := map[string]bool{}
	var out []string
	for len(out) < len(deps) {
		var ready []string
		for u, ds := range deps {
			if done[u] {
				continue
			}
			ok := true
			for _, d := range ds {
				ok = ok && done[d]
			}
			if ok {
				ready = append(ready, u)
			}
		}
		next := slices.Min(ready)
		done[next] = true
		out = append(out, next)
	}
	return out
}

func TestPropertyRandomGraphs(t *testing.T) {
	t.Parallel()
	for seed := range uint64(60) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 7))
			r := genRandomRepo(rng, 2+rng.IntN(40))
			g := r.files.mustScan(t)

			require.Len(t, g.Units, len(r.units))
			for _, u := range r.units {
				require.Equal(t, r.deps[u], nilIfEmpty(g.Unit(u).Dependencies), u)
			}

			// Order puts every dependency before its dependents, breaking
			// ties by path.
			order, err := g.Order()
			require.NoError(t, err)
			requireDependencyOrder(t, g, order)
			require.Equal(t, referenceOrder(r.deps), order)

			// Affected: random changes, checked against a brute-force
			// closure.
			for range 10 {
				var changed []string
				want := map[string]bool{}
				for range 1 + rng.IntN(3) {
					if rng.IntN(4) == 0 && len(r.shared) > 0 {
						f := slices.Sorted(mapKeys(r.shared))[rng.IntN(len(r.shared))]
						changed = append(changed, f)
						for _, u := range r.shared[f] {
							want[u] = true
						}
						continue
					}
					u := r.units[rng.IntN(len(r.units))]
					changed = append(changed, path.Join(u, "main.tf"))
					want[u] = true
				}
				a := g.Affected(changed)
				require.ElementsMatch(t, slices.Collect(mapKeys(want)), a.Changed, "changed %v", changed)
				requireClosedUnderDependents(t, g, a)
				require.ElementsMatch(t, downstream(r.deps, want), a.Selected)
			}
		})
	}
}

func TestPropertyCycles(t *testing.T) {
	t.Parallel()
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 11))
			r := genRandomRepo(rng, 3+rng.IntN(30))
			// Close a cycle: an early unit depends on a later one that
			// (transitively) depends on it, or on itself.
			var from, to string
			for _, u := range r.units {
				for _, d := range r.deps[u] {
					from, to = d, u
				}
			}
			if from == "" {
				from, to = r.units[0], r.units[0]
			}
			f := path.Join(from, unitFile)
			r.files[f] = fmt.Sprintf("dependency \"back\" {\n  config_path = \"${get_repo_root()}/%s\"\n}\n", to) + r.files[f]
			r.deps[from] = append(r.deps[from], to)

			_, err := r.files.scan(t)
			require.Error(t, err)
			var e *Error
			require.True(t, errors.As(err, &e))
			_, loop, ok := strings.Cut(e.Message, "dependency cycle: ")
			require.True(t, ok, e.Message)
			steps := strings.Split(loop, " -> ")
			require.GreaterOrEqual(t, len(steps), 2)
			require.Equal(t, steps[0], steps[len(steps)-1], "a cycle ends where it starts")
			for i := range len(steps) - 1 {
				require.Contains(t, r.deps[steps[i]], steps[i+1], "%s -> %s is not an edge", steps[i], steps[i+1])
			}
			// The position is the declaration of an edge on the cycle.
			require.Positive(t, e.Line)
			src, ok := strings.CutSuffix(e.File, "/"+unitFile)
			if !ok {
				require.True(t, strings.HasPrefix(e.File, "common/"), e.File)
			} else {
				require.Contains(t, steps, src)
			}
		})
	}
}

// downstream is changed plus everything depending on it, transitively.
func downstream(deps map[string][]string, changed map[string]bool) []string {
	sel := map[string]bool{}
	for u := range changed {
		sel[u] = true
	}
	for grew := true; grew; {
		grew = false
		for u, ds := range deps {
			if sel[u] {
				continue
			}
			for _, d := range ds {
				if sel[d] {
					sel[u], grew = true, true
					break
				}
			}
		}
	}
	return slices.Collect(mapKeys(sel))
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
