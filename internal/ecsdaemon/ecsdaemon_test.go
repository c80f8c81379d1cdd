package ecsdaemon_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/awstest/ecsfake"
	"github.com/gantryhq/gantry/internal/ecsdaemon"
)

// The contract of the ecs backend, with the real aws-sdk-go-v2 ECS client
// against ecsfake.

const (
	cluster     = "fleet"
	maxAttempts = 4
)

// clock is the fake cluster's time, moved by tests.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type bundle struct {
	ecs     *ecsfake.Server
	c       *ecsdaemon.Client
	clock   *clock
	taskDef string // ARN of agent:1, 256 CPU units and 512 MiB
}

func setup(t *testing.T) *bundle {
	t.Helper()
	clk := &clock{now: time.Now().UTC().Truncate(time.Second)}
	fake := ecsfake.New(t, ecsfake.Options{Now: clk.Now})
	fake.AddCluster(cluster)
	c, err := ecsdaemon.New(t.Context(), ecsdaemon.Options{
		Region:      fake.Region(),
		Endpoint:    fake.URL,
		Credentials: fake.Credentials(),
		MaxAttempts: maxAttempts,
		MaxBackoff:  5 * time.Millisecond,
	})
	require.NoError(t, err)
	td := fake.RegisterTaskDefinition(ecsfake.TaskDefinition{Family: "agent", CPU: 256, Memory: 512})
	return &bundle{ecs: fake, c: c, clock: clk, taskDef: td}
}

// start starts agent on an instance and returns the task.
func (b *bundle) start(t *testing.T, instanceARN, startedBy, group string) ecsdaemon.Task {
	t.Helper()
	task, err := b.c.StartTask(t.Context(), cluster, instanceARN, b.taskDef, startedBy, group)
	require.NoError(t, err)
	return task
}

// requestBody is the JSON a call sent.
func requestBody(t *testing.T, c ecsfake.Call) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(c.Body, &m))
	return m
}

