package web

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/models"
	infraview "github.com/gantryhq/gantry/views/pages/infra"
)

// The picture of a run: executions in layers by their longest dependency
// path (a unit is drawn below everything it waits for), ordered within a
// layer by where their dependencies sit (fewer crossings) and then by
// account and path, so the same run always looks the same.
//
// Unit dependencies (cfg_deps) are solid arrows. An account dependency
// ("prod runs after shared") would be an arrow from every execution of
// shared to every one of prod; instead it is drawn as dashed arrows from the
// last executions of shared (those nothing else of shared waits for) to the
// first ones of prod (those that wait for nothing else of prod), which is
// what the ordering comes down to.
const (
	infraGraphPad      = 12
	infraGraphGapX     = 28
	infraGraphGapY     = 52
	infraGraphNodeH    = 46
	infraGraphCharW    = 7.2 // the labels' monospace advance at 12px
	infraGraphMinNodeW = 170
	infraGraphMaxNodeW = 300
	infraGraphTextPad  = 10
)

// infraGraphLegend names the graph's colours: running covers planning and
// applying (the nodes say which); voting stands apart, as it waits for people.
var infraGraphLegend = map[string]string{
	"waiting": "waiting", "running": "planning or applying", "voting": "waiting for votes",
	"succeeded": "succeeded", "failed": "failed", "aborted": "aborted",
}

// infraGraphEdge is a dependency between two executions, by index.
type infraGraphEdge struct {
	from, to int
	account  bool
}

// infraRunGraph lays out a run's executions for the run page.
func infraRunGraph(xs []models.Execution) infraview.Graph {
	n := len(xs)
	byPath := make(map[string]int, n)
	for i := range xs {
		byPath[xs[i].CfgPath] = i
	}
	edges := infraGraphEdges(xs, byPath)
	layer := infraGraphLayers(n, edges)
	order := infraGraphOrder(xs, edges, layer)

	// The node width fits the longest label, within bounds; longer paths
	// are shortened from the left (the leaf directories say the most).
	longest := 0
	for i := range xs {
		longest = max(longest, len([]rune(xs[i].CfgPath)), len([]rune(infraGraphNodeSub(&xs[i]))))
	}
	nodeW := int(math.Ceil(float64(longest)*infraGraphCharW)) + 2*infraGraphTextPad
	nodeW = min(max(nodeW, infraGraphMinNodeW), infraGraphMaxNodeW)
	maxChars := int(float64(nodeW-2*infraGraphTextPad) / infraGraphCharW)

	widest := 0
	for _, row := range order {
		widest = max(widest, len(row))
	}
	width := 2*infraGraphPad + widest*nodeW + max(widest-1, 0)*infraGraphGapX
	height := 2*infraGraphPad + len(order)*infraGraphNodeH + max(len(order)-1, 0)*infraGraphGapY
	type point struct{ x, y int }
	pos := make([]point, n)
	for l, row := range order {
		rowW := len(row)*nodeW + max(len(row)-1, 0)*infraGraphGapX
		left := infraGraphPad + (width-2*infraGraphPad-rowW)/2
		for k, i := range row {
			pos[i] = point{left + k*(nodeW+infraGraphGapX), infraGraphPad + l*(infraGraphNodeH+infraGraphGapY)}
		}
	}

	g := infraview.Graph{Width: strconv.Itoa(width), Height: strconv.Itoa(height)}
	counts := map[string]int{}
	var classes []infraview.State
	for _, row := range order {
		for _, i := range row {
			x := &xs[i]
			st := infraExecState(x)
			if counts[st.Class] == 0 {
				classes = append(classes, infraview.State{Text: infraGraphLegend[st.Class], Tone: st.Tone, Class: st.Class})
			}
			counts[st.Class]++
			p := pos[i]
			g.Nodes = append(g.Nodes, infraview.Node{
				ExecutionID: x.ExecutionID, URL: pageurl.Execution(x.ExecutionID),
				X: strconv.Itoa(p.x), Y: strconv.Itoa(p.y), W: strconv.Itoa(nodeW), H: strconv.Itoa(infraGraphNodeH),
				TextX: strconv.Itoa(p.x + infraGraphTextPad), LabelY: strconv.Itoa(p.y + 19), SubY: strconv.Itoa(p.y + 36),
				Label: shortenLeft(x.CfgPath, maxChars), Sub: shortenLeft(infraGraphNodeSub(x), maxChars),
				Title: fmt.Sprintf("%s (account %s): %s\n%s", x.CfgPath, x.AccountName, st.Text, x.ExecutionID),
				Class: st.Class,
			})
		}
	}
	slices.SortStableFunc(classes, func(a, b infraview.State) int { return cmp.Compare(infraStateRank(a.Class), infraStateRank(b.Class)) })
	var parts []string
	for _, st := range classes {
		g.Legend = append(g.Legend, infraview.Count{State: st, N: counts[st.Class]})
		parts = append(parts, fmt.Sprintf("%d %s", counts[st.Class], st.Text))
	}
	g.Label = fmt.Sprintf("Execution graph of %s in %s: %s", plural(n, "unit", "units"), plural(len(order), "layer", "layers"), strings.Join(parts, ", "))
	for _, e := range edges {
		from, to := pos[e.from], pos[e.to]
		x1, y1 := from.x+nodeW/2, from.y+infraGraphNodeH
		x2, y2 := to.x+nodeW/2, to.y-2
		bend := infraGraphGapY / 2
		edge := infraview.Edge{
			Path:    fmt.Sprintf("M %d %d C %d %d, %d %d, %d %d", x1, y1, x1, y1+bend, x2, y2-bend, x2, y2),
			Account: e.account,
			Title:   fmt.Sprintf("%s runs after %s", xs[e.to].CfgPath, xs[e.from].CfgPath),
		}
		if e.account {
			edge.Title = fmt.Sprintf("account %s runs after account %s: %s waits for %s", xs[e.to].AccountName, xs[e.from].AccountName, xs[e.to].CfgPath, xs[e.from].CfgPath)
			g.HasAccountEdges = true
		}
		g.Edges = append(g.Edges, edge)
	}
	return g
}

