package ecsrunner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/awstest/ecsfake"
	"github.com/gantryhq/gantry/internal/ecsrunner"
	"github.com/gantryhq/gantry/internal/ecsrunner/ecstasktest"
	"github.com/gantryhq/gantry/internal/runner"
)

func TestMain(m *testing.M) {
	ecstasktest.RunTaskIfAsked()
	os.Exit(m.Run())
}

// lines is a runner.Sink that keeps what it is given.
type lines struct {
	mu     sync.Mutex
	chunks []runner.Chunk
}

func (l *lines) Write(_ context.Context, c runner.Chunk) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.chunks = append(l.chunks, c)
	return nil
}

func (l *lines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for i, c := range l.chunks {
		if c.Seq != i+1 {
			panic(fmt.Sprintf("chunk %d has Seq %d", i+1, c.Seq))
		}
		b.WriteString(c.Text)
	}
	return b.String()
}

func newRunner(t *testing.T) (*ecstasktest.Fakes, *ecsrunner.Runner) {
	f := ecstasktest.New(t)
	r := ecsrunner.New(f.AWS, f.Config)
	r.Poll = 50 * time.Millisecond
	return f, r
}

func calls(f *ecstasktest.Fakes, op string) []ecsfake.Call {
	var out []ecsfake.Call
	for _, c := range f.ECS.Calls() {
		if c.Operation == op {
			out = append(out, c)
		}
	}
	return out
}

// waitFor polls cond until it holds, for at most a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRun_outputLiveAndExitCode: RunTask carries the command as the
// container override on Fargate with the awsvpc configuration and the
// unit's role; the output reaches the sink while the task still runs; the
// exit code is the container's.
func TestRun_outputLiveAndExitCode(t *testing.T) {
	t.Parallel()
	f, r := newRunner(t)
	gate := filepath.Join(t.TempDir(), "gate")
	sink := &lines{}
	var res ecsrunner.Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = r.Run(t.Context(), ecsrunner.Task{
			Command: []string{"sh", "-c", `echo "Plan: 1 to add"; while [ ! -e "$GATE" ]; do sleep 0.05; done; echo after; exit 3`},
			Env:     []string{"GATE=" + gate}, Role: "arn:aws:iam::123456789012:role/Plan", StartedBy: "run-7-abc-vpc-123", Timeout: time.Minute,
		}, sink)
	}()
	waitFor(t, "the first line", func() bool { return strings.Contains(sink.text(), "Plan: 1 to add\n") })
	tasks := f.ECS.Tasks(ecstasktest.Cluster)
	require.Len(t, tasks, 1)
	require.Equal(t, ecsfake.TaskRunning, tasks[0].LastStatus, "the output is read while the task runs")
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	<-done
	require.NoError(t, err)
	require.Equal(t, 3, res.ExitCode)
	require.Empty(t, res.Stopped)
	taskID := tasks[0].ID
	require.Equal(t, "gantry: running as ECS task "+tasks[0].ARN+" (log stream gantry/runner/"+taskID+")\nPlan: 1 to add\nafter\n", sink.text())

	run := calls(f, "RunTask")
	require.Len(t, run, 1)
	var req struct {
		LaunchType           string
		StartedBy            string
		NetworkConfiguration struct {
			AwsvpcConfiguration struct{ Subnets, SecurityGroups []string }
		}
		Overrides struct {
			TaskRoleArn        string
			ContainerOverrides []struct {
				Name        string
				Command     []string
				Environment []struct{ Name, Value string }
			}
		}
	}
	require.NoError(t, json.Unmarshal(run[0].Body, &req))
	require.Equal(t, "FARGATE", req.LaunchType)
	require.Equal(t, []string{"subnet-0123456789abcdef0"}, req.NetworkConfiguration.AwsvpcConfiguration.Subnets)
	require.Equal(t, "arn:aws:iam::123456789012:role/Plan", req.Overrides.TaskRoleArn)
	require.Equal(t, ecstasktest.Container, req.Overrides.ContainerOverrides[0].Name)
	require.Equal(t, "sh", req.Overrides.ContainerOverrides[0].Command[0])
	require.Equal(t, "run-7-abc-vpc-123", req.StartedBy)
	require.Empty(t, calls(f, "StopTask"), "a task that ends by itself is not stopped")
}

// TestRun_neverStarts: a task that stays PROVISIONING past the start
// timeout is stopped and the command fails with that reason.
func TestRun_neverStarts(t *testing.T) {
	t.Parallel()
	f, _ := newRunner(t)
	f.Config.StartTimeout = "300ms"
	r := ecsrunner.New(f.AWS, f.Config)
	r.Poll = 50 * time.Millisecond
	f.ECS.NeverStart()
	res, err := r.Run(t.Context(), ecsrunner.Task{Command: []string{"true"}, Timeout: time.Minute}, nil)
	require.NoError(t, err)
	require.Equal(t, -1, res.ExitCode)
	require.Equal(t, "the task did not start within 300ms (ECS status PROVISIONING)", res.Stopped)
	stops := calls(f, "StopTask")
	require.Len(t, stops, 1)
	require.Contains(t, string(stops[0].Body), "did not start within 300ms")
	tasks := f.ECS.Tasks(ecstasktest.Cluster)
	require.Equal(t, ecsfake.TaskStopped, tasks[0].LastStatus)
}