func TestInstances(t *testing.T) {
	t.Parallel()

	t.Run("lists every matching instance across pages, described in chunks of 100", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		want := map[string]bool{}
		for i := range 230 {
			in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{Attributes: map[string]string{"role": "web", "zone": "a"}})
			want[in.ARN] = true
			if i%2 == 0 { // same role, another zone: filtered out
				b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{Attributes: map[string]string{"role": "web", "zone": "b"}})
			}
		}
		b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{}) // no attributes
		b.ecs.AddInstance("other", ecsfake.InstanceSpec{Attributes: map[string]string{"role": "web", "zone": "a"}})

		got, err := b.c.Instances(t.Context(), cluster, map[string]string{"zone": "a", "role": "web"})
		require.NoError(t, err)
		require.Len(t, got, 230)
		for _, in := range got {
			require.True(t, want[in.ARN], "unexpected instance %s", in.ARN)
			require.Equal(t, "web", in.Attributes["role"])
			require.Equal(t, "a", in.Attributes["zone"])
			require.Equal(t, "linux", in.Attributes["ecs.os-type"], "ECS's own attributes are kept")
			require.Equal(t, ecsfake.StatusActive, in.Status)
			require.True(t, in.AgentConnected)
			require.True(t, strings.HasSuffix(in.ARN, "/"+in.ID))
			require.True(t, strings.HasPrefix(in.EC2InstanceID, "i-"))
			require.Equal(t, b.clock.Now(), in.RegisteredAt.UTC())
		}

		lists := b.ecs.CallsOf("ListContainerInstances")
		require.Len(t, lists, 3, "230 instances are 3 pages of 100")
		for i, call := range lists {
			body := requestBody(t, call)
			require.Equal(t, "attribute:role == web and attribute:zone == a", body["filter"])
			require.Equal(t, cluster, body["cluster"])
			_, hasToken := body["nextToken"]
			require.Equal(t, i > 0, hasToken, "every page but the first continues with a nextToken")
		}
		describes := b.ecs.CallsOf("DescribeContainerInstances")
		require.Len(t, describes, 3)
		for i, n := range []int{100, 100, 30} {
			require.Len(t, requestBody(t, describes[i])["containerInstances"], n)
		}
	})

	t.Run("an attribute with no value only has to be present", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		gpu := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{Attributes: map[string]string{"gpu": ""}})
		gpu2 := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{Attributes: map[string]string{"gpu": "a100"}})
		b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})

		got, err := b.c.Instances(t.Context(), cluster, map[string]string{"gpu": ""})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{gpu.ARN, gpu2.ARN}, arns(got))
		require.Equal(t, "attribute:gpu exists", requestBody(t, b.ecs.CallsOf("ListContainerInstances")[0])["filter"])
	})

	t.Run("no attributes: the whole cluster, with no filter sent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		d := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{Attributes: map[string]string{"x": "y"}})
		b.ecs.SetInstanceStatus(d.ARN, ecsfake.StatusDraining)

		got, err := b.c.Instances(t.Context(), cluster, nil)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{a.ARN, d.ARN}, arns(got))
		for _, in := range got {
			if in.ARN == d.ARN {
				require.Equal(t, ecsfake.StatusDraining, in.Status, "a draining instance is listed, with its status")
			}
		}
		require.NotContains(t, requestBody(t, b.ecs.CallsOf("ListContainerInstances")[0]), "filter")
	})

	t.Run("a filter matching nothing is no instances, not an error", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		got, err := b.c.Instances(t.Context(), cluster, map[string]string{"zone": "nowhere"})
		require.NoError(t, err)
		require.Empty(t, got)
		require.Empty(t, b.ecs.CallsOf("DescribeContainerInstances"))
	})

	t.Run("an instance that left is not listed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		stay := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		leave := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		b.ecs.TerminateInstance(leave.ARN)

		got, err := b.c.Instances(t.Context(), cluster, nil)
		require.NoError(t, err)
		require.Equal(t, []string{stay.ARN}, arns(got))
	})

	t.Run("an instance leaving between the list and the describe is dropped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		stay := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		inactive := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		forgotten := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		b.ecs.BeforeNext("DescribeContainerInstances", func() {
			// one long gone (ECS answers MISSING), one just gone (INACTIVE)
			b.ecs.TerminateInstance(forgotten.ARN)
			b.clock.Advance(ecsfake.StoppedTaskRetention + time.Minute)
			b.ecs.TerminateInstance(inactive.ARN)
		})

		got, err := b.c.Instances(t.Context(), cluster, nil)
		require.NoError(t, err)
		require.Equal(t, []string{stay.ARN}, arns(got))
		require.Len(t, requestBody(t, b.ecs.CallsOf("DescribeContainerInstances")[0])["containerInstances"], 3,
			"all three were listed")
	})

	t.Run("refuses attributes the filter language cannot express, sending nothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, attrs := range []map[string]string{
			{"zone": "eu west"},        // a space: the language cannot quote it
			{"zone": "a or attribute"}, // an injection attempt
			{"zone": "a)"},             // not an ECS attribute value
			{"zone": "and"},            // a keyword
			{"zone": "IN"},             // a keyword, any case
			{"bad name": "x"},          // not an ECS attribute name
			{"": "x"},                  // no name
			{"zone": strings.Repeat("a", 129)},
		} {
			_, err := b.c.Instances(t.Context(), cluster, attrs)
			require.ErrorIs(t, err, ecsdaemon.ErrInvalidInput, "%v", attrs)
			require.ErrorContains(t, err, "attributes")
		}
		require.Empty(t, b.ecs.Calls())
	})

	t.Run("an unknown cluster is ECS's ClusterNotFoundException", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.c.Instances(t.Context(), "nope", nil)
		var notFound *types.ClusterNotFoundException
		require.ErrorAs(t, err, &notFound)
		require.ErrorContains(t, err, "ListContainerInstances in cluster nope")
	})
}

func arns(ins []ecsdaemon.Instance) []string {
	var out []string
	for _, in := range ins {
		out = append(out, in.ARN)
	}
	return out
}

func TestFilter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attrs map[string]string
		want  string
	}{
		{nil, ""},
		{map[string]string{"zone": "a"}, "attribute:zone == a"},
		{map[string]string{"zone": "a", "ecs.instance-type": "t3.large", "gpu": ""},
			"attribute:ecs.instance-type == t3.large and attribute:gpu exists and attribute:zone == a"},
		{map[string]string{"team/name": `DOMAIN\user@corp:1`}, `attribute:team/name == DOMAIN\user@corp:1`},
	} {
		got, err := ecsdaemon.Filter(tc.attrs)
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
}

