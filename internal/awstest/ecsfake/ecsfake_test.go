package ecsfake_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/awstest/ecsfake"
)

const cluster = "fleet"

type bundle struct {
	srv     *ecsfake.Server
	ecs     *ecs.Client
	taskDef string
}

// setup starts a fake with one cluster and task definition agent:1, and an
// SDK client that does not retry, so every answer shows.
func setup(t *testing.T, o ecsfake.Options) *bundle {
	t.Helper()
	srv := ecsfake.New(t, o)
	srv.AddCluster(cluster)
	td := srv.RegisterTaskDefinition(ecsfake.TaskDefinition{Family: "agent", CPU: 256, Memory: 512})
	client := ecs.NewFromConfig(srv.Config(), func(eo *ecs.Options) { eo.Retryer = aws.NopRetryer{} })
	return &bundle{srv: srv, ecs: client, taskDef: td}
}

func (b *bundle) start(t *testing.T, in *ecs.StartTaskInput) *ecs.StartTaskOutput {
	t.Helper()
	if in.Cluster == nil {
		in.Cluster = aws.String(cluster)
	}
	if in.TaskDefinition == nil {
		in.TaskDefinition = aws.String(b.taskDef)
	}
	out, err := b.ecs.StartTask(t.Context(), in)
	require.NoError(t, err)
	return out
}

// requireAPIError checks an SDK error's ECS code and message.
func requireAPIError(t *testing.T, err error, code, message string) {
	t.Helper()
	var apiErr smithy.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, code, apiErr.ErrorCode())
	require.Contains(t, apiErr.ErrorMessage(), message)
}

func TestSignatures(t *testing.T) {
	t.Parallel()
	b := setup(t, ecsfake.Options{})
	list := func(cfg aws.Config) error {
		_, err := ecs.NewFromConfig(cfg).ListContainerInstances(t.Context(), &ecs.ListContainerInstancesInput{Cluster: aws.String(cluster)})
		return err
	}
	require.NoError(t, list(b.srv.Config()))

	wrongSecret := b.srv.Config()
	creds, err := b.srv.Credentials().Retrieve(t.Context())
	require.NoError(t, err)
	wrongSecret.Credentials = credentials.NewStaticCredentialsProvider(creds.AccessKeyID, "not-the-secret", "")
	requireAPIError(t, list(wrongSecret), "InvalidSignatureException", "does not match")

	unknownKey := b.srv.Config()
	unknownKey.Credentials = credentials.NewStaticCredentialsProvider("AKIAUNKNOWN", creds.SecretAccessKey, "")
	requireAPIError(t, list(unknownKey), "UnrecognizedClientException", "security token")

	otherRegion := b.srv.Config()
	otherRegion.Region = "eu-west-1"
	requireAPIError(t, list(otherRegion), "InvalidSignatureException", "eu-west-1/ecs")

	t.Run("an unsigned request", func(t *testing.T) {
		resp := post(t, b.srv.URL, "ListTasks", `{"cluster":"fleet"}`, nil)
		require.Equal(t, http.StatusBadRequest, resp.status)
		require.Equal(t, "MissingAuthenticationTokenException", resp.errorType)
	})

	t.Run("a body changed after signing", func(t *testing.T) {
		resp := post(t, b.srv.URL, "ListTasks", `{"cluster":"fleet"}`, func(r *http.Request) {
			sign(t, r, creds, `{"cluster":"other"}`, b.srv.Region())
		})
		require.Equal(t, "InvalidSignatureException", resp.errorType)
	})

	t.Run("a correctly signed raw request", func(t *testing.T) {
		body := `{"cluster":"fleet"}`
		resp := post(t, b.srv.URL, "ListTasks", body, func(r *http.Request) { sign(t, r, creds, body, b.srv.Region()) })
		require.Equal(t, http.StatusOK, resp.status, resp.body)
		require.JSONEq(t, `{"taskArns":[]}`, resp.body)
	})
}

type response struct {
	status    int
	errorType string
	body      string
}

// post sends a raw JSON 1.1 request, after prepare (which may sign it).
func post(t *testing.T, url, op, body string, prepare func(*http.Request)) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", ecsfake.TargetPrefix+op)
	if prepare != nil {
		prepare(req)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, errorType: resp.Header.Get("X-Amzn-ErrorType"), body: string(out)}
}

