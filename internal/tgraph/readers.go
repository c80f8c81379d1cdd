package tgraph

// OutputReaders returns the units with a dependency block on the unit at
// path, sorted: those that can read its outputs. A dependencies { paths }
// entry only orders units; it reads nothing.
func (g *Graph) OutputReaders(path string) []string {
	var out []string
	for _, d := range g.dependents[path] {
		for _, e := range g.byPath[d].edges {
			if e.to == path && e.dep != "" {
				out = append(out, d)
				break
			}
		}
	}
	return out
}