func TestTasks(t *testing.T) {
	t.Parallel()

	t.Run("lists one group's running and stopped tasks across pages", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		deployment := uuid.NewString()
		mine := map[string]bool{}
		var stopped string
		for i := range 130 {
			in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
			task := b.start(t, in.ARN, deployment, "env-logs")
			mine[task.ARN] = true
			if i == 7 {
				stopped = task.ARN
			}
			b.start(t, in.ARN, deployment, "env-metrics") // another environment's
		}
		b.ecs.SetTaskRunning(stopped)
		b.ecs.StopTaskWithExit(stopped, 2, "")

		got, err := b.c.Tasks(t.Context(), cluster, "env-logs")
		require.NoError(t, err)
		require.Len(t, got, 130)
		for _, task := range got {
			require.True(t, mine[task.ARN])
			require.Equal(t, "env-logs", task.Group)
			require.Equal(t, deployment, task.StartedBy)
			require.Equal(t, b.taskDef, task.TaskDefinition)
			if task.ARN == stopped {
				require.Equal(t, "STOPPED", task.LastStatus)
				require.Equal(t, 2, *task.ExitCode)
			} else {
				require.Equal(t, "PENDING", task.LastStatus)
				require.Nil(t, task.ExitCode)
			}
		}
		// 259 running tasks (3 pages) and 1 stopped (1 page); described
		// in chunks of 100.
		lists := b.ecs.CallsOf("ListTasks")
		require.Len(t, lists, 4)
		require.Equal(t, "RUNNING", requestBody(t, lists[0])["desiredStatus"])
		require.Equal(t, "STOPPED", requestBody(t, lists[3])["desiredStatus"])
		require.Len(t, b.ecs.CallsOf("DescribeTasks"), 3)
	})

	t.Run("a task stopped by ECS shows its exit code, reason and times", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		task := b.start(t, in.ARN, "d1", "env")
		b.ecs.SetTaskRunning(task.ARN)
		startedAt := b.clock.Now()
		b.clock.Advance(time.Minute)
		b.ecs.StopTaskWithExit(task.ARN, 137, "OutOfMemoryError: Container killed due to memory usage")

		got, err := b.c.Tasks(t.Context(), cluster, "env")
		require.NoError(t, err)
		require.Len(t, got, 1)
		s := got[0]
		require.Equal(t, task.ARN, s.ARN)
		require.Equal(t, in.ARN, s.Instance)
		require.Equal(t, "STOPPED", s.LastStatus)
		require.Equal(t, "STOPPED", s.DesiredStatus)
		require.False(t, s.Running())
		require.Equal(t, 137, *s.ExitCode)
		require.Equal(t, "OutOfMemoryError: Container killed due to memory usage", s.StoppedReason)
		require.Equal(t, "EssentialContainerExited", s.StopCode)
		require.Equal(t, startedAt, s.StartedAt.UTC())
		require.Equal(t, startedAt.Add(time.Minute), s.StoppedAt.UTC())
	})

	t.Run("the tasks of an instance that left are stopped, without exit codes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		task := b.start(t, in.ARN, "d1", "env")
		b.ecs.SetTaskRunning(task.ARN)
		b.ecs.TerminateInstance(in.ARN)

		got, err := b.c.Tasks(t.Context(), cluster, "env")
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, "STOPPED", got[0].LastStatus)
		require.Nil(t, got[0].ExitCode)
		require.Equal(t, fmt.Sprintf("Host EC2 (instance %s) terminated.", in.EC2InstanceID), got[0].StoppedReason)
	})

	t.Run("stopped tasks drop out once ECS forgets them", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		old := b.start(t, in.ARN, "d1", "env")
		b.ecs.StopTaskWithExit(old.ARN, 1, "")
		b.clock.Advance(ecsfake.StoppedTaskRetention + time.Minute)
		fresh := b.start(t, in.ARN, "d2", "env")

		got, err := b.c.Tasks(t.Context(), cluster, "env")
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, fresh.ARN, got[0].ARN)
	})

	t.Run("a task forgotten between the list and the describe is dropped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		gone := b.start(t, in.ARN, "d1", "env")
		b.ecs.StopTaskWithExit(gone.ARN, 1, "")
		b.ecs.BeforeNext("DescribeTasks", func() { b.clock.Advance(ecsfake.StoppedTaskRetention + time.Minute) })

		got, err := b.c.Tasks(t.Context(), cluster, "env")
		require.NoError(t, err)
		require.Empty(t, got)
		require.Len(t, b.ecs.CallsOf("DescribeTasks"), 1)
	})

	t.Run("ClusterTasks returns every group's tasks", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		logs := b.start(t, in.ARN, "d1", "daemon:logs")
		metrics := b.start(t, in.ARN, "d2", "daemon:metrics")
		b.ecs.StopTaskWithExit(metrics.ARN, 0, "")

		got, err := b.c.ClusterTasks(t.Context(), cluster)
		require.NoError(t, err)
		groups := map[string]string{}
		for _, task := range got {
			groups[task.ARN] = task.Group
		}
		require.Equal(t, map[string]string{logs.ARN: "daemon:logs", metrics.ARN: "daemon:metrics"}, groups)
	})

	t.Run("TasksStartedBy lists one deployment's tasks, running and stopped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		deployment := uuid.NewString()
		in1 := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		in2 := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		first := b.start(t, in1.ARN, deployment, "env")
		second := b.start(t, in2.ARN, deployment, "env")
		b.start(t, in1.ARN, uuid.NewString(), "env") // another deployment's
		b.ecs.StopTaskWithExit(second.ARN, 1, "")

		got, err := b.c.TasksStartedBy(t.Context(), cluster, deployment)
		require.NoError(t, err)
		var arns []string
		for _, task := range got {
			arns = append(arns, task.ARN)
			require.Equal(t, deployment, task.StartedBy)
		}
		require.ElementsMatch(t, []string{first.ARN, second.ARN}, arns)
		for _, call := range b.ecs.CallsOf("ListTasks") {
			require.Equal(t, deployment, requestBody(t, call)["startedBy"])
		}

		_, err = b.c.TasksStartedBy(t.Context(), cluster, deployment+"-too-long")
		require.ErrorIs(t, err, ecsdaemon.ErrInvalidInput)
	})

	t.Run("an empty group is refused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.c.Tasks(t.Context(), cluster, "")
		require.ErrorIs(t, err, ecsdaemon.ErrInvalidInput)
		require.ErrorContains(t, err, "group")
		require.Empty(t, b.ecs.Calls())
	})
}

