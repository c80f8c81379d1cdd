// Package ecsrunner runs a repository's plan and apply commands as Amazon
// ECS tasks instead of on the worker's machine (gantry.yaml: runs_on: ecs).
//
// Gantry's side (Runner): RunTask with the container's command overridden by
// `gantry ecs-task SPEC`, the unit's role as the task role and the awsvpc
// network configuration; then, until the task is STOPPED, DescribeTasks for
// its status and GetLogEvents for its output (the awslogs stream
// PREFIX/CONTAINER/TASK-ID, read forward with nextForwardToken) into the
// same runner.Sink a local command writes to. The exit code is the
// container's; a task ECS stopped without one fails with ECS's reason. A
// task still PROVISIONING or PENDING after the start timeout, a command
// past its time limit and a cancelled job are stopped with StopTask.
//
// The task's side (TaskMain, task.go) checks the commit out, fetches the
// approved plan file from the plan store (S3) and checks its SHA-256, runs
// the init and main commands, and stores a new plan file. Plan files travel
// through S3 because the task's disk is gone once it stops.
package ecsrunner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/google/uuid"

	"github.com/gantryhq/gantry/internal/ecsrunner/ecsconfig"
	"github.com/gantryhq/gantry/internal/runner"
)

// Exit codes of `gantry ecs-task` itself, besides the main command's own:
// the unit could not be prepared (checkout, plan file missing or not the
// approved one, plan store unreachable), its init failed, or it was
// stopped.
const (
	ExitSetup = 120
	ExitInit  = 121
	// ExitStopped is the exit after ECS's SIGTERM (128 + 15).
	ExitStopped = 143
)

// Runner runs commands as tasks of one repository's ECS configuration.
type Runner struct {
	cfg  ecsconfig.Config
	ecs  *ecs.Client
	logs *cloudwatchlogs.Client
	s3   *s3.Client
	// Poll is how often the task and its log are read; StopGrace how long
	// a stopped task may take to reach STOPPED before Run gives up on it.
	Poll      time.Duration
	StopGrace time.Duration
}

// New makes a Runner from base (credentials, HTTP client) and cfg (region,
// endpoints and the rest).
func New(base aws.Config, cfg ecsconfig.Config) *Runner {
	base.Region = cfg.Region
	endpoint := func(e string) *string {
		if e == "" {
			return nil
		}
		return aws.String(e)
	}
	return &Runner{
		cfg:       cfg,
		ecs:       ecs.NewFromConfig(base, func(o *ecs.Options) { o.BaseEndpoint = endpoint(cfg.Endpoints.ECS) }),
		logs:      cloudwatchlogs.NewFromConfig(base, func(o *cloudwatchlogs.Options) { o.BaseEndpoint = endpoint(cfg.Endpoints.Logs) }),
		s3:        NewS3(base, cfg.Endpoints.S3),
		Poll:      5 * time.Second,
		StopGrace: 2 * time.Minute,
	}
}

