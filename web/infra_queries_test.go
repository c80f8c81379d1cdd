package web_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/models"
)

// infraTables are the tables the infrastructure pages read.
var infraTables = regexp.MustCompile(`\b(repositories|accounts|merge_locks|pull_requests|pr_plans|runs|executions)\b`)

// infraQueryCounter counts the queries on the infrastructure tables (the
// session and user lookups of a request are left out: a cache decides
// those).
type infraQueryCounter struct{ n atomic.Int64 }

func (q *infraQueryCounter) BeforeQuery(ctx context.Context, e *bun.QueryEvent) context.Context {
	if infraTables.MatchString(e.Query) {
		q.n.Add(1)
	}
	return ctx
}

func (q *infraQueryCounter) AfterQuery(context.Context, *bun.QueryEvent) {}

// TestInfraPagesQueriesDoNotGrowWithRows: /infra, /infra/runs and a pull
// request's page read their rows in a fixed number of queries, whatever the
// number of repositories, pull requests, plans, runs and executions.
func TestInfraPagesQueriesDoNotGrowWithRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, vera, models.RoleViewer)
	br := b.browser(t)
	br.login(t, vera)
	ctx := context.Background()
	counter := &infraQueryCounter{}
	// Before any request of the test: nothing else queries meanwhile (no
	// workers run).
	b.db.Bun.AddQueryHook(counter) //nolint:staticcheck // the server holds this *bun.DB; a copy would count nothing

	merges := 0
	seed := func(repos, prsPerRepo, runsPerRepo int) {
		t.Helper()
		names := make([]string, repos)
		for i := range names {
			names[i] = fmt.Sprintf("r%d", i+1)
		}
		b.syncRepositories(t, names...)
		for _, repo := range names {
			for n := 1; n <= prsPerRepo; n++ {
				pr := &models.PullRequest{Repository: repo, Number: n, Title: "Change", BaseRef: "main", HeadSHA: fmt.Sprintf("%040d", n), State: models.PROpen}
				_, err := models.UpsertPullRequest(ctx, b.db.Bun, pr)
				require.NoError(t, err)
				_, err = models.InsertPRPlans(ctx, b.db.Bun, []*models.PRPlan{
					{Repository: repo, PRNumber: n, HeadSHA: pr.HeadSHA, Path: "live/prod/a", Status: models.PlanQueued},
					{Repository: repo, PRNumber: n, HeadSHA: pr.HeadSHA, Path: "live/prod/b", Status: models.PlanRunning},
				})
				require.NoError(t, err)
			}
			for range runsPerRepo {
				merges++
				run := &models.Run{Repository: repo, PRNumber: 1, MergeCommit: fmt.Sprintf("%040d", merges), Scan: "graph", Status: models.RunRunning}
				require.NoError(t, models.InsertRun(ctx, b.db.Bun, run))
				xs := make([]*models.Execution, 2)
				for k, status := range []string{models.ExecSucceeded, models.ExecWaiting} {
					xs[k] = &models.Execution{ExecutionID: fmt.Sprintf("x-%d-%d", run.ID, k), RunID: run.ID, CfgPath: fmt.Sprintf("live/prod/%d", k),
						CfgDeps: []string{}, AccountName: "prod", AccountDeps: []string{}, InitCommand: []string{}, PlanCommand: []string{"p"},
						ApplyCommand: []string{"a"}, Voters: []string{ada}, MinApprovalCount: 1, MinRejectionCount: 1, Status: status}
				}
				require.NoError(t, models.InsertExecutions(ctx, b.db.Bun, xs))
			}
		}
	}
	queries := func(path string) int64 {
		t.Helper()
		before := counter.n.Load()
		status, _, _ := br.get(t, path)
		require.Equal(t, http.StatusOK, status, path)
		return counter.n.Load() - before
	}
	pages := []string{"/infra", "/infra/runs", "/infra/runs?repository=r1&status=running", "/infra/r1/pulls/1"}

	seed(1, 1, 1)
	few := map[string]int64{}
	for _, p := range pages {
		few[p] = queries(p)
		require.Positive(t, few[p], p)
	}
	seed(6, 5, 12)
	for _, p := range pages {
		require.Equal(t, few[p], queries(p), "%s: the same queries for 6 repositories, 30 pull requests, 72 runs as for one of each", p)
	}
	require.LessOrEqual(t, few["/infra"], int64(6), "repositories, accounts, merge locks, pull requests, plans, runs with their counts")
	require.LessOrEqual(t, few["/infra/runs"], int64(2), "runs with their counts, repository names")
}
