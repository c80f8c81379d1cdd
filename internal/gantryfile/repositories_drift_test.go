package gantryfile_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/gantryfile"
)

const oneRepo = "repositories:\n  - name: r\n    url: /srv/r.git\n    webhook_secret_env: HOOK_SECRET\n"

// TestPlanCommentsAndDrift: plan comments are on unless written false;
// drift is off unless a schedule is given, "every" and a duration.
func TestPlanCommentsAndDrift(t *testing.T) {
	t.Parallel()
	f, err := gantryfile.Parse("gantry.yaml", []byte(oneRepo), env("HOOK_SECRET"))
	require.NoError(t, err)
	require.True(t, f.Repositories[0].PlanCommentsEnabled())
	require.Nil(t, f.Repositories[0].Drift, "drift is off by default")

	f, err = gantryfile.Parse("gantry.yaml", []byte(oneRepo+"    plan_comments: false\n    drift: {schedule: every 6h, notify: [ops@example.com]}\n"), env("HOOK_SECRET"))
	require.NoError(t, err)
	require.False(t, f.Repositories[0].PlanCommentsEnabled())
	require.Equal(t, 6*time.Hour, f.Repositories[0].Drift.Every)
	require.Equal(t, []string{"ops@example.com"}, f.Repositories[0].Drift.Notify)
}

func TestDriftScheduleErrors(t *testing.T) {
	t.Parallel()
	for schedule, want := range map[string]string{
		`"0 */6 * * *"`: `repositories[0].drift.schedule: must be "every" and a duration such as "every 6h"`,
		`every often`:   `repositories[0].drift.schedule: must be "every" and a duration`,
		`every 1m`:      `repositories[0].drift.schedule: must be at least every 10m0s`,
	} {
		_, err := gantryfile.Parse("gantry.yaml", []byte(oneRepo+"    drift: {schedule: "+schedule+"}\n"), env("HOOK_SECRET"))
		require.ErrorContains(t, err, want, schedule)
	}
	_, err := gantryfile.Parse("gantry.yaml", []byte(oneRepo+"    drift: {schedule: every 1h, notify: [not-an-address]}\n"), env("HOOK_SECRET"))
	require.ErrorContains(t, err, "repositories[0].drift.notify[0]: must be an email address")
	_, err = gantryfile.Parse("gantry.yaml", []byte(oneRepo+"    drift: {schedul: every 1h}\n"), env("HOOK_SECRET"))
	require.ErrorContains(t, err, "did you mean schedule?")
}