// NewS3 is the plan store's client: path-style addressing, so that a
// bucket name with dots and a VPC endpoint work alike.
func NewS3(base aws.Config, endpoint string) *s3.Client {
	return s3.NewFromConfig(base, func(o *s3.Options) {
		o.UsePathStyle = true
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
}

// Task is one command to run.
type Task struct {
	// Command is the container's command; with Spec it is made from it
	// (commandOf): `gantry ecs-task SPEC`.
	Command []string
	Spec    *Spec
	// Env is added to the container's environment.
	Env []string
	// Role is the task role; "" keeps the configuration's or the task
	// definition's.
	Role string
	// StartedBy marks the task (the execution), ECS's 36 characters.
	// With StopEarlier it is this command's alone: tasks it marks that
	// still run are an earlier attempt's, stopped before this one starts.
	StartedBy   string
	StopEarlier bool
	Timeout     time.Duration
}

// Result is how a task ended.
type Result struct {
	TaskARN string
	// ExitCode is the container's, -1 when it has none.
	ExitCode  int
	TimedOut  bool
	Cancelled bool
	// Stopped is why ECS stopped the task when its container did not exit
	// by itself ("ECS stopped the task: …", "the task did not start …").
	Stopped  string
	Duration time.Duration
	// Output is the end of the output (at most outputTail bytes).
	Output string
}

const outputTail = 64 << 10

// StartError is a RunTask that started no task: ECS's failure reason.
type StartError struct{ Reason string }

func (e *StartError) Error() string { return "ECS started no task: " + e.Reason }

// Run runs t and follows it to the end, its output into sink. The error is
// for what is not the command's outcome: ECS refusing the call, the task
// lost, ctx ended (Result.Cancelled, after StopTask). Once a task exists,
// Run never returns an error leaving it running: it stops it first, so a
// retry never runs next to it.
func (r *Runner) Run(ctx context.Context, t Task, sink runner.Sink) (Result, error) {
	began := time.Now()
	res := Result{ExitCode: -1}
	if t.Spec != nil {
		command, err := r.commandOf(ctx, *t.Spec, t)
		if err != nil {
			return res, err
		}
		t.Command = command
	}
	if n := overridesSize(r.overrides(t)); n > MaxOverrides {
		return res, &StartError{Reason: fmt.Sprintf("the task's container overrides (its command and environment) are %d characters of JSON, over ECS's limit of %d: pass fewer variables through GANTRY_COMMAND_ENV", n, MaxOverrides)}
	}
	var earlier []string
	if t.StopEarlier && t.StartedBy != "" {
		stopped, err := r.stopEarlier(ctx, t.StartedBy)
		if err != nil {
			return res, err
		}
		earlier = stopped
	}
	arn, err := r.start(ctx, t)
	if err != nil {
		return res, err
	}
	res.TaskARN = arn
	res, stopped, err := r.follow(ctx, t, arn, began, earlier, sink, res)
	if err != nil && !stopped {
		if _, serr := r.ecs.StopTask(context.WithoutCancel(ctx), &ecs.StopTaskInput{
			Cluster: &r.cfg.Cluster, Task: &arn, Reason: aws.String("Gantry: lost track of the task: " + clip(err.Error(), 200)),
		}); serr != nil {
			err = errors.Join(err, fmt.Errorf("stopping task %s: %w", arn, serr))
		}
	}
	return res, err
}

// follow reads the task and its log until it is STOPPED (stopped true).
// An API error that may pass (throttling, a 5xx, the network) is waited
// out with a growing backoff, up to the command's deadline plus StopGrace;
// one that will not (a 4xx such as AccessDenied) ends it at once.
func (r *Runner) follow(ctx context.Context, t Task, arn string, began time.Time, earlier []string, sink runner.Sink, res Result) (_ Result, stopped bool, _ error) {
	taskID := arn[strings.LastIndexByte(arn, '/')+1:]
	tail := &logTail{r: r, stream: r.cfg.LogStreamPrefix + "/" + r.cfg.Container + "/" + taskID, sink: sink}
	// The first line names the task, for whoever looks for it in ECS or
	// CloudWatch.
	if err := tail.line(ctx, fmt.Sprintf("gantry: running as ECS task %s (log stream %s)", arn, tail.stream), began); err != nil {
		return res, false, err
	}
	for _, e := range earlier {
		if err := tail.line(ctx, fmt.Sprintf("gantry: stopped ECS task %s, left running by an earlier attempt of this command", e), began); err != nil {
			return res, false, err
		}
	}
	deadline := began.Add(t.Timeout)
	giveUp := deadline.Add(r.StopGrace)
	startBy := began.Add(r.cfg.StartWithin())
	var stopAsked time.Time
	stop := func(reason string) error {
		if !stopAsked.IsZero() {
			return nil
		}
		stopAsked = time.Now()
		_, err := r.ecs.StopTask(context.WithoutCancel(ctx), &ecs.StopTaskInput{Cluster: &r.cfg.Cluster, Task: &arn, Reason: aws.String(reason)})
		if err != nil {
			stopAsked = time.Time{}
		}
		return err
	}
	var describeBackoff time.Duration
	for {
		status := ""
		task, err := r.describe(context.WithoutCancel(ctx), arn)
		switch {
		case err == nil:
			describeBackoff = 0
			status = aws.ToString(task.LastStatus)
		case !transient(err) || time.Now().After(giveUp):
			return res, false, err
		default:
			describeBackoff = min(max(2*describeBackoff, r.Poll), maxLogBackoff)
		}
		if err := tail.read(ctx); err != nil {
			return res, false, err
		}
		if status == "STOPPED" {
			if err := tail.drain(ctx); err != nil {
				return res, true, err
			}
			res.Duration, res.Output = time.Since(began), tail.out.String()
			if c := r.container(task); c != nil && c.ExitCode != nil && res.Stopped == "" {
				res.ExitCode = int(*c.ExitCode)
			} else if res.Stopped == "" {
				res.Stopped = "ECS stopped the task: " + aws.ToString(task.StoppedReason)
			}
			if res.Cancelled {
				return res, true, fmt.Errorf("task %s stopped: %w", taskID, context.Cause(ctx))
			}
			return res, true, nil
		}
		now := time.Now()
		var stopErr error
		switch {
		case ctx.Err() != nil && stopAsked.IsZero():
			res.Cancelled = true
			stopErr = stop("Gantry: the command was cancelled")
		case (status == "PROVISIONING" || status == "PENDING" || status == "ACTIVATING") && now.After(startBy) && stopAsked.IsZero():
			res.Stopped = fmt.Sprintf("the task did not start within %s (ECS status %s)", r.cfg.StartWithin(), status)
			stopErr = stop("Gantry: " + res.Stopped)
		case now.After(deadline) && stopAsked.IsZero():
			res.TimedOut = true
			stopErr = stop(fmt.Sprintf("Gantry: the command timed out after %s", t.Timeout))
		case !stopAsked.IsZero() && now.Sub(stopAsked) > r.StopGrace:
			return res, false, fmt.Errorf("task %s: not STOPPED %s after StopTask (status %s)", taskID, r.StopGrace, cmpOr(status, "unknown"))
		}
		if stopErr != nil && (!transient(stopErr) || now.After(giveUp)) {
			return res, false, stopErr
		}
		if stopErr != nil {
			describeBackoff = min(max(2*describeBackoff, r.Poll), maxLogBackoff)
		}
		wait := max(r.Poll, tail.backoff, describeBackoff)
		timer := time.NewTimer(wait)
		done := ctx.Done()
		if ctx.Err() != nil {
			done = nil // ctx's end is being handled: go on at the poll's pace
		}
		select {
		case <-timer.C:
		case <-done:
			timer.Stop()
		}
	}
}

// stopEarlier stops the tasks marked by (startedBy) that still run: an
// earlier attempt's, whose worker died before it could. It waits until
// they are STOPPED (so the state lock they hold is released), at most
// StopGrace.
func (r *Runner) stopEarlier(ctx context.Context, by string) ([]string, error) {
	by = clipStartedBy(by)
	out, err := r.ecs.ListTasks(ctx, &ecs.ListTasksInput{Cluster: &r.cfg.Cluster, StartedBy: &by})
	if err != nil {
		return nil, fmt.Errorf("ECS ListTasks: %w", err)
	}
	if len(out.TaskArns) == 0 {
		return nil, nil
	}
	for _, arn := range out.TaskArns {
		if _, err := r.ecs.StopTask(context.WithoutCancel(ctx), &ecs.StopTaskInput{
			Cluster: &r.cfg.Cluster, Task: aws.String(arn), Reason: aws.String("Gantry: an earlier attempt of this command, started again"),
		}); err != nil {
			return nil, fmt.Errorf("ECS StopTask of the earlier attempt's task %s: %w", arn, err)
		}
	}
	until := time.Now().Add(r.StopGrace)
	for {
		d, err := r.ecs.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: &r.cfg.Cluster, Tasks: out.TaskArns})
		if err != nil {
			return nil, fmt.Errorf("ECS DescribeTasks: %w", err)
		}
		running := ""
		for _, t := range d.Tasks {
			if aws.ToString(t.LastStatus) != "STOPPED" {
				running = aws.ToString(t.TaskArn)
			}
		}
		if running == "" {
			return out.TaskArns, nil
		}
		if time.Now().After(until) {
			return nil, fmt.Errorf("the earlier attempt's task %s is not STOPPED %s after StopTask", running, r.StopGrace)
		}
		timer := time.NewTimer(r.Poll)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, context.Cause(ctx)
		}
	}
}

