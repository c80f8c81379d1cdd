package tgraph

import (
	"bufio"
	"io"
	"strings"
)

// WriteText lists the units at or below dir ("." for all of them) in
// dependency order, one a line; a unit with dependencies is followed by a
// tab, "after" and the dependencies, wherever they are. Broken units (see
// Unit.Errors) are left out; a unit depending on one still names it:
//
//	live/prod/vpc
//	live/prod/app	after live/prod/db, live/prod/vpc
func WriteText(w io.Writer, g *Graph, dir string) error {
	order, err := g.Order()
	if err != nil {
		return err
	}
	dir = cleanDir(dir)
	bw := bufio.NewWriter(w)
	for _, p := range order {
		if !within(p, dir) || len(g.byPath[p].Errors) > 0 {
			continue
		}
		bw.WriteString(p)
		if deps := g.byPath[p].Dependencies; len(deps) > 0 {
			bw.WriteString("\tafter ")
			bw.WriteString(strings.Join(deps, ", "))
		}
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// WriteDOT writes the units at or below dir ("." for all of them) for
// Graphviz. An edge points from a unit to a unit it depends on, as
// terragrunt dag graph draws it; a dependency outside dir is a node only
// through its edges. Broken units are left out, as in WriteText.
func WriteDOT(w io.Writer, g *Graph, dir string) error {
	var units []*Unit
	for _, u := range g.UnitsUnder(dir) {
		if len(u.Errors) == 0 {
			units = append(units, u)
		}
	}
	_, err := io.WriteString(w, g.dot(units))
	return err
}

// DOT is the graph in Graphviz's language, units and edges sorted by path.
func (g *Graph) DOT() string { return g.dot(g.Units) }

func (g *Graph) dot(units []*Unit) string {
	var b strings.Builder
	b.WriteString("digraph units {\n")
	for _, u := range units {
		b.WriteString("\t" + dotID(u.Path) + ";\n")
	}
	for _, u := range units {
		for _, d := range u.Dependencies {
			b.WriteString("\t" + dotID(u.Path) + " -> " + dotID(d) + ";\n")
		}
	}
	b.WriteString("}\n")
	return b.String()
}

func dotID(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}
