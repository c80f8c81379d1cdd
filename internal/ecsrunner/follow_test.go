package ecsrunner_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/awstest/ecsfake"
	"github.com/gantryhq/gantry/internal/ecsrunner"
	"github.com/gantryhq/gantry/internal/ecsrunner/ecstasktest"
)

// waitStopped waits until every task of the cluster is STOPPED.
func waitStopped(t *testing.T, f *ecstasktest.Fakes) {
	t.Helper()
	waitFor(t, "every task STOPPED", func() bool {
		for _, task := range f.ECS.Tasks(ecstasktest.Cluster) {
			if task.LastStatus != ecsfake.TaskStopped {
				return false
			}
		}
		return true
	})
}

// TestRun_aLogReadDeniedStopsTheTask: CloudWatch Logs answers an error
// that will not pass (AccessDenied) while the task runs: Run returns it,
// and not before stopping the task, so that the retry it leads to never
// runs next to it (the reviewer's finding 3).
func TestRun_aLogReadDeniedStopsTheTask(t *testing.T) {
	t.Parallel()
	f, r := newRunner(t)
	f.Logs.FailNext("GetLogEvents", -1, http.StatusBadRequest, "AccessDeniedException", "not allowed")
	_, err := r.Run(t.Context(), ecsrunner.Task{Command: []string{"sh", "-c", "exec sleep 600"}, Timeout: time.Hour}, nil)
	require.ErrorContains(t, err, "AccessDeniedException")
	require.Len(t, calls(f, "StopTask"), 1)
	require.Contains(t, string(calls(f, "StopTask")[0].Body), "Gantry: lost track of the task")
	waitStopped(t, f)
}

// TestRun_passingAPIErrorsAreWaitedOut: DescribeTasks and GetLogEvents
// answering server errors (more in a row than the SDK's own retries) while
// the task runs: Run keeps following it, and the result is the command's,
// every line once.
func TestRun_passingAPIErrorsAreWaitedOut(t *testing.T) {
	t.Parallel()
	f, r := newRunner(t)
	f.ECS.FailNext("DescribeTasks", 8, http.StatusInternalServerError, "ServerException", "try again")
	f.Logs.FailNext("GetLogEvents", 8, http.StatusServiceUnavailable, "ServiceUnavailableException", "try again")
	sink := &lines{}
	res, err := r.Run(t.Context(), ecsrunner.Task{Command: []string{"sh", "-c", "for i in $(seq 1 50); do echo line $i; done; exit 3"}, Timeout: time.Minute}, sink)
	require.NoError(t, err)
	require.Equal(t, 3, res.ExitCode)
	require.Empty(t, calls(f, "StopTask"))
	var want strings.Builder
	want.WriteString(strings.SplitAfter(sink.text(), "\n")[0])
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	require.Equal(t, want.String(), sink.text())
	require.Zero(t, f.ECS.PendingFaults())
}

// TestRun_describeFailingPastTheDeadlineGivesUpAndStops: DescribeTasks
// failing for good (server errors): Run gives up once the command's time
// limit and StopGrace are past, and stops the task as it goes.
func TestRun_describeFailingPastTheDeadlineGivesUpAndStops(t *testing.T) {
	t.Parallel()
	f, r := newRunner(t)
	r.StopGrace = 200 * time.Millisecond
	f.ECS.BeforeNext("DescribeTasks", func() { f.ECS.FailNext("DescribeTasks", -1, http.StatusInternalServerError, "ServerException", "down") })
	_, err := r.Run(t.Context(), ecsrunner.Task{Command: []string{"sh", "-c", "exec sleep 600"}, Timeout: 300 * time.Millisecond}, nil)
	require.ErrorContains(t, err, "ServerException")
	f.ECS.ClearFaults()
	require.NotEmpty(t, calls(f, "StopTask"))
	waitStopped(t, f)
}

// TestRun_aLogNeverReadableAfterTheTaskStoppedIsBounded: GetLogEvents
// throttled for good once the task stopped: Run does not wait forever
// for the rest of the output, it fails after StopGrace.
func TestRun_aLogNeverReadableAfterTheTaskStoppedIsBounded(t *testing.T) {
	t.Parallel()
	f, r := newRunner(t)
	r.StopGrace = time.Second
	f.Logs.Throttle("GetLogEvents", -1)
	_, err := r.Run(t.Context(), ecsrunner.Task{Command: []string{"sh", "-c", "echo done"}, Timeout: time.Minute}, nil)
	require.ErrorContains(t, err, "could not be read to its end")
	require.ErrorContains(t, err, "ThrottlingException")
}

// TestRun_stopsTheEarlierAttemptsTask: a task of the same execution still
// running (its worker was killed between RunTask and the end) is stopped,
// and STOPPED, before the new attempt's task starts: two plans never hold
// the state at once.
func TestRun_stopsTheEarlierAttemptsTask(t *testing.T) {
	t.Parallel()
	f, r := newRunner(t)
	ecsClient := ecs.NewFromConfig(f.AWS, func(o *ecs.Options) { o.BaseEndpoint = aws.String(f.ECS.URL) })
	runEarlier := func(by string) string {
		out, err := ecsClient.RunTask(context.Background(), &ecs.RunTaskInput{
			Cluster: aws.String(ecstasktest.Cluster), TaskDefinition: aws.String(ecstasktest.Family), StartedBy: aws.String(by), LaunchType: "FARGATE",
			NetworkConfiguration: &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{Subnets: f.Config.Subnets, SecurityGroups: f.Config.SecurityGroups}},
			Overrides:            &ecstypes.TaskOverride{ContainerOverrides: []ecstypes.ContainerOverride{{Name: aws.String(ecstasktest.Container), Command: []string{"sleep", "600"}}}},
		})
		require.NoError(t, err)
		return aws.ToString(out.Tasks[0].TaskArn)
	}
	earlier := runEarlier("gantry-execution-7")
	other := runEarlier("gantry-execution-8")
	sink := &lines{}
	res, err := r.Run(t.Context(), ecsrunner.Task{Command: []string{"sh", "-c", "echo planned"}, StartedBy: "gantry-execution-7", StopEarlier: true, Timeout: time.Minute}, sink)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	require.Contains(t, sink.text(), "gantry: stopped ECS task "+earlier+", left running by an earlier attempt of this command\n")
	byARN := map[string]ecsfake.Task{}
	for _, task := range f.ECS.Tasks(ecstasktest.Cluster) {
		byARN[task.ARN] = task
	}
	require.Equal(t, ecsfake.TaskStopped, byARN[earlier].LastStatus)
	require.Equal(t, ecsfake.TaskRunning, byARN[other].LastStatus, "another execution's task is left alone")
	// The new task was started only once the earlier one was STOPPED.
	var order []string
	for _, c := range f.ECS.Calls() {
		if c.Operation == "RunTask" || c.Operation == "StopTask" {
			order = append(order, c.Operation)
		}
	}
	require.Equal(t, []string{"RunTask", "RunTask", "StopTask", "RunTask"}, order)
}