// transient says whether an AWS call's error may pass by itself:
// throttling, a server error, no answer at all. A 4xx other than
// throttling (access denied, a bad parameter) will not.
func transient(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded", "ServiceUnavailableException", "ServerException":
			return true
		}
	}
	var resp *awshttp.ResponseError
	if errors.As(err, &resp) {
		return resp.HTTPStatusCode() >= 500 || resp.HTTPStatusCode() == http.StatusTooManyRequests
	}
	return true
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// clipStartedBy keeps ECS's 36 characters of by, its end (where the
// execution's own part is).
func clipStartedBy(by string) string {
	if len(by) > 36 {
		return by[len(by)-36:]
	}
	return by
}

func (r *Runner) start(ctx context.Context, t Task) (string, error) {
	in := &ecs.RunTaskInput{
		Cluster:        &r.cfg.Cluster,
		TaskDefinition: &r.cfg.TaskDefinition,
		Count:          aws.Int32(1),
		// The SDK retries a call whose answer was lost; with the same token
		// ECS answers with the task it already started instead of another.
		ClientToken: aws.String(uuid.NewString()),
		NetworkConfiguration: &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{
			Subnets: r.cfg.Subnets, SecurityGroups: r.cfg.SecurityGroups, AssignPublicIp: ecstypes.AssignPublicIpDisabled,
		}},
		Overrides: r.overrides(t),
	}
	if r.cfg.AssignPublicIP {
		in.NetworkConfiguration.AwsvpcConfiguration.AssignPublicIp = ecstypes.AssignPublicIpEnabled
	}
	switch {
	case r.cfg.CapacityProvider != "":
		in.CapacityProviderStrategy = []ecstypes.CapacityProviderStrategyItem{{CapacityProvider: &r.cfg.CapacityProvider, Weight: 1}}
	case r.cfg.LaunchType == "EC2":
		in.LaunchType = ecstypes.LaunchTypeEc2
	default:
		in.LaunchType = ecstypes.LaunchTypeFargate
	}
	if t.StartedBy != "" {
		in.StartedBy = aws.String(clipStartedBy(t.StartedBy))
	}
	out, err := r.ecs.RunTask(ctx, in)
	if err != nil && !transient(err) {
		// A bad parameter or a denied call: trying again changes nothing.
		return "", &StartError{Reason: err.Error()}
	}
	if err != nil {
		return "", fmt.Errorf("ECS RunTask: %w", err)
	}
	if len(out.Tasks) == 0 {
		reason := "no reason given"
		if len(out.Failures) > 0 {
			reason = aws.ToString(out.Failures[0].Reason) + " " + aws.ToString(out.Failures[0].Detail)
		}
		return "", &StartError{Reason: strings.TrimSpace(reason)}
	}
	return aws.ToString(out.Tasks[0].TaskArn), nil
}

