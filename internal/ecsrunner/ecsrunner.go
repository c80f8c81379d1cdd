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
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
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
	// Command is the container's command: `gantry ecs-task SPEC`.
	Command []string
	// Env is added to the container's environment.
	Env []string
	// Role is the task role; "" keeps the configuration's or the task
	// definition's.
	Role string
	// StartedBy marks the task (the execution), ECS's 36 characters.
	StartedBy string
	Timeout   time.Duration
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
// lost, ctx ended (Result.Cancelled, after StopTask).
func (r *Runner) Run(ctx context.Context, t Task, sink runner.Sink) (Result, error) {
	began := time.Now()
	res := Result{ExitCode: -1}
	arn, err := r.start(ctx, t)
	if err != nil {
		return res, err
	}
	res.TaskARN = arn
	taskID := arn[strings.LastIndexByte(arn, '/')+1:]
	tail := &logTail{r: r, stream: r.cfg.LogStreamPrefix + "/" + r.cfg.Container + "/" + taskID, sink: sink}
	// The first line names the task, for whoever looks for it in ECS or
	// CloudWatch.
	if err := tail.line(ctx, fmt.Sprintf("gantry: running as ECS task %s (log stream %s)", arn, tail.stream), began); err != nil {
		return res, err
	}
	deadline := began.Add(t.Timeout)
	startBy := began.Add(r.cfg.StartWithin())
	var stopAsked time.Time
	stop := func(reason string) error {
		if !stopAsked.IsZero() {
			return nil
		}
		stopAsked = time.Now()
		_, err := r.ecs.StopTask(context.WithoutCancel(ctx), &ecs.StopTaskInput{Cluster: &r.cfg.Cluster, Task: &arn, Reason: aws.String(reason)})
		return err
	}
	for {
		task, err := r.describe(context.WithoutCancel(ctx), arn)
		if err != nil {
			return res, err
		}
		if err := tail.read(ctx); err != nil {
			return res, err
		}
		status := aws.ToString(task.LastStatus)
		if status == "STOPPED" {
			if err := tail.drain(ctx); err != nil {
				return res, err
			}
			res.Duration, res.Output = time.Since(began), tail.out.String()
			if c := r.container(task); c != nil && c.ExitCode != nil && res.Stopped == "" {
				res.ExitCode = int(*c.ExitCode)
			} else if res.Stopped == "" {
				res.Stopped = "ECS stopped the task: " + aws.ToString(task.StoppedReason)
			}
			if res.Cancelled {
				return res, fmt.Errorf("task %s stopped: %w", taskID, context.Cause(ctx))
			}
			return res, nil
		}
		now := time.Now()
		switch {
		case ctx.Err() != nil && stopAsked.IsZero():
			res.Cancelled = true
			if err := stop("Gantry: the command was cancelled"); err != nil {
				return res, err
			}
		case (status == "PROVISIONING" || status == "PENDING" || status == "ACTIVATING") && now.After(startBy) && stopAsked.IsZero():
			res.Stopped = fmt.Sprintf("the task did not start within %s (ECS status %s)", r.cfg.StartWithin(), status)
			if err := stop("Gantry: " + res.Stopped); err != nil {
				return res, err
			}
		case now.After(deadline) && stopAsked.IsZero():
			res.TimedOut = true
			if err := stop(fmt.Sprintf("Gantry: the command timed out after %s", t.Timeout)); err != nil {
				return res, err
			}
		case !stopAsked.IsZero() && now.Sub(stopAsked) > r.StopGrace:
			return res, fmt.Errorf("task %s: not STOPPED %s after StopTask (status %s)", taskID, r.StopGrace, status)
		}
		wait := r.Poll
		if tail.backoff > wait {
			wait = tail.backoff
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
		}
	}
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
		Overrides: &ecstypes.TaskOverride{ContainerOverrides: []ecstypes.ContainerOverride{{
			Name: &r.cfg.Container, Command: t.Command, Environment: keyValues(t.Env),
		}}},
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
	if role := cmpOr(t.Role, r.cfg.TaskRole); role != "" {
		in.Overrides.TaskRoleArn = &role
	}
	if t.StartedBy != "" {
		by := t.StartedBy
		if len(by) > 36 {
			by = by[len(by)-36:]
		}
		in.StartedBy = &by
	}
	out, err := r.ecs.RunTask(ctx, in)
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
// (throttled) leaves the token where it was, so the next read returns the
// same events: nothing is lost or written twice.
type logTail struct {
	r       *Runner
	stream  string
	sink    runner.Sink
	token   *string
	seq     int
	backoff time.Duration
	out     tailBuffer
}

const maxLogBackoff = 30 * time.Second

// read reads what is there now, page by page.
func (l *logTail) read(ctx context.Context) error {
	_, err := l.pages(ctx)
	return err
}

// drain reads until the stream ends, after the task stopped: through
// throttling, which it waits out.
func (l *logTail) drain(ctx context.Context) error {
	for {
		done, err := l.pages(context.WithoutCancel(ctx))
		if err != nil || done {
			return err
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
		case errors.As(err, &apiErr) && apiErr.ErrorCode() == "ThrottlingException":
			l.backoff = min(max(2*l.backoff, l.r.Poll), maxLogBackoff)
			return false, nil
		case err != nil:
			if ctx.Err() != nil {
				return true, nil
			}
			return false, fmt.Errorf("CloudWatch Logs GetLogEvents: %w", err)
		}
		l.backoff = 0
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
