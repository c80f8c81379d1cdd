package ecsrunner_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/awstest/ecsfake"
	"github.com/gantryhq/gantry/internal/ecsrunner"
)

// TestRun_aSpecTooLongForTheOverridesGoesThroughTheStore: a rollback's
// plan of hundreds of -target addresses makes a spec far over ECS's 8,192
// characters of overrides (the reviewer's finding 7). It goes to the plan
// store; the override only names it and its SHA-256, and the task runs
// the whole command.
func TestRun_aSpecTooLongForTheOverridesGoesThroughTheStore(t *testing.T) {
	t.Parallel()
	f, r := newRunner(t)
	main := []string{"sh", "-c", `echo "$#" targets; echo last "$2"`, "sh"}
	for i := range 300 {
		main = append(main, fmt.Sprintf("-target=module.network.aws_subnet.private[%d]", i))
	}
	spec := ecsrunner.Spec{Repo: "file:///nowhere", Commit: "0123456789abcdef0123456789abcdef01234567", Unit: "live/vpc", Main: main, Store: r.StoreOf()}
	doc, err := spec.Command()
	require.NoError(t, err)
	require.Greater(t, len(doc[2]), ecsfake.MaxOverrides)
	sink := &lines{}
	_, err = r.Run(t.Context(), ecsrunner.Task{Spec: &spec, Timeout: time.Minute}, sink)
	// The task fetched and checked the spec, then tried the checkout.
	require.NoError(t, err)
	require.Contains(t, sink.text(), "gantry ecs-task: fetching 0123456789abcdef0123456789abcdef01234567")
	runs := calls(f, "RunTask")
	require.Len(t, runs, 1)
	require.Less(t, len(runs[0].Body), 2048)
	require.Contains(t, string(runs[0].Body), `\"spec_get\":\"plans/specs/`)
	stored := false
	for _, c := range f.S3.Calls() {
		stored = stored || (c.Method == "PUT" && strings.HasPrefix(c.Key, "plans/specs/"))
	}
	require.True(t, stored)
}

// TestRun_overridesOverTheLimitFailClearly: an environment too large for
// ECS's overrides is refused before RunTask, as a StartError (not
// retried), naming the limit; at exactly the limit ECS (the fake, which
// measures the request as ECS does) takes it.
func TestRun_overridesOverTheLimitFailClearly(t *testing.T) {
	t.Parallel()
	f, r := newRunner(t)
	task := ecsrunner.Task{Command: []string{"true"}, Env: []string{"BIG="}, Timeout: time.Minute}
	task.Env[0] += strings.Repeat("x", ecsfake.MaxOverrides-r.OverridesSizeOf(task))
	require.Equal(t, ecsfake.MaxOverrides, r.OverridesSizeOf(task))
	res, err := r.Run(t.Context(), task, nil)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)

	task.Env[0] += "x"
	_, err = r.Run(t.Context(), task, nil)
	var start *ecsrunner.StartError
	require.True(t, errors.As(err, &start), "%v", err)
	require.Equal(t, "ECS started no task: the task's container overrides (its command and environment) are 8193 characters of JSON, over ECS's limit of 8192: pass fewer variables through GANTRY_COMMAND_ENV", err.Error())
	require.Len(t, calls(f, "RunTask"), 1)
}