// overrides are RunTask's overrides for t.
func (r *Runner) overrides(t Task) *ecstypes.TaskOverride {
	o := &ecstypes.TaskOverride{ContainerOverrides: []ecstypes.ContainerOverride{{
		Name: &r.cfg.Container, Command: t.Command, Environment: keyValues(t.Env),
	}}}
	if role := cmpOr(t.Role, r.cfg.TaskRole); role != "" {
		o.TaskRoleArn = &role
	}
	return o
}

// MaxOverrides is ECS's limit on RunTask's overrides: 8,192 characters of
// their JSON, formatting included (more is InvalidParameterException).
const MaxOverrides = 8192

// overridesSize is the length of o's JSON as RunTask sends it.
func overridesSize(o *ecstypes.TaskOverride) int {
	type keyValue struct {
		Name  *string `json:"name"`
		Value *string `json:"value"`
	}
	type container struct {
		Command     []string   `json:"command,omitempty"`
		Environment []keyValue `json:"environment,omitempty"`
		Name        *string    `json:"name"`
	}
	doc := struct {
		ContainerOverrides []container `json:"containerOverrides"`
		TaskRoleArn        *string     `json:"taskRoleArn,omitempty"`
	}{TaskRoleArn: o.TaskRoleArn}
	for _, c := range o.ContainerOverrides {
		kc := container{Command: c.Command, Name: c.Name}
		for _, e := range c.Environment {
			kc.Environment = append(kc.Environment, keyValue{e.Name, e.Value})
		}
		doc.ContainerOverrides = append(doc.ContainerOverrides, kc)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(doc)
	return b.Len() - 1 // Encode's newline
}

// commandOf is the command running spec: the spec itself as the argument
// when the overrides stay within ECS's limit, else (a rollback's many
// -target addresses) the spec goes to the plan store and the argument
// names it and its SHA-256, which the task checks.
func (r *Runner) commandOf(ctx context.Context, spec Spec, t Task) ([]string, error) {
	command, err := spec.Command()
	if err != nil {
		return nil, err
	}
	t.Command = command
	if overridesSize(r.overrides(t)) <= MaxOverrides {
		return command, nil
	}
	doc, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	sum := SHA256(doc)
	bucket, _ := r.cfg.Store()
	key := r.PlanKey("specs/" + sum + ".json")
	if err := PutObject(ctx, r.s3, bucket, key, doc); err != nil {
		return nil, fmt.Errorf("storing the task's spec: %w", err)
	}
	return Spec{Store: spec.Store, SpecGet: key, SpecSHA256: sum}.Command()
}

func (r *Runner) describe(ctx context.Context, arn string) (ecstypes.Task, error) {
	out, err := r.ecs.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: &r.cfg.Cluster, Tasks: []string{arn}})
	if err != nil {
		return ecstypes.Task{}, fmt.Errorf("ECS DescribeTasks: %w", err)
	}
	if len(out.Tasks) == 0 {
		return ecstypes.Task{}, fmt.Errorf("ECS no longer knows task %s", arn)
	}
	return out.Tasks[0], nil
}

