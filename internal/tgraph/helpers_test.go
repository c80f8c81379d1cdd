package tgraph

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireDependencyOrder checks that order lists every unit once, each
// after all of its dependencies.
func requireDependencyOrder(t *testing.T, g *Graph, order []string) {
	t.Helper()
	require.Len(t, order, len(g.Units))
	pos := make(map[string]int, len(order))
	for i, p := range order {
		_, dup := pos[p]
		require.False(t, dup, "unit %s listed twice", p)
		pos[p] = i
	}
	for _, u := range g.Units {
		for _, d := range u.Dependencies {
			require.Less(t, pos[d], pos[u.Path], "%s must come after its dependency %s", u.Path, d)
		}
	}
}

// requireClosedUnderDependents checks that Selected holds Changed and every
// dependent of a selected unit, nothing more, in dependency order.
func requireClosedUnderDependents(t *testing.T, g *Graph, a Affected) {
	t.Helper()
	sel := map[string]bool{}
	for _, u := range a.Selected {
		sel[u] = true
	}
	for _, u := range a.Changed {
		require.True(t, sel[u], "changed unit %s not selected", u)
	}
	for _, u := range a.Selected {
		for _, d := range g.Dependents(u) {
			require.True(t, sel[d], "%s depends on selected %s but is not selected", d, u)
		}
		if !slices.Contains(a.Changed, u) {
			reached := false
			for _, d := range g.Unit(u).Dependencies {
				reached = reached || sel[d]
			}
			require.True(t, reached, "%s is selected but neither changed nor downstream of a selected unit", u)
		}
	}
	order, err := g.Order()
	require.NoError(t, err)
	var want []string
	for _, u := range order {
		if sel[u] {
			want = append(want, u)
		}
	}
	require.Equal(t, want, a.Selected, "Selected in dependency order")
}