func sign(t *testing.T, r *http.Request, creds aws.Credentials, body, region string) {
	t.Helper()
	sum := sha256.Sum256([]byte(body))
	require.NoError(t, v4.NewSigner().SignHTTP(context.Background(), creds, r, hex.EncodeToString(sum[:]), "ecs", region, time.Now()))
}

func TestProtocolErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, ecsfake.Options{})
	creds, err := b.srv.Credentials().Retrieve(t.Context())
	require.NoError(t, err)
	signed := func(body string) func(*http.Request) {
		return func(r *http.Request) { sign(t, r, creds, body, b.srv.Region()) }
	}

	resp := post(t, b.srv.URL, "CreateService", `{}`, signed(`{}`))
	require.Equal(t, "UnknownOperationException", resp.errorType)

	body := `{"cluster":"fleet","clustr":"typo"}`
	resp = post(t, b.srv.URL, "ListTasks", body, signed(body))
	require.Equal(t, "SerializationException", resp.errorType)
	var doc map[string]string
	require.NoError(t, json.Unmarshal([]byte(resp.body), &doc))
	require.Equal(t, "SerializationException", doc["__type"])
	require.Contains(t, doc["message"], "clustr")
}

func TestIdentifiers(t *testing.T) {
	t.Parallel()
	b := setup(t, ecsfake.Options{})
	in := b.srv.AddInstance(cluster, ecsfake.InstanceSpec{})
	started := b.start(t, &ecs.StartTaskInput{ContainerInstances: []string{in.ARN}})
	task := started.Tasks[0]
	ctx := t.Context()

	t.Run("a task definition ARN is not a task", func(t *testing.T) {
		_, err := b.ecs.StopTask(ctx, &ecs.StopTaskInput{Cluster: aws.String(cluster), Task: aws.String(b.taskDef)})
		var invalid *types.InvalidParameterException
		require.ErrorAs(t, err, &invalid)
		require.Equal(t, "Task Identifier is invalid", invalid.ErrorMessage())
		_, err = b.ecs.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(cluster), Tasks: []string{b.taskDef}})
		requireAPIError(t, err, "InvalidParameterException", "Task Identifier is invalid")
	})

	t.Run("a task is named by id, long ARN or old-format ARN", func(t *testing.T) {
		id := aws.ToString(task.TaskArn)[strings.LastIndex(aws.ToString(task.TaskArn), "/")+1:]
		oldARN := "arn:aws:ecs:" + b.srv.Region() + ":" + b.srv.Account() + ":task/" + id
		out, err := b.ecs.DescribeTasks(ctx, &ecs.DescribeTasksInput{
			Cluster: aws.String(cluster), Tasks: []string{id, aws.ToString(task.TaskArn), oldARN},
		})
		require.NoError(t, err)
		require.Len(t, out.Tasks, 3)
		require.Empty(t, out.Failures)
	})

	t.Run("a task ARN of another cluster is invalid here", func(t *testing.T) {
		b.srv.AddCluster("other")
		_, err := b.ecs.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String("other"), Tasks: []string{aws.ToString(task.TaskArn)}})
		requireAPIError(t, err, "InvalidParameterException", "Task Identifier is invalid")
	})

	t.Run("an unknown task is a MISSING failure to describe and not found to stop", func(t *testing.T) {
		unknown := strings.Repeat("0f", 16)
		out, err := b.ecs.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(cluster), Tasks: []string{unknown}})
		require.NoError(t, err)
		require.Empty(t, out.Tasks)
		require.Len(t, out.Failures, 1)
		require.Equal(t, "MISSING", aws.ToString(out.Failures[0].Reason))
		require.True(t, strings.HasSuffix(aws.ToString(out.Failures[0].Arn), ":task/fleet/"+unknown))
		_, err = b.ecs.StopTask(ctx, &ecs.StopTaskInput{Cluster: aws.String(cluster), Task: aws.String(unknown)})
		requireAPIError(t, err, "InvalidParameterException", "The referenced task was not found.")
	})

	t.Run("clusters by name or ARN; unknown ones not found; others invalid", func(t *testing.T) {
		clusterARN := "arn:aws:ecs:" + b.srv.Region() + ":" + b.srv.Account() + ":cluster/" + cluster
		out, err := b.ecs.ListTasks(ctx, &ecs.ListTasksInput{Cluster: aws.String(clusterARN)})
		require.NoError(t, err)
		require.Equal(t, []string{aws.ToString(task.TaskArn)}, out.TaskArns)
		_, err = b.ecs.ListTasks(ctx, &ecs.ListTasksInput{Cluster: aws.String("nope")})
		var notFound *types.ClusterNotFoundException
		require.ErrorAs(t, err, &notFound)
		_, err = b.ecs.ListTasks(ctx, &ecs.ListTasksInput{Cluster: aws.String(in.ARN)})
		requireAPIError(t, err, "InvalidParameterException", "Cluster Identifier is invalid")
		_, err = b.ecs.ListTasks(ctx, &ecs.ListTasksInput{}) // the default cluster, absent here
		require.ErrorAs(t, err, &notFound)
	})

	t.Run("container instances and task definitions", func(t *testing.T) {
		_, err := b.ecs.StartTask(ctx, &ecs.StartTaskInput{Cluster: aws.String(cluster), TaskDefinition: aws.String(b.taskDef), ContainerInstances: []string{b.taskDef}})
		requireAPIError(t, err, "InvalidParameterException", "Container Instance Identifier is invalid")
		_, err = b.ecs.StartTask(ctx, &ecs.StartTaskInput{Cluster: aws.String(cluster), TaskDefinition: task.TaskArn, ContainerInstances: []string{in.ARN}})
		requireAPIError(t, err, "InvalidParameterException", "Task Definition Identifier is invalid")
		_, err = b.ecs.StartTask(ctx, &ecs.StartTaskInput{Cluster: aws.String(cluster), TaskDefinition: aws.String("agent:0"), ContainerInstances: []string{in.ARN}})
		requireAPIError(t, err, "InvalidParameterException", "Invalid revision number")
		_, err = b.ecs.StartTask(ctx, &ecs.StartTaskInput{Cluster: aws.String(cluster), TaskDefinition: aws.String("agent:9"), ContainerInstances: []string{in.ARN}})
		requireAPIError(t, err, "ClientException", "TaskDefinition not found.")
		out, err := b.ecs.DescribeContainerInstances(ctx, &ecs.DescribeContainerInstancesInput{Cluster: aws.String(cluster), ContainerInstances: []string{in.ID, strings.Repeat("ab", 16)}})
		require.NoError(t, err)
		require.Len(t, out.ContainerInstances, 1)
		require.Equal(t, "MISSING", aws.ToString(out.Failures[0].Reason))
	})
}