func TestStartTask(t *testing.T) {
	t.Parallel()

	t.Run("starts the task on the instance with the deployment and environment", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		deployment := uuid.NewString()
		require.Len(t, deployment, 36, "a deployment UUID is exactly ECS's startedBy limit")

		task, err := b.c.StartTask(t.Context(), cluster, in.ARN, b.taskDef, deployment, "env-logs")
		require.NoError(t, err)
		require.Equal(t, in.ARN, task.Instance)
		require.Equal(t, b.taskDef, task.TaskDefinition)
		require.Equal(t, deployment, task.StartedBy)
		require.Equal(t, "env-logs", task.Group)
		require.Equal(t, "PENDING", task.LastStatus)
		require.Equal(t, "RUNNING", task.DesiredStatus)
		require.True(t, strings.HasSuffix(task.ARN, "/"+cluster+"/"+task.ID))

		held := b.ecs.Tasks(cluster)
		require.Len(t, held, 1)
		require.Equal(t, ecsfake.Task{
			ID: task.ID, ARN: task.ARN, InstanceARN: in.ARN, TaskDefinitionARN: b.taskDef,
			StartedBy: deployment, Group: "env-logs", LastStatus: "PENDING", DesiredStatus: "RUNNING",
		}, held[0])
		body := requestBody(t, b.ecs.CallsOf("StartTask")[0])
		require.Equal(t, []any{in.ARN}, body["containerInstances"])
	})

	t.Run("takes a task definition as family or family:revision", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		v2 := b.ecs.RegisterTaskDefinition(ecsfake.TaskDefinition{Family: "agent", CPU: 256, Memory: 512})
		latest, err := b.c.StartTask(t.Context(), cluster, in.ARN, "agent", "d", "g")
		require.NoError(t, err)
		require.Equal(t, v2, latest.TaskDefinition)
		first, err := b.c.StartTask(t.Context(), cluster, in.ARN, "agent:1", "d", "g")
		require.NoError(t, err)
		require.Equal(t, b.taskDef, first.TaskDefinition)
	})

	t.Run("ECS's per-instance failures are a StartFailure with its reason", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		small := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{CPU: 1024, Memory: 768})
		b.start(t, small.ARN, "d", "g") // 512 MiB of 768 used
		offline := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		b.ecs.SetAgentConnected(offline.ARN, false)
		gone := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		b.ecs.TerminateInstance(gone.ARN)
		cpuBound := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{CPU: 128})
		noGPU := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		b.ecs.RefuseStarts(noGPU.ARN, "ATTRIBUTE", "ecs.capability.gpu")

		for _, tc := range []struct{ instance, reason string }{
			{small.ARN, "RESOURCE:MEMORY"},
			{offline.ARN, "AGENT"},
			{gone.ARN, "MISSING"},
			{cpuBound.ARN, "RESOURCE:CPU"},
			{noGPU.ARN, "ATTRIBUTE"},
		} {
			_, err := b.c.StartTask(t.Context(), cluster, tc.instance, b.taskDef, "d", "g")
			var failure *ecsdaemon.StartFailure
			require.ErrorAs(t, err, &failure, tc.reason)
			require.Equal(t, tc.reason, failure.Reason)
			require.Equal(t, tc.instance, failure.Instance)
			require.ErrorContains(t, err, tc.reason)
		}
		_, err := b.c.StartTask(t.Context(), cluster, noGPU.ARN, b.taskDef, "d", "g")
		require.EqualError(t, err, "ECS could not start the task on "+noGPU.ARN+": ATTRIBUTE (ecs.capability.gpu)")
		require.Len(t, b.ecs.Tasks(cluster), 1, "no task was started past the first")

		b.ecs.RefuseStarts(noGPU.ARN, "", "")
		b.start(t, noGPU.ARN, "d", "g")
	})

	t.Run("refuses ids of the wrong kind before calling ECS", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		task := b.start(t, in.ARN, "d", "g")
		calls := len(b.ecs.Calls())

		for _, tc := range []struct {
			field                                      string
			cluster, instance, taskDef, startedBy, grp string
		}{
			{"instance", cluster, b.taskDef, b.taskDef, "d", "g"}, // a task definition for the instance
			{"instance", cluster, task.ARN, b.taskDef, "d", "g"},  // a task for the instance
			{"instance", cluster, "i-0123456789abcdef0", b.taskDef, "d", "g"},
			{"taskDefinition", cluster, in.ARN, task.ARN, "d", "g"}, // a task for the task definition
			{"taskDefinition", cluster, in.ARN, "agent:0", "d", "g"},
			{"taskDefinition", cluster, in.ARN, strings.TrimSuffix(b.taskDef, ":1"), "d", "g"},
			{"startedBy", cluster, in.ARN, b.taskDef, uuid.NewString() + "x", "g"}, // 37 characters
			{"startedBy", cluster, in.ARN, b.taskDef, "deploy 1", "g"},
			{"startedBy", cluster, in.ARN, b.taskDef, "", "g"},
			{"group", cluster, in.ARN, b.taskDef, "d", ""},
			{"cluster", "my cluster", in.ARN, b.taskDef, "d", "g"},
			{"cluster", in.ARN, in.ARN, b.taskDef, "d", "g"}, // an instance for the cluster
		} {
			_, err := b.c.StartTask(t.Context(), tc.cluster, tc.instance, tc.taskDef, tc.startedBy, tc.grp)
			require.ErrorIs(t, err, ecsdaemon.ErrInvalidInput, tc.field)
			require.True(t, strings.HasPrefix(err.Error(), tc.field+": "), "%q names %s", err, tc.field)
		}
		require.Len(t, b.ecs.Calls(), calls, "nothing was sent")
	})

	t.Run("a task definition ECS does not know is its ClientException", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		_, err := b.c.StartTask(t.Context(), cluster, in.ARN, "unknown:3", "d", "g")
		var ce *types.ClientException
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "TaskDefinition not found.", ce.ErrorMessage())
	})
}

