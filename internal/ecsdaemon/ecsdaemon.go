// Package ecsdaemon is the ecs backend of the daemons area: the six Amazon
// ECS calls a daemon scheduler needs, through aws-sdk-go-v2's ECS client,
// returning plain types.
//
//   - Instances: ListContainerInstances (every page) with the environment's
//     attributes as a cluster-query-language filter, then
//     DescribeContainerInstances in chunks of 100.
//   - Tasks: ListTasks (every page, desired RUNNING and STOPPED) then
//     DescribeTasks in chunks of 100, keeping one task group. ECS's ListTasks
//     cannot filter by group, so this reads the whole cluster's tasks;
//     ClusterTasks returns them all, for a caller keeping several groups,
//     and TasksStartedBy lists only one deployment's (a ListTasks filter).
//   - StartTask on one container instance with startedBy = the deployment
//     and group = the environment; ECS's per-instance failures (RESOURCE:*,
//     AGENT, MISSING) come back as a *StartFailure.
//   - StopTask.
//
// Identifiers are checked before any call: a task-definition ARN handed to
// StopTask (the mistake Blox's scheduler once shipped) or an instance that
// is not a container-instance ARN is refused with ErrInvalidInput, naming
// the field. Throttling is left to the SDK's standard retryer, bounded by
// Options.MaxAttempts; a call still throttled after them fails with an error
// wrapping ErrThrottled. See docs/areas/daemons-ecs.md.
package ecsdaemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

// Defaults of Options.
const (
	DefaultMaxAttempts = 5
	DefaultMaxBackoff  = 20 * time.Second
	defaultRegion      = "us-east-1"
)

// ECS's batch limits.
const (
	describeChunk      = 100 // DescribeContainerInstances, DescribeTasks
	maxStopReasonBytes = 255 // StopTask's reason
)

// Errors callers can test with errors.Is.
var (
	// ErrInvalidInput: an argument is not something ECS would accept; the
	// message names the field. Nothing was sent.
	ErrInvalidInput = errors.New("invalid ECS argument")
	// ErrThrottled: ECS still throttled the call after every attempt.
	ErrThrottled = errors.New("throttled by ECS")
	// ErrTaskNotFound: StopTask named a task ECS does not know (never
	// started, or stopped longer ago than ECS keeps stopped tasks).
	ErrTaskNotFound = errors.New("ECS task not found")
)

// StartFailure is ECS refusing to start a task on an instance: it answered
// StartTask with a failures entry instead of a task.
type StartFailure struct {
	Instance string // the container instance ARN ECS named
	// Reason is ECS's: RESOURCE:CPU, RESOURCE:MEMORY, RESOURCE:PORTS (not
	// enough left), AGENT (its agent is disconnected), MISSING (the instance
	// is not registered), ATTRIBUTE, …
	Reason string
	Detail string
}

func (f *StartFailure) Error() string {
	msg := fmt.Sprintf("ECS could not start the task on %s: %s", f.Instance, f.Reason)
	if f.Detail != "" {
		msg += " (" + f.Detail + ")"
	}
	return msg
}

// Options configure a Client.
type Options struct {
	// Region of the cluster; empty: the SDK's default chain, else us-east-1.
	Region string
	// Endpoint replaces ECS's (a VPC endpoint, or a test server).
	Endpoint string
	// Credentials to call ECS with; nil: the SDK's default chain.
	Credentials aws.CredentialsProvider
	// MaxAttempts bounds the attempts of one call, the first included, when
	// ECS throttles it or fails with a retryable error; 0: DefaultMaxAttempts.
	MaxAttempts int
	// MaxBackoff caps the SDK's jittered exponential wait between two
	// attempts; 0: DefaultMaxBackoff.
	MaxBackoff time.Duration
	// HTTPClient sends the requests (a proxy, other timeouts); nil: the
	// SDK's default, which honours AWS_CA_BUNDLE.
	HTTPClient aws.HTTPClient
}