// infraGraphEdges are the run's unit dependencies and, for account
// dependencies, the representative edges described above.
func infraGraphEdges(xs []models.Execution, byPath map[string]int) []infraGraphEdge {
	var edges []infraGraphEdge
	preds := make([][]int, len(xs))
	succs := make([][]int, len(xs))
	for i := range xs {
		for _, d := range xs[i].CfgDeps {
			if j, ok := byPath[d]; ok && j != i {
				edges = append(edges, infraGraphEdge{from: j, to: i})
				preds[i] = append(preds[i], j)
				succs[j] = append(succs[j], i)
			}
		}
	}
	byAccount := map[string][]int{}
	for i := range xs {
		byAccount[xs[i].AccountName] = append(byAccount[xs[i].AccountName], i)
	}
	sameAccount := func(i int, list []int) bool {
		return slices.ContainsFunc(list, func(j int) bool { return xs[j].AccountName == xs[i].AccountName })
	}
	for i := range xs {
		if len(xs[i].AccountDeps) == 0 || sameAccount(i, preds[i]) {
			continue // an execution of its own account before it carries the wait
		}
		for _, acc := range xs[i].AccountDeps {
			for _, j := range byAccount[acc] {
				if !sameAccount(j, succs[j]) {
					edges = append(edges, infraGraphEdge{from: j, to: i, account: true})
				}
			}
		}
	}
	return edges
}

// infraGraphLayers gives each node the length of the longest path to it.
// Nodes on a cycle (which the run engine never makes) go below the rest.
func infraGraphLayers(n int, edges []infraGraphEdge) []int {
	indeg := make([]int, n)
	out := make([][]int, n)
	for _, e := range edges {
		indeg[e.to]++
		out[e.from] = append(out[e.from], e.to)
	}
	layer := make([]int, n)
	var queue []int
	for i := 0; i < n; i++ {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	done := 0
	deepest := 0
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		done++
		deepest = max(deepest, layer[i])
		for _, j := range out[i] {
			layer[j] = max(layer[j], layer[i]+1)
			if indeg[j]--; indeg[j] == 0 {
				queue = append(queue, j)
			}
		}
	}
	if done < n {
		for i := 0; i < n; i++ {
			if indeg[i] > 0 {
				layer[i] = deepest + 1
			}
		}
	}
	return layer
}

// infraGraphOrder sorts each layer: by the mean position of a node's
// dependencies in the layers above, then by account and path.
func infraGraphOrder(xs []models.Execution, edges []infraGraphEdge, layer []int) [][]int {
	depth := 0
	for _, l := range layer {
		depth = max(depth, l+1)
	}
	rows := make([][]int, depth)
	for i, l := range layer {
		rows[l] = append(rows[l], i)
	}
	preds := make([][]int, len(xs))
	for _, e := range edges {
		preds[e.to] = append(preds[e.to], e.from)
	}
	position := make([]float64, len(xs))
	for _, row := range rows {
		weight := make(map[int]float64, len(row))
		for _, i := range row {
			if len(preds[i]) == 0 {
				weight[i] = math.Inf(-1) // roots first, then by name
				continue
			}
			sum := 0.0
			for _, p := range preds[i] {
				sum += position[p]
			}
			weight[i] = sum / float64(len(preds[i]))
		}
		slices.SortStableFunc(row, func(a, b int) int {
			if c := cmp.Compare(weight[a], weight[b]); c != 0 {
				return c
			}
			if c := cmp.Compare(xs[a].AccountName, xs[b].AccountName); c != 0 {
				return c
			}
			return cmp.Compare(xs[a].CfgPath, xs[b].CfgPath)
		})
		for k, i := range row {
			// Centred like the drawing, so layers of different widths compare.
			position[i] = float64(k) - float64(len(row)-1)/2
		}
	}
	return rows
}

// infraGraphNodeSub is a node's second line: the account and where it stands.
func infraGraphNodeSub(x *models.Execution) string {
	return x.AccountName + " · " + infraExecState(x).Text
}
