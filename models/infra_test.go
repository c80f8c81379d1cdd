package models_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/models"
)

func insertRepository(t *testing.T, db *models.DB, name string) {
	t.Helper()
	require.NoError(t, models.UpsertRepository(context.Background(), db.Bun, &models.Repository{
		Name: name, URL: "https://git.example.com/" + name + ".git", Trunk: "main", Scan: "graph", WebhookSecretEnv: "SECRET",
		InitCommand: []string{}, PlanCommand: []string{"plan"}, ApplyCommand: []string{"apply"}, DestroyCommand: []string{},
		Accounts: []models.Account{{Name: "prod", Path: "live/prod/", DependsOn: []string{}, Voters: []string{"ada@example.com"}, MinApprovals: 1, MinRejections: 1}},
	}))
}

func insertExecutions(t *testing.T, db *models.DB, run *models.Run, statuses ...string) {
	t.Helper()
	xs := make([]*models.Execution, len(statuses))
	for i, status := range statuses {
		xs[i] = &models.Execution{ExecutionID: fmt.Sprintf("x-%d-%d", run.ID, i), RunID: run.ID, CfgPath: fmt.Sprintf("live/prod/%d", i),
			CfgDeps: []string{}, AccountName: "prod", AccountDeps: []string{}, InitCommand: []string{}, PlanCommand: []string{"plan"},
			ApplyCommand: []string{"apply"}, Voters: []string{"ada@example.com"}, MinApprovalCount: 1, MinRejectionCount: 1, Status: status}
	}
	require.NoError(t, models.InsertExecutions(context.Background(), db.Bun, xs))
}