func TestStartTask(t *testing.T) {
	t.Parallel()
	b := setup(t, ecsfake.Options{})
	in := b.srv.AddInstance(cluster, ecsfake.InstanceSpec{CPU: 1024, Memory: 1024})
	ctx := t.Context()

	t.Run("the group defaults to the family; overrides are echoed", func(t *testing.T) {
		out := b.start(t, &ecs.StartTaskInput{
			ContainerInstances: []string{in.ARN},
			Overrides: &types.TaskOverride{ContainerOverrides: []types.ContainerOverride{
				{Name: aws.String("agent"), Command: []string{"terraform", "plan"}},
			}},
		})
		task := out.Tasks[0]
		require.Equal(t, "family:agent", aws.ToString(task.Group))
		require.Empty(t, aws.ToString(task.StartedBy))
		require.Equal(t, []string{"terraform", "plan"}, task.Overrides.ContainerOverrides[0].Command)
		require.Equal(t, "256", aws.ToString(task.Cpu))
		require.Equal(t, types.LaunchTypeEc2, task.LaunchType)
		require.Len(t, task.Containers, 1)
		require.Equal(t, "agent", aws.ToString(task.Containers[0].Name))
		require.NotNil(t, task.CreatedAt)
	})

	t.Run("startedBy is at most 36 of ECS's characters", func(t *testing.T) {
		_, err := b.ecs.StartTask(ctx, &ecs.StartTaskInput{Cluster: aws.String(cluster), TaskDefinition: aws.String(b.taskDef), ContainerInstances: []string{in.ARN}, StartedBy: aws.String(strings.Repeat("x", 37))})
		requireAPIError(t, err, "InvalidParameterException", "startedBy")
		_, err = b.ecs.StartTask(ctx, &ecs.StartTaskInput{Cluster: aws.String(cluster), TaskDefinition: aws.String(b.taskDef), ContainerInstances: []string{in.ARN}, StartedBy: aws.String("a b")})
		requireAPIError(t, err, "InvalidParameterException", "startedBy")
		b.start(t, &ecs.StartTaskInput{ContainerInstances: []string{in.ARN}, StartedBy: aws.String(strings.Repeat("x", 36))})
	})

	t.Run("one to ten instances", func(t *testing.T) {
		_, err := b.ecs.StartTask(ctx, &ecs.StartTaskInput{Cluster: aws.String(cluster), TaskDefinition: aws.String(b.taskDef), ContainerInstances: []string{}})
		requireAPIError(t, err, "InvalidParameterException", "containerInstances")
		eleven := make([]string, 11)
		for i := range eleven {
			eleven[i] = in.ARN
		}
		_, err = b.ecs.StartTask(ctx, &ecs.StartTaskInput{Cluster: aws.String(cluster), TaskDefinition: aws.String(b.taskDef), ContainerInstances: eleven})
		requireAPIError(t, err, "InvalidParameterException", "containerInstances")
	})

	t.Run("tasks hold CPU and memory until they stop; the rest are failures", func(t *testing.T) {
		fresh := b.srv.AddInstance(cluster, ecsfake.InstanceSpec{CPU: 1024, Memory: 1024})
		out := b.start(t, &ecs.StartTaskInput{ContainerInstances: []string{fresh.ARN, fresh.ARN, fresh.ARN}})
		require.Len(t, out.Tasks, 2)
		require.Len(t, out.Failures, 1)
		require.Equal(t, "RESOURCE:MEMORY", aws.ToString(out.Failures[0].Reason))
		require.Equal(t, fresh.ARN, aws.ToString(out.Failures[0].Arn))

		b.srv.SetTaskRunning(aws.ToString(out.Tasks[0].TaskArn))
		desc, err := b.ecs.DescribeContainerInstances(ctx, &ecs.DescribeContainerInstancesInput{Cluster: aws.String(cluster), ContainerInstances: []string{fresh.ARN}})
		require.NoError(t, err)
		ci := desc.ContainerInstances[0]
		require.Equal(t, int32(1), ci.RunningTasksCount)
		require.Equal(t, int32(1), ci.PendingTasksCount)
		require.Equal(t, "MEMORY", aws.ToString(ci.RemainingResources[1].Name))
		require.Equal(t, int32(0), ci.RemainingResources[1].IntegerValue)
		require.Equal(t, int32(512), ci.RemainingResources[0].IntegerValue)

		stopped, err := b.ecs.StopTask(ctx, &ecs.StopTaskInput{Cluster: aws.String(cluster), Task: out.Tasks[0].TaskArn})
		require.NoError(t, err)
		require.Equal(t, int32(143), aws.ToInt32(stopped.Task.Containers[0].ExitCode), "a running task stopped exits on SIGTERM")
		again := b.start(t, &ecs.StartTaskInput{ContainerInstances: []string{fresh.ARN}})
		require.Len(t, again.Tasks, 1, "the stopped task's memory is free again")
	})
}