func TestStopTask(t *testing.T) {
	t.Parallel()

	t.Run("stops the task with the reason", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		task := b.start(t, in.ARN, "d", "g")
		b.ecs.SetTaskRunning(task.ARN)

		got, err := b.c.StopTask(t.Context(), cluster, task.ARN, "replaced by deployment 42")
		require.NoError(t, err)
		require.Equal(t, task.ARN, got.ARN)
		require.Equal(t, "STOPPED", got.DesiredStatus)
		require.Equal(t, "replaced by deployment 42", got.StoppedReason)
		require.Equal(t, "UserInitiated", got.StopCode)
		require.Equal(t, "STOPPED", b.ecs.Tasks(cluster)[0].LastStatus)
	})

	t.Run("takes the task's id as well as its ARN", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		task := b.start(t, in.ARN, "d", "g")
		got, err := b.c.StopTask(t.Context(), cluster, task.ID, "r")
		require.NoError(t, err)
		require.Equal(t, task.ARN, got.ARN)
	})

	t.Run("refuses a task definition ARN where the task belongs (the seed's bug)", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		b.start(t, in.ARN, "d", "g")
		calls := len(b.ecs.Calls())

		_, err := b.c.StopTask(t.Context(), cluster, b.taskDef, "r")
		require.ErrorIs(t, err, ecsdaemon.ErrInvalidInput)
		require.ErrorContains(t, err, "is a task-definition ARN, not a task ARN")
		require.Len(t, b.ecs.Calls(), calls, "nothing was sent")
		require.Equal(t, "RUNNING", b.ecs.Tasks(cluster)[0].DesiredStatus)
	})

	t.Run("a task ECS does not know is ErrTaskNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.c.StopTask(t.Context(), cluster, strings.Repeat("ab", 16), "r")
		require.ErrorIs(t, err, ecsdaemon.ErrTaskNotFound)
	})

	t.Run("a reason longer than ECS takes is cut at a character boundary", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		task := b.start(t, in.ARN, "d", "g")
		got, err := b.c.StopTask(t.Context(), cluster, task.ARN, strings.Repeat("é", 200))
		require.NoError(t, err)
		require.Equal(t, strings.Repeat("é", 127), got.StoppedReason)
	})
}