// TestInfraReadModels: what the infrastructure pages read is filtered and
// paged by the database, and comes with what each row shows.
func TestInfraReadModels(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	insertRepository(t, db, "live")
	insertRepository(t, db, "network")
	insertRepository(t, db, "gone")

	// Runs 1..30: live, every third one of network; every fourth failed.
	var runs []*models.Run
	for i := 1; i <= 30; i++ {
		repo, status := "live", models.RunSucceeded
		if i%3 == 0 {
			repo = "network"
		}
		if i%4 == 0 {
			status = models.RunFailed
		}
		r := &models.Run{Repository: repo, PRNumber: 100 + i%5, MergeCommit: fmt.Sprintf("%040d", i), Scan: "graph", Status: status}
		require.NoError(t, models.InsertRun(ctx, db.Bun, r))
		runs = append(runs, r)
	}
	gone := &models.Run{Repository: "gone", PRNumber: 1, MergeCommit: "g", Scan: "graph", Status: models.RunRunning}
	require.NoError(t, models.InsertRun(ctx, db.Bun, gone))
	insertExecutions(t, db, runs[29], models.ExecSucceeded, models.ExecSucceeded, models.ExecFailed, models.ExecAborted)
	insertExecutions(t, db, gone, models.ExecRunning)
	locked, err := models.TakeMergeLock(ctx, db.Bun, gone)
	require.NoError(t, err)
	require.True(t, locked)
	_, err = models.RemoveRepositoriesExcept(ctx, db.Bun, []string{"live", "network"})
	require.NoError(t, err)

	ids := func(p models.RunPage) []int64 {
		var out []int64
		for _, r := range p.Runs {
			out = append(out, r.ID)
		}
		return out
	}

	t.Run("runs are paged newest first, with one query saying whether there are more", func(t *testing.T) {
		p, err := models.ListRunPage(ctx, db.Bun, models.RunFilter{Limit: 10})
		require.NoError(t, err)
		require.Len(t, p.Runs, 10)
		require.True(t, p.More)
		require.Equal(t, gone.ID, p.Runs[0].ID)
		last := p.Runs[9].ID
		var seen []int64
		for before := last; ; {
			next, err := models.ListRunPage(ctx, db.Bun, models.RunFilter{Limit: 10, BeforeID: before})
			require.NoError(t, err)
			seen = append(seen, ids(next)...)
			if !next.More {
				break
			}
			before = next.Runs[len(next.Runs)-1].ID
		}
		require.Len(t, seen, 21, "the rest, without gaps or repeats")
		require.Equal(t, runs[0].ID, seen[len(seen)-1])
	})

	t.Run("runs carry their executions counted by status", func(t *testing.T) {
		p, err := models.ListRunPage(ctx, db.Bun, models.RunFilter{Limit: 2})
		require.NoError(t, err)
		require.Equal(t, map[string]int{models.ExecRunning: 1}, p.Runs[0].ExecutionCounts)
		require.Equal(t, map[string]int{models.ExecSucceeded: 2, models.ExecFailed: 1, models.ExecAborted: 1}, p.Runs[1].ExecutionCounts)
		require.Equal(t, "network", p.Runs[1].Repository, "the run's own columns come with its counts")
		p, err = models.ListRunPage(ctx, db.Bun, models.RunFilter{Limit: 5, BeforeID: runs[29].ID})
		require.NoError(t, err)
		require.Empty(t, p.Runs[0].ExecutionCounts, "a run without executions counts none")
	})

	t.Run("runs are filtered by the database", func(t *testing.T) {
		p, err := models.ListRunPage(ctx, db.Bun, models.RunFilter{Repository: "network", Status: models.RunFailed, Limit: 50})
		require.NoError(t, err)
		require.Equal(t, []int64{runs[23].ID, runs[11].ID}, ids(p))
		require.False(t, p.More)
		p, err = models.ListRunPage(ctx, db.Bun, models.RunFilter{PRNumber: 102, Repository: "live", Limit: 50})
		require.NoError(t, err)
		for _, r := range p.Runs {
			require.Equal(t, 102, r.PRNumber)
			require.Equal(t, "live", r.Repository)
		}
		require.Len(t, p.Runs, 4, "runs 2, 7, 17, 22 (12 and 27 are network's)")
	})

	t.Run("repositories come with their merge locks; removed ones are left out", func(t *testing.T) {
		_, err := models.TakeMergeLock(ctx, db.Bun, runs[29])
		require.NoError(t, err)
		repos, err := models.RepositoriesWithLocks(ctx, db.Bun)
		require.NoError(t, err)
		require.Len(t, repos, 2)
		require.Equal(t, "live", repos[0].Name)
		require.Nil(t, repos[0].MergeLock)
		require.Len(t, repos[0].Accounts, 1)
		require.Equal(t, "network", repos[1].Name)
		require.Equal(t, runs[29].ID, repos[1].MergeLock.RunID)
	})

	t.Run("the runs filter names registered repositories and those with runs", func(t *testing.T) {
		insertRepository(t, db, "quiet")
		names, err := models.RepositoryNames(ctx, db.Bun)
		require.NoError(t, err)
		require.Equal(t, []string{"gone", "live", "network", "quiet"}, names)
	})

	t.Run("open pull requests come with their plans at their head", func(t *testing.T) {
		pr := func(repo string, number int, head, state string) {
			_, err := models.UpsertPullRequest(ctx, db.Bun, &models.PullRequest{Repository: repo, Number: number, BaseRef: "main", HeadSHA: head, State: state})
			require.NoError(t, err)
		}
		plan := func(repo string, number int, head, path string) {
			_, err := models.InsertPRPlans(ctx, db.Bun, []*models.PRPlan{{Repository: repo, PRNumber: number, HeadSHA: head, Path: path, Status: models.PlanSucceeded}})
			require.NoError(t, err)
		}
		pr("live", 1, "old", models.PROpen)
		plan("live", 1, "old", "live/prod/stale")
		pr("live", 1, "new", models.PROpen) // pushed again
		plan("live", 1, "new", "live/prod/b")
		plan("live", 1, "new", "live/prod/a")
		pr("live", 2, "h", models.PRMerged)
		plan("live", 2, "h", "live/prod/a")
		pr("network", 3, "h", models.PROpen)
		pr("gone", 4, "h", models.PROpen)
		plan("gone", 4, "h", "live/prod/a")

		prs, err := models.OpenPullRequestsWithPlans(ctx, db.Bun)
		require.NoError(t, err)
		byNumber := map[int][]string{}
		for _, p := range prs {
			paths := []string{}
			for _, pl := range p.Plans {
				paths = append(paths, pl.Path)
				require.Empty(t, pl.Output, "listings leave the output out")
			}
			byNumber[p.Number] = paths
		}
		require.Equal(t, map[int][]string{1: {"live/prod/a", "live/prod/b"}, 3: {}}, byNumber,
			"merged and removed repositories' pull requests are left out, and plans of older heads")
	})
}
