// Package ecsconfig is a repository's `ecs:` block of gantry.yaml: where
// its commands run when it says `runs_on: ecs`. It is one plain struct,
// read from gantry.yaml (gantryfile), stored with the repository (models)
// and used by internal/ecsrunner, with the checks gantryfile reports.
package ecsconfig

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Config is where and how a repository's commands run on Amazon ECS.
type Config struct {
	Region         string `yaml:"region" json:"region"`
	Cluster        string `yaml:"cluster" json:"cluster"`
	TaskDefinition string `yaml:"task_definition" json:"task_definition"`
	// Container is the task definition's container whose command is
	// overridden; its image must hold gantry, git and the runner's tools.
	Container string `yaml:"container" json:"container"`
	// LaunchType is FARGATE (the default) or EC2; CapacityProvider, when
	// set, is used instead (a capacity provider strategy of one).
	LaunchType       string   `yaml:"launch_type" json:"launch_type,omitempty"`
	CapacityProvider string   `yaml:"capacity_provider" json:"capacity_provider,omitempty"`
	Subnets          []string `yaml:"subnets" json:"subnets"`
	SecurityGroups   []string `yaml:"security_groups" json:"security_groups"`
	AssignPublicIP   bool     `yaml:"assign_public_ip" json:"assign_public_ip"`
	// TaskRole is the IAM role the task runs as when the unit's account has
	// no plan or apply role; empty: the task definition's.
	TaskRole string `yaml:"task_role" json:"task_role,omitempty"`
	// LogGroup and LogStreamPrefix are the container's awslogs options, as
	// in the task definition: the output is read from stream
	// PREFIX/CONTAINER/TASK-ID.
	LogGroup        string `yaml:"log_group" json:"log_group"`
	LogStreamPrefix string `yaml:"log_stream_prefix" json:"log_stream_prefix"`
	// PlanStore is where plan files go between the plan and the apply:
	// s3://BUCKET/PREFIX.
	PlanStore string `yaml:"plan_store" json:"plan_store"`
	// StartTimeout bounds PROVISIONING and PENDING ("10m" by default): a
	// task not running by then is stopped and the command fails.
	StartTimeout string `yaml:"start_timeout" json:"start_timeout,omitempty"`
	// Endpoints override the services' addresses (VPC endpoints).
	Endpoints Endpoints `yaml:"endpoints" json:"endpoints"`
}

// Endpoints are the services' base URLs; empty: AWS's own.
type Endpoints struct {
	ECS  string `yaml:"ecs" json:"ecs,omitempty"`
	Logs string `yaml:"logs" json:"logs,omitempty"`
	S3   string `yaml:"s3" json:"s3,omitempty"`
}

// DefaultStartTimeout is StartTimeout when it is left out.
const DefaultStartTimeout = 10 * time.Minute

// StartWithin is StartTimeout as a duration.
func (c Config) StartWithin() time.Duration {
	d, err := time.ParseDuration(c.StartTimeout)
	if err != nil || d <= 0 {
		return DefaultStartTimeout
	}
	return d
}

// Store is PlanStore's bucket and key prefix (without a trailing slash).
func (c Config) Store() (bucket, prefix string) {
	rest := strings.TrimPrefix(c.PlanStore, "s3://")
	bucket, prefix, _ = strings.Cut(rest, "/")
	return bucket, strings.Trim(prefix, "/")
}

var (
	region   = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d$`)
	name     = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	arnOf    = regexp.MustCompile(`^arn:aws[a-z-]*:ecs:[a-z0-9-]+:\d{12}:`)
	taskDef  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}(:\d+)?$`)
	subnet   = regexp.MustCompile(`^subnet-[0-9a-f]{8,17}$`)
	group    = regexp.MustCompile(`^sg-[0-9a-f]{8,17}$`)
	role     = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,128}$`)
	bucket   = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	logGroup = regexp.MustCompile(`^[\w/.#-]{1,512}$`)
	// ECS's log stream names: no colon or asterisk; nor control characters
	// (NUL included), which no awslogs-stream-prefix holds.
	logPrefix = regexp.MustCompile(`^[^:*/\x00-\x1f\x7f][^:*\x00-\x1f\x7f]{0,510}$`)
)