func TestRetries(t *testing.T) {
	t.Parallel()

	t.Run("a throttled call is retried and succeeds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		b.ecs.Throttle("ListContainerInstances", 2)
		b.ecs.Throttle("DescribeContainerInstances", 1)

		got, err := b.c.Instances(t.Context(), cluster, nil)
		require.NoError(t, err)
		require.Equal(t, []string{in.ARN}, arns(got))
		require.Zero(t, b.ecs.PendingFaults())
		lists := b.ecs.CallsOf("ListContainerInstances")
		require.Len(t, lists, 3)
		require.Equal(t, "ThrottlingException", lists[0].Error)
		require.Empty(t, lists[2].Error)
	})

	t.Run("persistent throttling fails after MaxAttempts with ErrThrottled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		b.ecs.Throttle("StartTask", -1)

		_, err := b.c.StartTask(t.Context(), cluster, in.ARN, b.taskDef, "d", "g")
		require.ErrorIs(t, err, ecsdaemon.ErrThrottled)
		require.ErrorContains(t, err, "ECS StartTask in cluster fleet: throttled by ECS (4 attempts)")
		require.Len(t, b.ecs.CallsOf("StartTask"), maxAttempts)
		require.Empty(t, b.ecs.Tasks(cluster))
	})

	t.Run("a throttling storm spends the retry quota: calls then fail at once", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.ecs.Throttle("ListTasks", -1)
		// The SDK's quota (500 tokens, 5 a throttled retry) lasts about
		// 100 retries, 33 calls of 4 attempts.
		var err error
		for i := 0; i < 60 && (err == nil || !strings.Contains(err.Error(), "quota")); i++ {
			_, err = b.c.Tasks(t.Context(), cluster, "g")
			require.ErrorIs(t, err, ecsdaemon.ErrThrottled)
		}
		require.ErrorContains(t, err, "throttled by ECS (the client's retry quota is spent, so it was not retried)")
		before := len(b.ecs.CallsOf("ListTasks"))
		_, err = b.c.Tasks(t.Context(), cluster, "g")
		require.ErrorIs(t, err, ecsdaemon.ErrThrottled)
		require.Len(t, b.ecs.CallsOf("ListTasks"), before+1, "one attempt, no retry")
	})

	t.Run("a server error is retried", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		task := b.start(t, in.ARN, "d", "g")
		b.ecs.FailNext("StopTask", 1, 500, "ServerException", "Service Unavailable")

		_, err := b.c.StopTask(t.Context(), cluster, task.ARN, "r")
		require.NoError(t, err)
		require.Len(t, b.ecs.CallsOf("StopTask"), 2)
	})

	t.Run("StartTask is retried when throttled, never after an answer that may hide a started task", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{})
		b.ecs.FailNext("StartTask", 1, 500, "ServerException", "Service Unavailable")
		_, err := b.c.StartTask(t.Context(), cluster, in.ARN, b.taskDef, "d", "g")
		var apiErr *types.ServerException
		require.ErrorAs(t, err, &apiErr)
		require.Len(t, b.ecs.CallsOf("StartTask"), 1, "a 5xx StartTask is not retried")

		b.ecs.Throttle("StartTask", 1)
		_, err = b.c.StartTask(t.Context(), cluster, in.ARN, b.taskDef, "d", "g")
		require.NoError(t, err)
		require.Len(t, b.ecs.CallsOf("StartTask"), 3, "a throttled one is")
		require.Len(t, b.ecs.Tasks(cluster), 1)
	})

	t.Run("a client error is not retried", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.c.Tasks(t.Context(), "missing", "g")
		require.Error(t, err)
		require.False(t, errors.Is(err, ecsdaemon.ErrThrottled))
		require.Len(t, b.ecs.CallsOf("ListTasks"), 1)
	})
}