func (r *Runner) container(t ecstypes.Task) *ecstypes.Container {
	for i := range t.Containers {
		if aws.ToString(t.Containers[i].Name) == r.cfg.Container {
			return &t.Containers[i]
		}
	}
	return nil
}

// logTail reads one task's log stream forward. A read that fails
// (throttled, a server error) leaves the token where it was, so the next read returns the
// same events: nothing is lost or written twice.
type logTail struct {
	r       *Runner
	stream  string
	sink    runner.Sink
	token   *string
	seq     int
	backoff time.Duration
	lastErr error // of the read that set backoff
	out     tailBuffer
}

const maxLogBackoff = 30 * time.Second

// read reads what is there now, page by page.
func (l *logTail) read(ctx context.Context) error {
	_, err := l.pages(ctx)
	return err
}

// drain reads until the stream ends, after the task stopped: through
// throttling and other passing errors, which it waits out for at most
// StopGrace.
func (l *logTail) drain(ctx context.Context) error {
	until := time.Now().Add(l.r.StopGrace)
	for {
		done, err := l.pages(context.WithoutCancel(ctx))
		if err != nil || done {
			return err
		}
		if time.Now().Add(l.backoff).After(until) {
			return fmt.Errorf("the task stopped, but its log stream %s could not be read to its end within %s: %w", l.stream, l.r.StopGrace, l.lastErr)
		}
		time.Sleep(l.backoff)
	}
}

// pages reads pages until the forward token stops moving (done) or a
// read is throttled (not done, l.backoff set).
func (l *logTail) pages(ctx context.Context) (done bool, err error) {
	for {
		out, err := l.r.logs.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{
			LogGroupName: &l.r.cfg.LogGroup, LogStreamName: &l.stream, StartFromHead: aws.Bool(true), NextToken: l.token,
		})
		var apiErr smithy.APIError
		switch {
		case errors.As(err, &apiErr) && apiErr.ErrorCode() == "ResourceNotFoundException":
			return true, nil // the task has written nothing yet
		case err != nil && ctx.Err() != nil:
			return true, nil
		case err != nil && transient(err):
			l.backoff = min(max(2*l.backoff, l.r.Poll), maxLogBackoff)
			l.lastErr = fmt.Errorf("CloudWatch Logs GetLogEvents: %w", err)
			return false, nil
		case err != nil:
			return false, fmt.Errorf("CloudWatch Logs GetLogEvents: %w", err)
		}
		l.backoff, l.lastErr = 0, nil
		for _, e := range out.Events {
			if err := l.line(ctx, aws.ToString(e.Message), time.UnixMilli(aws.ToInt64(e.Timestamp))); err != nil {
				return false, err
			}
		}
		moved := l.token == nil || aws.ToString(out.NextForwardToken) != aws.ToString(l.token)
		l.token = out.NextForwardToken
		if !moved || len(out.Events) == 0 {
			return true, nil
		}
	}
}

// line passes one line of output on.
func (l *logTail) line(ctx context.Context, text string, at time.Time) error {
	l.seq++
	text += "\n"
	l.out.write(text)
	if l.sink == nil {
		return nil
	}
	return l.sink.Write(context.WithoutCancel(ctx), runner.Chunk{Stream: runner.StreamStdout, Seq: l.seq, Text: text, At: at})
}

// tailBuffer keeps the last outputTail bytes.
type tailBuffer struct{ strings.Builder }

func (b *tailBuffer) write(s string) {
	b.WriteString(s)
	if b.Len() > 2*outputTail {
		rest := b.String()[b.Len()-outputTail:]
		b.Reset()
		b.WriteString(rest)
	}
}

func keyValues(env []string) []ecstypes.KeyValuePair {
	var out []ecstypes.KeyValuePair
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, ecstypes.KeyValuePair{Name: aws.String(k), Value: aws.String(v)})
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