// Problem is one field that is wrong, named as in gantry.yaml.
type Problem struct {
	Field, Reason string
}

// Check reports every field that is wrong.
func (c Config) Check() []Problem {
	var out []Problem
	add := func(field, format string, args ...any) {
		out = append(out, Problem{field, fmt.Sprintf(format, args...)})
	}
	if !region.MatchString(c.Region) {
		add("region", "must be an AWS region such as eu-west-1 (got %q)", c.Region)
	}
	if !name.MatchString(c.Cluster) && !(arnOf.MatchString(c.Cluster) && strings.Contains(c.Cluster, ":cluster/")) {
		add("cluster", "must be a cluster name or ARN (got %q)", c.Cluster)
	}
	if !taskDef.MatchString(c.TaskDefinition) && !(arnOf.MatchString(c.TaskDefinition) && strings.Contains(c.TaskDefinition, ":task-definition/")) {
		add("task_definition", "must be FAMILY, FAMILY:REVISION or a task-definition ARN (got %q)", c.TaskDefinition)
	}
	if !name.MatchString(c.Container) {
		add("container", "must name the task definition's container that runs the commands (got %q)", c.Container)
	}
	switch {
	case c.CapacityProvider != "" && c.LaunchType != "":
		add("launch_type", "cannot be set with capacity_provider: ECS takes one or the other")
	case c.LaunchType != "" && c.LaunchType != "FARGATE" && c.LaunchType != "EC2":
		add("launch_type", "must be FARGATE or EC2 (got %q)", c.LaunchType)
	case c.CapacityProvider != "" && !name.MatchString(c.CapacityProvider):
		add("capacity_provider", "must be a capacity provider name (got %q)", c.CapacityProvider)
	}
	if len(c.Subnets) == 0 {
		add("subnets", "is required: tasks use the awsvpc network mode")
	}
	for i, s := range c.Subnets {
		if !subnet.MatchString(s) {
			add(fmt.Sprintf("subnets[%d]", i), "must be a subnet id such as subnet-0123456789abcdef0 (got %q)", s)
		}
	}
	for i, s := range c.SecurityGroups {
		if !group.MatchString(s) {
			add(fmt.Sprintf("security_groups[%d]", i), "must be a security group id such as sg-0123456789abcdef0 (got %q)", s)
		}
	}
	if c.TaskRole != "" && !role.MatchString(c.TaskRole) {
		add("task_role", "must be an IAM role ARN such as arn:aws:iam::123456789012:role/GantryTask (got %q)", c.TaskRole)
	}
	if !logGroup.MatchString(c.LogGroup) {
		add("log_group", "must be the awslogs-group of the container (got %q)", c.LogGroup)
	}
	if !logPrefix.MatchString(c.LogStreamPrefix) {
		add("log_stream_prefix", "must be the awslogs-stream-prefix of the container: ECS names streams PREFIX/CONTAINER/TASK-ID (got %q)", c.LogStreamPrefix)
	}
	if b, _ := c.Store(); !strings.HasPrefix(c.PlanStore, "s3://") || !bucket.MatchString(b) {
		add("plan_store", "must be s3://BUCKET/PREFIX: the approved plan goes there between plan and apply (got %q)", c.PlanStore)
	}
	if c.StartTimeout != "" {
		if d, err := time.ParseDuration(c.StartTimeout); err != nil || d < time.Minute {
			add("start_timeout", "must be a duration of at least 1m, such as 10m (got %q)", c.StartTimeout)
		}
	}
	for _, fe := range [...]struct{ field, e string }{{"endpoints.ecs", c.Endpoints.ECS}, {"endpoints.logs", c.Endpoints.Logs}, {"endpoints.s3", c.Endpoints.S3}} {
		field, e := fe.field, fe.e
		if e == "" {
			continue
		}
		if u, err := url.Parse(e); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			add(field, "must be an http(s) URL (got %q)", e)
		}
	}
	return out
}