// Client calls ECS for the daemons area.
type Client struct {
	ecs          *ecs.Client
	startRetryer aws.Retryer
}

// New builds a Client. It makes no AWS call.
func New(ctx context.Context, o Options) (*Client, error) {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	var load []func(*config.LoadOptions) error
	if o.Region != "" {
		load = append(load, config.WithRegion(o.Region))
	}
	if o.Credentials != nil {
		load = append(load, config.WithCredentialsProvider(o.Credentials))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = defaultRegion
	}
	// One retry quota for every call of this client, StartTask's included.
	limiter := ratelimit.NewTokenRateLimit(retry.DefaultRetryRateTokens)
	client := ecs.NewFromConfig(cfg, func(eo *ecs.Options) {
		if o.Endpoint != "" {
			eo.BaseEndpoint = aws.String(o.Endpoint)
		}
		if o.HTTPClient != nil {
			// set here, not in the loaded config, which would try to add
			// AWS_CA_BUNDLE to it and fail on a client it cannot configure
			eo.HTTPClient = o.HTTPClient
		}
		eo.HTTPClient = closedBodyGuard{eo.HTTPClient}
		eo.Retryer = newRetryer(o, limiter, retry.DefaultRetryables)
	})
	return &Client{ecs: client, startRetryer: newRetryer(o, limiter, startTaskRetryables)}, nil
}

// startTaskRetryables: StartTask is not idempotent, so it is retried only
// when ECS refused it for throttling. A 5xx or a connection lost after the
// request went out may hide a started task; retrying could start a second
// one on the instance, so such a failure is returned instead, and the
// caller's next pass lists the instance's tasks before starting again.
var startTaskRetryables = []retry.IsErrorRetryable{
	retry.NoRetryCanceledError{},
	retry.RetryableErrorCode{Codes: retry.DefaultThrottleErrorCodes},
}

func newRetryer(o Options, limiter retry.RateLimiter, retryables []retry.IsErrorRetryable) aws.Retryer {
	return retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = o.MaxAttempts
		so.MaxBackoff = o.MaxBackoff
		so.RateLimiter = limiter
		so.Retryables = retryables
	})
}

// closedBodyGuard keeps a call from reaching ECS twice through a race in
// smithy-go: it closes a request's body as soon as the response headers
// arrive, and the closed body then answers WriteTo with io.EOF, an error.
// When ECS answers before net/http's write loop has made its final check for
// bytes past Content-Length, that check fails, the transport closes the
// connection under the response being read, and the SDK retries a call ECS
// has already carried out: for StartTask, a second task. Hiding WriteTo
// makes the check Read, which a closed body answers with a plain EOF.
// (internal/awstest/ecsfake's HTTPClient does the same for raw SDK clients.)
type closedBodyGuard struct{ next aws.HTTPClient }

func (g closedBodyGuard) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		r = r.Clone(r.Context())
		r.Body = struct{ io.ReadCloser }{r.Body}
	}
	return g.next.Do(r)
}

// Instance is a container instance of a cluster.
type Instance struct {
	ID             string // the last part of ARN
	ARN            string
	EC2InstanceID  string
	Status         string // ACTIVE, DRAINING, REGISTERING, DEREGISTERING, …
	AgentConnected bool
	// Attributes are every attribute ECS reports, its own ecs.* ones
	// included; an attribute without a value maps to "".
	Attributes   map[string]string
	RegisteredAt time.Time
}

// Task is an ECS task.
type Task struct {
	ID             string // the last part of ARN
	ARN            string
	Instance       string // container instance ARN
	TaskDefinition string // ARN
	StartedBy      string
	Group          string
	LastStatus     string // PROVISIONING, PENDING, ACTIVATING, RUNNING, …, STOPPED
	DesiredStatus  string // RUNNING or STOPPED
	// ExitCode is set once the task's containers have exited: the first
	// non-zero exit code among them, else 0. Nil while any is running, and
	// for a task ECS stopped without its containers ever exiting.
	ExitCode      *int
	StartedAt     time.Time // zero until RUNNING
	StoppedAt     time.Time // zero until STOPPED
	StoppedReason string
	StopCode      string // EssentialContainerExited, UserInitiated, TaskFailedToStart, …
}