func TestStartRunning(t *testing.T) {
	t.Parallel()
	b := setup(t, ecsfake.Options{StartRunning: true})
	in := b.srv.AddInstance(cluster, ecsfake.InstanceSpec{})
	task := b.start(t, &ecs.StartTaskInput{ContainerInstances: []string{in.ARN}}).Tasks[0]
	require.Equal(t, "RUNNING", aws.ToString(task.LastStatus))
	require.NotNil(t, task.StartedAt)
	desc, err := b.ecs.DescribeContainerInstances(t.Context(), &ecs.DescribeContainerInstancesInput{Cluster: aws.String(cluster), ContainerInstances: []string{in.ARN}})
	require.NoError(t, err)
	require.Equal(t, int32(1), desc.ContainerInstances[0].RunningTasksCount)
}

func TestListTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, ecsfake.Options{})
	other := b.srv.RegisterTaskDefinition(ecsfake.TaskDefinition{Family: "other"})
	in1 := b.srv.AddInstance(cluster, ecsfake.InstanceSpec{})
	in2 := b.srv.AddInstance(cluster, ecsfake.InstanceSpec{})
	arn := func(out *ecs.StartTaskOutput) string { return aws.ToString(out.Tasks[0].TaskArn) }
	a := arn(b.start(t, &ecs.StartTaskInput{ContainerInstances: []string{in1.ARN}, StartedBy: aws.String("d1")}))
	c := arn(b.start(t, &ecs.StartTaskInput{ContainerInstances: []string{in2.ARN}, StartedBy: aws.String("d2")}))
	o := arn(b.start(t, &ecs.StartTaskInput{ContainerInstances: []string{in2.ARN}, TaskDefinition: aws.String(other)}))
	s := arn(b.start(t, &ecs.StartTaskInput{ContainerInstances: []string{in1.ARN}, StartedBy: aws.String("d1")}))
	b.srv.StopTaskWithExit(s, 1, "")

	for _, tc := range []struct {
		name string
		in   ecs.ListTasksInput
		want []string
	}{
		{"desired RUNNING by default", ecs.ListTasksInput{}, []string{a, c, o}},
		{"desired STOPPED", ecs.ListTasksInput{DesiredStatus: types.DesiredStatusStopped}, []string{s}},
		{"by instance ARN", ecs.ListTasksInput{ContainerInstance: aws.String(in2.ARN)}, []string{c, o}},
		{"by instance id", ecs.ListTasksInput{ContainerInstance: aws.String(in1.ID)}, []string{a}},
		{"by family", ecs.ListTasksInput{Family: aws.String("other")}, []string{o}},
		{"by startedBy", ecs.ListTasksInput{StartedBy: aws.String("d1"), DesiredStatus: types.DesiredStatusStopped}, []string{s}},
		{"no services here", ecs.ListTasksInput{ServiceName: aws.String("svc")}, nil},
	} {
		tc.in.Cluster = aws.String(cluster)
		out, err := b.ecs.ListTasks(t.Context(), &tc.in)
		require.NoError(t, err, tc.name)
		require.ElementsMatch(t, tc.want, out.TaskArns, tc.name)
	}

	_, err := b.ecs.ListTasks(t.Context(), &ecs.ListTasksInput{Cluster: aws.String(cluster), StartedBy: aws.String("d1"), Family: aws.String("agent")})
	requireAPIError(t, err, "InvalidParameterException", "startedBy must be the only filter")
}

