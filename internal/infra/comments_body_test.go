package infra_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/models"
)

// TestPlanCommentBody: one row per unit that stays one table row whatever
// the error says, and a head that could not be scanned says why.
func TestPlanCommentBody(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	pr := &models.PullRequest{Number: 9, HeadSHA: "0123456789abcdef0123456789abcdef01234567"}
	body := infra.PlanCommentBody("https://gantry.example.com", "live", pr, []models.CommentPlan{
		{ID: 1, Path: "live/a", Status: models.PlanSucceeded, HasChanges: &yes, Verdict: "Plan: 2 to add, 0 to change, 1 to destroy"},
		{ID: 2, Path: "live/b", Status: models.PlanSucceeded, HasChanges: &no},
		{ID: 3, Path: "live/c", Status: models.PlanFailed, Error: "plan failed | badly\nsecond line"},
		{ID: 4, Path: "live/d", Status: models.PlanRunning},
		{ID: 5, Path: "live/e", Status: models.PlanSucceeded, HasChanges: &yes},
	})
	require.Equal(t, "<!-- gantry:plan-summary -->\n"+
		"### Gantry plans for `0123456`\n\n"+
		"| Unit | Plan | To add | To change | To destroy |\n| --- | --- | ---: | ---: | ---: |\n"+
		"| [`live/a`](https://gantry.example.com/infra/plans/1) | changes | 2 | 0 | 1 |\n"+
		"| [`live/b`](https://gantry.example.com/infra/plans/2) | no changes | 0 | 0 | 0 |\n"+
		"| [`live/c`](https://gantry.example.com/infra/plans/3) | **failed**: plan failed \\| badly second line |  |  |  |\n"+
		"| [`live/d`](https://gantry.example.com/infra/plans/4) | planning… |  |  |  |\n"+
		"| [`live/e`](https://gantry.example.com/infra/plans/5) | changes |  |  |  |\n"+
		"\n<sub>Updated in place on every push · [this pull request on Gantry](https://gantry.example.com/infra/live/pulls/9)</sub>\n", body)

	pr.PlanError = "live/x/terragrunt.hcl:3,1: Unsupported block type"
	body = infra.PlanCommentBody("https://gantry.example.com", "live", pr, nil)
	require.Contains(t, body, "Not planned: live/x/terragrunt.hcl:3,1: Unsupported block type\n")
	require.NotContains(t, body, "| Unit |")
}