// Running tells whether ECS reports the task running and meant to run.
func (t Task) Running() bool { return t.LastStatus == "RUNNING" && t.DesiredStatus == "RUNNING" }

// Instances returns the cluster's container instances (all statuses but
// INACTIVE) that carry every attribute in attributes, sorted by ARN. An
// attribute with the value "" only has to be present.
func (c *Client) Instances(ctx context.Context, cluster string, attributes map[string]string) ([]Instance, error) {
	if err := checkCluster(cluster); err != nil {
		return nil, err
	}
	filter, err := Filter(attributes)
	if err != nil {
		return nil, err
	}
	in := &ecs.ListContainerInstancesInput{Cluster: aws.String(cluster)}
	if filter != "" {
		in.Filter = aws.String(filter)
	}
	var arns []string
	pages := ecs.NewListContainerInstancesPaginator(c.ecs, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, c.callError("ListContainerInstances", cluster, err)
		}
		arns = append(arns, page.ContainerInstanceArns...)
	}
	slices.Sort(arns)
	arns = slices.Compact(arns)
	var out []Instance
	for chunk := range slices.Chunk(arns, describeChunk) {
		res, err := c.ecs.DescribeContainerInstances(ctx, &ecs.DescribeContainerInstancesInput{
			Cluster: aws.String(cluster), ContainerInstances: chunk,
		})
		if err != nil {
			return nil, c.callError("DescribeContainerInstances", cluster, err)
		}
		// MISSING: deregistered since it was listed; it is gone, not an error.
		if err := unexpectedFailures("DescribeContainerInstances", res.Failures); err != nil {
			return nil, err
		}
		for _, ci := range res.ContainerInstances {
			// INACTIVE: deregistered since it was listed.
			if aws.ToString(ci.Status) != "INACTIVE" {
				out = append(out, instanceOf(ci))
			}
		}
	}
	slices.SortFunc(out, func(a, b Instance) int { return strings.Compare(a.ARN, b.ARN) })
	return out, nil
}

func instanceOf(ci types.ContainerInstance) Instance {
	in := Instance{
		ARN:            aws.ToString(ci.ContainerInstanceArn),
		EC2InstanceID:  aws.ToString(ci.Ec2InstanceId),
		Status:         aws.ToString(ci.Status),
		AgentConnected: ci.AgentConnected,
		Attributes:     make(map[string]string, len(ci.Attributes)),
		RegisteredAt:   aws.ToTime(ci.RegisteredAt),
	}
	in.ID = lastSegment(in.ARN)
	for _, a := range ci.Attributes {
		in.Attributes[aws.ToString(a.Name)] = aws.ToString(a.Value)
	}
	return in
}

// Tasks returns the tasks of one task group in a cluster, running and
// recently stopped (ECS keeps stopped tasks about an hour), sorted by
// instance then ARN.
func (c *Client) Tasks(ctx context.Context, cluster, group string) ([]Task, error) {
	if group == "" {
		return nil, fmt.Errorf("group: %w: empty", ErrInvalidInput)
	}
	all, err := c.ClusterTasks(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(t Task) bool { return t.Group != group }), nil
}

// ClusterTasks returns every task of a cluster, running and recently
// stopped, whatever its group, sorted by instance then ARN: what Tasks
// reads anyway, for a caller that keeps several groups (environments) of
// one cluster and should read it once.
func (c *Client) ClusterTasks(ctx context.Context, cluster string) ([]Task, error) {
	return c.listAndDescribe(ctx, cluster, "")
}

