package daemons

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/ecsdaemon"
	"github.com/gantryhq/gantry/models"
)

// TestOwnECSTask: which ECS task of a (environment, instance, deployment)
// is Gantry's task. A task the same deployment restarted must not take its
// predecessor's STOPPED task for its own end.
func TestOwnECSTask(t *testing.T) {
	created := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	gantryTask := models.DaemonTask{CreatedAt: created}
	stoppedBefore := ecsdaemon.Task{ARN: "a", LastStatus: "STOPPED", StoppedAt: created.Add(-time.Minute)}
	stoppedAfter := ecsdaemon.Task{ARN: "b", LastStatus: "STOPPED", StoppedAt: created.Add(time.Minute)}
	pending := ecsdaemon.Task{ARN: "c", LastStatus: "PENDING", DesiredStatus: "RUNNING"}
	runningLate := ecsdaemon.Task{ARN: "d", LastStatus: "RUNNING", DesiredStatus: "RUNNING", StartedAt: created.Add(2 * time.Minute)}
	runningEarly := ecsdaemon.Task{ARN: "e", LastStatus: "RUNNING", DesiredStatus: "RUNNING", StartedAt: created.Add(time.Minute)}
	cases := []struct {
		name       string
		candidates []ecsdaemon.Task
		want       string // "" : none
	}{
		{"nothing in ECS", nil, ""},
		{"a predecessor that stopped before the task was created", []ecsdaemon.Task{stoppedBefore}, ""},
		{"its own end", []ecsdaemon.Task{stoppedBefore, stoppedAfter}, "b"},
		{"a live one wins over a stopped one", []ecsdaemon.Task{stoppedAfter, pending}, "c"},
		{"running wins over pending (a duplicate)", []ecsdaemon.Task{pending, runningLate}, "d"},
		{"the longest running of two", []ecsdaemon.Task{runningLate, runningEarly}, "e"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ownECSTask(c.candidates, gantryTask)
			require.Equal(t, c.want != "", ok)
			require.Equal(t, c.want, got.ARN)
		})
	}
}