func TestPaging(t *testing.T) {
	t.Parallel()

	t.Run("maxResults, nextToken, and a cap below maxResults", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ecsfake.Options{MaxPageSize: 7})
		var before []string
		for range 20 {
			before = append(before, b.srv.AddInstance(cluster, ecsfake.InstanceSpec{}).ARN)
		}
		in := &ecs.ListContainerInstancesInput{Cluster: aws.String(cluster), MaxResults: aws.Int32(50)}
		pages := ecs.NewListContainerInstancesPaginator(b.ecs, in)
		seen := map[string]bool{}
		var sizes []int
		for pages.HasMorePages() {
			page, err := pages.NextPage(t.Context())
			require.NoError(t, err)
			sizes = append(sizes, len(page.ContainerInstanceArns))
			for _, a := range page.ContainerInstanceArns {
				require.False(t, seen[a], "%s twice", a)
				seen[a] = true
			}
			if len(sizes) == 1 { // an instance joining mid-listing does not shift the pages
				b.srv.AddInstance(cluster, ecsfake.InstanceSpec{})
			}
		}
		for _, a := range before {
			require.True(t, seen[a], "%s was listed before the paging began", a)
		}
		require.Equal(t, []int{7, 7}, sizes[:2], "pages are capped at MaxPageSize")
		require.Len(t, sizes, 3)
	})

	t.Run("refuses maxResults outside 1–100 and tokens of another query", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ecsfake.Options{})
		for range 3 {
			b.srv.AddInstance(cluster, ecsfake.InstanceSpec{})
		}
		for _, n := range []int32{0, 101} {
			_, err := b.ecs.ListContainerInstances(t.Context(), &ecs.ListContainerInstancesInput{Cluster: aws.String(cluster), MaxResults: aws.Int32(n)})
			requireAPIError(t, err, "InvalidParameterException", "maxResults")
		}
		first, err := b.ecs.ListContainerInstances(t.Context(), &ecs.ListContainerInstancesInput{Cluster: aws.String(cluster), MaxResults: aws.Int32(1)})
		require.NoError(t, err)
		require.NotNil(t, first.NextToken)
		_, err = b.ecs.ListContainerInstances(t.Context(), &ecs.ListContainerInstancesInput{Cluster: aws.String(cluster), NextToken: first.NextToken, Filter: aws.String("attribute:x exists")})
		requireAPIError(t, err, "InvalidParameterException", "Invalid nextToken")
		_, err = b.ecs.ListTasks(t.Context(), &ecs.ListTasksInput{Cluster: aws.String(cluster), NextToken: aws.String("garbage")})
		requireAPIError(t, err, "InvalidParameterException", "Invalid nextToken")
	})
}