// TasksStartedBy returns the tasks of a cluster started with startedBy (a
// deployment), running and recently stopped, sorted by instance then ARN:
// one ListTasks filter, so a deployment can check which instances already
// have its task before it starts more (ECS's StartTask is not idempotent).
func (c *Client) TasksStartedBy(ctx context.Context, cluster, startedBy string) ([]Task, error) {
	if err := checkStartedBy(startedBy); err != nil {
		return nil, err
	}
	return c.listAndDescribe(ctx, cluster, startedBy)
}

// listAndDescribe lists a cluster's tasks (those started by startedBy, when
// set) with desired status RUNNING then STOPPED, every page, and describes
// them 100 at a time. RUNNING first: a task that stops between the two
// lists shows in both (deduplicated), never in neither.
func (c *Client) listAndDescribe(ctx context.Context, cluster, startedBy string) ([]Task, error) {
	if err := checkCluster(cluster); err != nil {
		return nil, err
	}
	var arns []string
	for _, desired := range []types.DesiredStatus{types.DesiredStatusRunning, types.DesiredStatusStopped} {
		in := &ecs.ListTasksInput{Cluster: aws.String(cluster), DesiredStatus: desired}
		if startedBy != "" {
			in.StartedBy = aws.String(startedBy)
		}
		pages := ecs.NewListTasksPaginator(c.ecs, in)
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, c.callError("ListTasks", cluster, err)
			}
			arns = append(arns, page.TaskArns...)
		}
	}
	slices.Sort(arns)
	arns = slices.Compact(arns)
	var out []Task
	for chunk := range slices.Chunk(arns, describeChunk) {
		res, err := c.ecs.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(cluster), Tasks: chunk})
		if err != nil {
			return nil, c.callError("DescribeTasks", cluster, err)
		}
		// MISSING: a stopped task ECS forgot since it was listed.
		if err := unexpectedFailures("DescribeTasks", res.Failures); err != nil {
			return nil, err
		}
		for _, t := range res.Tasks {
			out = append(out, taskOf(t))
		}
	}
	slices.SortFunc(out, func(a, b Task) int {
		if n := strings.Compare(a.Instance, b.Instance); n != 0 {
			return n
		}
		return strings.Compare(a.ARN, b.ARN)
	})
	return out, nil
}

// unexpectedFailures turns a Describe call's failures other than MISSING
// into an error.
func unexpectedFailures(op string, failures []types.Failure) error {
	for _, f := range failures {
		if r := aws.ToString(f.Reason); r != "MISSING" {
			return fmt.Errorf("ECS %s: %s: %s %s", op, aws.ToString(f.Arn), r, aws.ToString(f.Detail))
		}
	}
	return nil
}

func taskOf(t types.Task) Task {
	out := Task{
		ARN:            aws.ToString(t.TaskArn),
		Instance:       aws.ToString(t.ContainerInstanceArn),
		TaskDefinition: aws.ToString(t.TaskDefinitionArn),
		StartedBy:      aws.ToString(t.StartedBy),
		Group:          aws.ToString(t.Group),
		LastStatus:     aws.ToString(t.LastStatus),
		DesiredStatus:  aws.ToString(t.DesiredStatus),
		StartedAt:      aws.ToTime(t.StartedAt),
		StoppedAt:      aws.ToTime(t.StoppedAt),
		StoppedReason:  aws.ToString(t.StoppedReason),
		StopCode:       string(t.StopCode),
	}
	out.ID = lastSegment(out.ARN)
	out.ExitCode = exitCode(t.Containers)
	return out
}

func exitCode(containers []types.Container) *int {
	if len(containers) == 0 {
		return nil
	}
	code := 0
	for _, ct := range containers {
		if ct.ExitCode == nil {
			return nil
		}
		if code == 0 {
			code = int(*ct.ExitCode)
		}
	}
	return &code
}