// TestWire pins the request documents each method sends: the fields, and
// nothing else (no maxResults, no include, no overrides).
func TestWire(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.ecs.AddInstance(cluster, ecsfake.InstanceSpec{Attributes: map[string]string{"zone": "a"}})
	ctx := t.Context()

	_, err := b.c.Instances(ctx, cluster, map[string]string{"zone": "a"})
	require.NoError(t, err)
	task, err := b.c.StartTask(ctx, cluster, in.ARN, b.taskDef, "dep-1", "daemon:logs")
	require.NoError(t, err)
	_, err = b.c.Tasks(ctx, cluster, "daemon:logs")
	require.NoError(t, err)
	_, err = b.c.StopTask(ctx, cluster, task.ARN, "replaced")
	require.NoError(t, err)

	want := []struct{ op, body string }{
		{"ListContainerInstances", `{"cluster":"fleet","filter":"attribute:zone == a"}`},
		{"DescribeContainerInstances", fmt.Sprintf(`{"cluster":"fleet","containerInstances":[%q]}`, in.ARN)},
		{"StartTask", fmt.Sprintf(`{"cluster":"fleet","containerInstances":[%q],"group":"daemon:logs","startedBy":"dep-1","taskDefinition":%q}`, in.ARN, b.taskDef)},
		{"ListTasks", `{"cluster":"fleet","desiredStatus":"RUNNING"}`},
		{"ListTasks", `{"cluster":"fleet","desiredStatus":"STOPPED"}`},
		{"DescribeTasks", fmt.Sprintf(`{"cluster":"fleet","tasks":[%q]}`, task.ARN)},
		{"StopTask", fmt.Sprintf(`{"cluster":"fleet","reason":"replaced","task":%q}`, task.ARN)},
	}
	calls := b.ecs.Calls()
	require.Len(t, calls, len(want))
	for i, w := range want {
		require.Equal(t, w.op, calls[i].Operation)
		require.JSONEq(t, w.body, string(calls[i].Body), w.op)
		require.Equal(t, 200, calls[i].Status)
	}
}
