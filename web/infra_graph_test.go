package web

import (
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/models"
	infraview "github.com/gantryhq/gantry/views/pages/infra"
)

func infraExec(path, account string, accountDeps []string, status, step string, deps ...string) models.Execution {
	return models.Execution{ExecutionID: "x-" + strings.ReplaceAll(path, "/", "-"), CfgPath: path, AccountName: account,
		AccountDeps: accountDeps, CfgDeps: deps, Status: status, Step: step}
}

// infraSeedRun is seed 000's layout with a second account after shared and a
// unit of prod that depends on nothing in its own account.
func infraSeedRun() []models.Execution {
	shared := []string{"shared"}
	return []models.Execution{
		infraExec("live/prod/ec2", "prod", shared, models.ExecWaiting, "", "live/prod/rds"),
		infraExec("live/shared/dns", "shared", nil, models.ExecSucceeded, models.StepApplying),
		infraExec("live/prod/rds", "prod", shared, models.ExecRunning, models.StepVoting, "live/prod/vpc"),
		infraExec("live/prod/vpc", "prod", shared, models.ExecSucceeded, models.StepApplying),
		infraExec("live/staging/vpc", "staging", shared, models.ExecFailed, models.StepApplying),
		infraExec("live/staging/app", "staging", shared, models.ExecAborted, "", "live/staging/vpc"),
		infraExec("live/prod/cdn", "prod", shared, models.ExecRunning, models.StepApplying),
	}
}

type infraDrawn struct{ x, y int }

func infraNodesOf(t *testing.T, g infraview.Graph) map[string]infraDrawn {
	t.Helper()
	out := map[string]infraDrawn{}
	for _, n := range g.Nodes {
		x, err := strconv.Atoi(n.X)
		require.NoError(t, err)
		y, err := strconv.Atoi(n.Y)
		require.NoError(t, err)
		out[strings.TrimPrefix(n.ExecutionID, "x-")] = infraDrawn{x, y}
	}
	return out
}

func TestRunGraphLayersByLongestPath(t *testing.T) {
	g := infraRunGraph(infraSeedRun())
	pos := infraNodesOf(t, g)
	require.Len(t, pos, 7)
	row := func(unit string) int { return pos[strings.ReplaceAll(unit, "/", "-")].y }
	layer0, layer1, layer2, layer3 := row("live/shared/dns"), row("live/prod/vpc"), row("live/prod/rds"), row("live/prod/ec2")
	require.Less(t, layer0, layer1)
	require.Less(t, layer1, layer2)
	require.Less(t, layer2, layer3)
	require.Equal(t, layer1, row("live/staging/vpc"), "staging's first unit waits for shared only")
	require.Equal(t, layer1, row("live/prod/cdn"))
	require.Equal(t, layer2, row("live/staging/app"))

	solid, dashed := 0, 0
	for _, e := range g.Edges {
		if e.Account {
			dashed++
		} else {
			solid++
		}
	}
	require.Equal(t, 3, solid, "vpc → rds → ec2, staging vpc → app")
	require.Equal(t, 3, dashed, "dns to the first units of prod (vpc, cdn) and staging (vpc); not to those after them")
	require.True(t, g.HasAccountEdges)
	require.Contains(t, g.Label, "7 units in 4 layers")

	classes := map[string]string{}
	for _, n := range g.Nodes {
		classes[n.Label] = n.Class
	}
	require.Equal(t, "voting", classes["live/prod/rds"])
	require.Equal(t, "running", classes["live/prod/cdn"])
	require.Equal(t, "aborted", classes["live/staging/app"])
	var legend []string
	for _, c := range g.Legend {
		legend = append(legend, c.State.Class+"="+strconv.Itoa(c.N))
	}
	require.Equal(t, []string{"waiting=1", "running=1", "voting=1", "succeeded=2", "failed=1", "aborted=1"}, legend)
}

func TestRunGraphIsStable(t *testing.T) {
	want := infraRunGraph(infraSeedRun())
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20; i++ {
		xs := infraSeedRun()
		rng.Shuffle(len(xs), func(a, b int) { xs[a], xs[b] = xs[b], xs[a] })
		require.Equal(t, infraNodesOf(t, want), infraNodesOf(t, infraRunGraph(xs)), "the order the executions come in does not matter")
	}
}

func TestRunGraphEdgesGoDownAndStayInside(t *testing.T) {
	g := infraRunGraph(infraSeedRun())
	w, _ := strconv.Atoi(g.Width)
	h, _ := strconv.Atoi(g.Height)
	num := regexp.MustCompile(`-?\d+`)
	for _, e := range g.Edges {
		ns := num.FindAllString(e.Path, -1)
		require.Len(t, ns, 8, e.Path)
		y1, _ := strconv.Atoi(ns[1])
		y2, _ := strconv.Atoi(ns[7])
		require.Less(t, y1, y2, "arrows point down: %s", e.Title)
		for _, s := range ns {
			n, _ := strconv.Atoi(s)
			require.True(t, n >= 0 && n <= max(w, h), e.Path)
		}
	}
	for _, n := range g.Nodes {
		x, _ := strconv.Atoi(n.X)
		nw, _ := strconv.Atoi(n.W)
		require.LessOrEqual(t, x+nw, w)
	}
}

func TestRunGraphShortensLongPathsAndSurvivesCycles(t *testing.T) {
	long := "directory_dependency/dev-account/us-west-2/env-one/baz/with/a/very/long/path/indeed"
	xs := []models.Execution{
		infraExec(long, "dev", nil, models.ExecWaiting, "", "a"),
		infraExec("a", "dev", nil, models.ExecWaiting, "", "b"),
		infraExec("b", "dev", nil, models.ExecWaiting, "", "a"),
	}
	g := infraRunGraph(xs)
	require.Len(t, g.Nodes, 3)
	for _, n := range g.Nodes {
		if strings.HasSuffix(n.Label, "path/indeed") {
			require.True(t, strings.HasPrefix(n.Label, "…"), n.Label)
			require.Contains(t, n.Title, long, "the hover text has all of it")
		}
	}
	require.Empty(t, infraRunGraph(nil).Nodes, "a run without executions draws nothing")
}

func TestArgvText(t *testing.T) {
	require.Equal(t, "terraform -chdir={dir} plan -out={plan_file}", argvText([]string{"terraform", "-chdir={dir}", "plan", "-out={plan_file}"}))
	require.Equal(t, `sh -c 'echo "it'\''s" && exit 1' ''`, argvText([]string{"sh", "-c", `echo "it's" && exit 1`, ""}))
}
