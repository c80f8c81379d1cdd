package tgraph

import (
	"bufio"
	"io"
	"strings"
)

// WriteText lists the units in dependency order, one a line; a unit with
// dependencies is followed by a tab, "after" and the dependencies:
//
//	live/prod/vpc
//	live/prod/app	after live/prod/db, live/prod/vpc
func WriteText(w io.Writer, g *Graph) error {
	order, err := g.Order()
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	for _, p := range order {
		bw.WriteString(p)
		if deps := g.byPath[p].Dependencies; len(deps) > 0 {
			bw.WriteString("\tafter ")
			bw.WriteString(strings.Join(deps, ", "))
		}
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// WriteDOT writes the graph for Graphviz. An edge points from a unit to a
// unit it depends on, as terragrunt dag graph draws it.
func WriteDOT(w io.Writer, g *Graph) error {
	_, err := io.WriteString(w, g.DOT())
	return err
}

// DOT is the graph in Graphviz's language, units and edges sorted by path.
func (g *Graph) DOT() string {
	var b strings.Builder
	b.WriteString("digraph units {\n")
	for _, u := range g.Units {
		b.WriteString("\t" + dotID(u.Path) + ";\n")
	}
	for _, u := range g.Units {
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