// TestRun_stoppedByECS: ECS stops the task under the command (no exit
// code): the command fails with ECS's reason, the output so far kept.
func TestRun_stoppedByECS(t *testing.T) {
	t.Parallel()
	f, r := newRunner(t)
	sink := &lines{}
	var res ecsrunner.Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = r.Run(t.Context(), ecsrunner.Task{Command: []string{"sh", "-c", "echo applying; sleep 600"}, Timeout: time.Hour}, sink)
	}()
	waitFor(t, "the task's first line", func() bool { return strings.Contains(sink.text(), "applying") })
	task := f.ECS.Tasks(ecstasktest.Cluster)[0]
	f.ECS.StopByECS(task.ARN, "SpotInterruption", "Your Spot Task was interrupted.")
	<-done
	require.NoError(t, err)
	require.Equal(t, -1, res.ExitCode)
	require.Equal(t, "ECS stopped the task: Your Spot Task was interrupted.", res.Stopped)
	require.True(t, strings.HasSuffix(sink.text(), ")\napplying\n"), sink.text())
	require.Empty(t, calls(f, "StopTask"), "ECS stopped it, not Gantry")
}

// TestRun_throttledLogsLoseAndRepeatNothing: GetLogEvents throttled again
// and again (more than the SDK's own retries) while the task writes:
// every line reaches the sink once, in order.
func TestRun_throttledLogsLoseAndRepeatNothing(t *testing.T) {
	t.Parallel()
	f, r := newRunner(t)
	f.Logs.Throttle("GetLogEvents", 12)
	sink := &lines{}
	res, err := r.Run(t.Context(), ecsrunner.Task{Command: []string{"sh", "-c", "for i in $(seq 1 300); do echo line $i; done"}, Timeout: time.Minute}, sink)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	var want strings.Builder
	want.WriteString(strings.SplitAfter(sink.text(), "\n")[0]) // the task's name
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	require.Equal(t, want.String(), sink.text())
	throttled := 0
	for _, c := range f.Logs.Calls() {
		if c.Error == "ThrottlingException" {
			throttled++
		}
	}
	require.Equal(t, 12, throttled)
}

// TestRun_timeoutAndCancelStopTheTask: past its time limit, or when the
// job is cancelled, the task is stopped with StopTask (the process gets
// SIGTERM, exit 143).
func TestRun_timeoutAndCancelStopTheTask(t *testing.T) {
	t.Parallel()
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		f, r := newRunner(t)
		res, err := r.Run(t.Context(), ecsrunner.Task{Command: []string{"sleep", "600"}, Timeout: 500 * time.Millisecond}, nil)
		require.NoError(t, err)
		require.True(t, res.TimedOut)
		require.Equal(t, 143, res.ExitCode)
		stops := calls(f, "StopTask")
		require.Len(t, stops, 1)
		require.Contains(t, string(stops[0].Body), "timed out after 500ms")
	})
	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		f, r := newRunner(t)
		ctx, cancel := context.WithCancel(t.Context())
		sink := &lines{}
		go func() {
			waitFor(t, "the task's output", func() bool { return strings.Contains(sink.text(), "started\n") })
			cancel()
		}()
		res, err := r.Run(ctx, ecsrunner.Task{Command: []string{"sh", "-c", "echo started; exec sleep 600"}, Timeout: time.Hour}, sink)
		require.ErrorIs(t, err, context.Canceled)
		require.True(t, res.Cancelled)
		require.Len(t, calls(f, "StopTask"), 1)
		require.Equal(t, ecsfake.TaskStopped, f.ECS.Tasks(ecstasktest.Cluster)[0].LastStatus)
	})
}

// TestPlanStore_S3Contract: the plan store's calls against the in-test S3
// with the real SDK: PutObject, GetObject, HeadObject's ETag, NoSuchKey.
func TestPlanStore_S3Contract(t *testing.T) {
	t.Parallel()
	f := ecstasktest.New(t)
	c := ecsrunner.NewS3(f.AWS, f.S3.URL)
	ctx := t.Context()
	data := []byte("a plan file\x00with binary")
	require.NoError(t, ecsrunner.PutObject(ctx, c, ecstasktest.Bucket, "plans/x/plan-1.tfplan", data))
	got, err := ecsrunner.GetObject(ctx, c, ecstasktest.Bucket, "plans/x/plan-1.tfplan")
	require.NoError(t, err)
	require.Equal(t, data, got)
	stored, ok := f.S3.Object(ecstasktest.Bucket, "plans/x/plan-1.tfplan")
	require.True(t, ok)
	require.Equal(t, ecsrunner.SHA256(data), stored.Metadata["sha256"])
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(ecstasktest.Bucket), Key: aws.String("plans/x/plan-1.tfplan")})
	require.NoError(t, err)
	require.Equal(t, stored.ETag, aws.ToString(head.ETag))
	require.Equal(t, int64(len(data)), aws.ToInt64(head.ContentLength))
	_, err = ecsrunner.GetObject(ctx, c, ecstasktest.Bucket, "plans/none")
	var missing *s3types.NoSuchKey
	require.ErrorAs(t, err, &missing)
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(ecstasktest.Bucket), Key: aws.String("plans/none")})
	var notFound *s3types.NotFound
	require.ErrorAs(t, err, &notFound)
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(ecstasktest.Bucket), Key: aws.String("plans/x/plan-1.tfplan"), IfMatch: aws.String(`"0000"`)})
	require.ErrorContains(t, err, "PreconditionFailed")
	bad := ecsrunner.NewS3(aws.Config{Region: f.AWS.Region, HTTPClient: f.AWS.HTTPClient, Credentials: aws.AnonymousCredentials{}}, f.S3.URL)
	_, err = ecsrunner.GetObject(ctx, bad, ecstasktest.Bucket, "plans/x/plan-1.tfplan")
	require.ErrorContains(t, err, "AccessDenied", "an unsigned request is refused")
}