// StartTask starts taskDefinition on one container instance, tagged
// startedBy (the deployment: ECS allows 36 characters, exactly a UUID's
// canonical form) and group (the environment). ECS refusing the instance is
// a *StartFailure. Only throttling is retried (see startTaskRetryables): any
// other error may hide a started task.
func (c *Client) StartTask(ctx context.Context, cluster, instanceARN, taskDefinition, startedBy, group string) (Task, error) {
	if err := checkCluster(cluster); err != nil {
		return Task{}, err
	}
	if err := checkResource("instance", instanceARN, "container-instance"); err != nil {
		return Task{}, err
	}
	if err := checkTaskDefinition(taskDefinition); err != nil {
		return Task{}, err
	}
	if err := checkStartedBy(startedBy); err != nil {
		return Task{}, err
	}
	if group == "" {
		return Task{}, fmt.Errorf("group: %w: empty", ErrInvalidInput)
	}
	res, err := c.ecs.StartTask(ctx, &ecs.StartTaskInput{
		Cluster:            aws.String(cluster),
		ContainerInstances: []string{instanceARN},
		TaskDefinition:     aws.String(taskDefinition),
		StartedBy:          aws.String(startedBy),
		Group:              aws.String(group),
	}, func(eo *ecs.Options) { eo.Retryer = c.startRetryer })
	if err != nil {
		return Task{}, c.callError("StartTask", cluster, err)
	}
	if len(res.Failures) > 0 {
		f := res.Failures[0]
		return Task{}, &StartFailure{Instance: aws.ToString(f.Arn), Reason: aws.ToString(f.Reason), Detail: aws.ToString(f.Detail)}
	}
	if len(res.Tasks) != 1 {
		return Task{}, fmt.Errorf("ECS StartTask on %s answered %d tasks and no failure", instanceARN, len(res.Tasks))
	}
	return taskOf(res.Tasks[0]), nil
}

// StopTask asks ECS to stop a task (its ARN or id); reason is shown as the
// task's stoppedReason, cut to ECS's 255 bytes. A task ECS does not know is
// ErrTaskNotFound.
func (c *Client) StopTask(ctx context.Context, cluster, taskARN, reason string) (Task, error) {
	if err := checkCluster(cluster); err != nil {
		return Task{}, err
	}
	if err := checkResource("task", taskARN, "task"); err != nil {
		return Task{}, err
	}
	res, err := c.ecs.StopTask(ctx, &ecs.StopTaskInput{
		Cluster: aws.String(cluster), Task: aws.String(taskARN), Reason: aws.String(truncate(reason, maxStopReasonBytes)),
	})
	if err != nil {
		var invalid *types.InvalidParameterException
		if errors.As(err, &invalid) && strings.Contains(invalid.ErrorMessage(), "task was not found") {
			return Task{}, fmt.Errorf("stopping %s in %s: %w", taskARN, cluster, ErrTaskNotFound)
		}
		return Task{}, c.callError("StopTask", cluster, err)
	}
	if res.Task == nil {
		return Task{}, fmt.Errorf("ECS StopTask on %s answered no task", taskARN)
	}
	return taskOf(*res.Task), nil
}

// truncate cuts s to at most n bytes without splitting a UTF-8 character.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// callError names the call and, when ECS still throttled it when the SDK
// gave up, wraps ErrThrottled and says why the SDK stopped retrying.
func (c *Client) callError(op, cluster string, err error) error {
	if !retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool() {
		return fmt.Errorf("ECS %s in cluster %s: %w", op, cluster, err)
	}
	why := "the client's retry quota is spent, so it was not retried"
	var maxed *retry.MaxAttemptsError
	if errors.As(err, &maxed) {
		why = fmt.Sprintf("%d attempts", maxed.Attempt)
	}
	return fmt.Errorf("ECS %s in cluster %s: %w (%s): %w", op, cluster, ErrThrottled, why, err)
}