func TestListContainerInstances(t *testing.T) {
	t.Parallel()
	b := setup(t, ecsfake.Options{})
	web := b.srv.AddInstance(cluster, ecsfake.InstanceSpec{Attributes: map[string]string{"role": "web"}})
	drain := b.srv.AddInstance(cluster, ecsfake.InstanceSpec{Attributes: map[string]string{"role": "web"}})
	gone := b.srv.AddInstance(cluster, ecsfake.InstanceSpec{Attributes: map[string]string{"role": "web"}})
	b.srv.SetInstanceStatus(drain.ARN, ecsfake.StatusDraining)
	b.srv.TerminateInstance(gone.ARN)
	list := func(in ecs.ListContainerInstancesInput) ([]string, error) {
		in.Cluster = aws.String(cluster)
		out, err := b.ecs.ListContainerInstances(t.Context(), &in)
		if err != nil {
			return nil, err
		}
		return out.ContainerInstanceArns, nil
	}

	got, err := list(ecs.ListContainerInstancesInput{Filter: aws.String("attribute:role == web")})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{web.ARN, drain.ARN}, got, "every status but INACTIVE by default")
	got, err = list(ecs.ListContainerInstancesInput{Status: types.ContainerInstanceStatusDraining})
	require.NoError(t, err)
	require.Equal(t, []string{drain.ARN}, got)
	_, err = list(ecs.ListContainerInstancesInput{Filter: aws.String("attribute:role =~ w.*")})
	requireAPIError(t, err, "InvalidParameterException", "Invalid filter expression")

	b.srv.SetAttribute(web.ARN, "role", "db", true)
	got, err = list(ecs.ListContainerInstancesInput{Filter: aws.String("attribute:role == db")})
	require.NoError(t, err)
	require.Equal(t, []string{web.ARN}, got)

	desc, err := b.ecs.DescribeContainerInstances(t.Context(), &ecs.DescribeContainerInstancesInput{Cluster: aws.String(cluster), ContainerInstances: []string{gone.ARN}})
	require.NoError(t, err)
	require.Equal(t, "INACTIVE", aws.ToString(desc.ContainerInstances[0].Status), "a terminated instance is still described for a while")
	require.False(t, desc.ContainerInstances[0].AgentConnected)
}

func TestFaults(t *testing.T) {
	t.Parallel()
	b := setup(t, ecsfake.Options{})
	ctx := t.Context()
	list := func() error {
		_, err := b.ecs.ListTasks(ctx, &ecs.ListTasksInput{Cluster: aws.String(cluster)})
		return err
	}

	b.srv.FailNext("ListTasks", 1, 500, "ServerException", "boom")
	b.srv.Throttle("ListTasks", 2)
	require.Equal(t, 2, b.srv.PendingFaults())
	requireAPIError(t, list(), "ServerException", "boom")
	requireAPIError(t, list(), "ThrottlingException", "Rate exceeded")
	requireAPIError(t, list(), "ThrottlingException", "Rate exceeded")
	require.NoError(t, list())
	require.Zero(t, b.srv.PendingFaults())

	b.srv.Throttle("ListTasks", -1)
	for range 3 {
		requireAPIError(t, list(), "ThrottlingException", "Rate exceeded")
	}
	require.Equal(t, 1, b.srv.PendingFaults())
	b.srv.ClearFaults()
	require.NoError(t, list())

	ran := 0
	b.srv.BeforeNext("ListTasks", func() { ran++ })
	require.NoError(t, list())
	require.NoError(t, list())
	require.Equal(t, 1, ran, "a hook runs once")

	calls := b.srv.CallsOf("ListTasks")
	require.Len(t, calls, 10)
	require.Equal(t, 500, calls[0].Status)
	require.Equal(t, "ServerException", calls[0].Error)
	require.Equal(t, 200, calls[9].Status)
	require.True(t, bytes.Contains(calls[9].Body, []byte(`"cluster":"fleet"`)))
}
