package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// The daemons area's API (docs/api.md, "Daemons"): environments and
// deployments for people, and the agent protocol for gantry agent.

// DaemonEnvironment is an environment as GET /daemons/environments/{name}
// returns it; versions and deployments are kept as the server sent them.
type DaemonEnvironment struct {
	Name             string            `json:"name"`
	Type             string            `json:"type"`
	State            string            `json:"state"`
	Health           string            `json:"health"`
	HealthLine       string            `json:"health_line"`
	Source           string            `json:"source"`
	LatestVersion    *DaemonVersion    `json:"latest_version"`
	DeployedVersion  *DaemonVersion    `json:"deployed_version"`
	ActiveDeployment *DaemonDeployment `json:"active_deployment"`
	Tasks            map[string]int    `json:"tasks"`
}

// DaemonVersion is one immutable environment version.
type DaemonVersion struct {
	ID             string `json:"id"`
	Number         int    `json:"number"`
	TaskDefinition struct {
		Name    string            `json:"name"`
		Command []string          `json:"command"`
		Env     map[string]string `json:"env,omitempty"`
	} `json:"task_definition"`
	InstanceGroup struct {
		Cluster    string   `json:"cluster"`
		Attributes []string `json:"attributes"`
	} `json:"instance_group"`
	DeploymentConfiguration struct {
		MinHealthyPercent *int `json:"min_healthy_percent,omitempty"`
		TimeoutSeconds    *int `json:"timeout_seconds,omitempty"`
	} `json:"deployment_configuration"`
	CreatedAt time.Time `json:"created_at"`
}

// DaemonDeployment is one deployment.
type DaemonDeployment struct {
	ID          string       `json:"id"`
	Environment string       `json:"environment"`
	VersionID   string       `json:"version_id"`
	Type        string       `json:"type"`
	State       string       `json:"state"`
	Reason      string       `json:"reason,omitempty"`
	Batches     int          `json:"batches"`
	CreatedAt   time.Time    `json:"created_at"`
	StartedAt   *time.Time   `json:"started_at,omitempty"`
	EndedAt     *time.Time   `json:"ended_at,omitempty"`
	Tasks       []DaemonTask `json:"tasks,omitempty"`
}

// DaemonTask is one task of a deployment.
type DaemonTask struct {
	ID         string `json:"id"`
	InstanceID string `json:"instance_id"`
	State      string `json:"state"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// DaemonEnvironmentSpec is CreateDaemonEnvironment's and
// UpdateDaemonEnvironment's body.
type DaemonEnvironmentSpec struct {
	Name           string `json:"name,omitempty"`
	TaskDefinition struct {
		Name    string            `json:"name"`
		Command []string          `json:"command"`
		Env     map[string]string `json:"env,omitempty"`
	} `json:"task_definition"`
	InstanceGroup struct {
		Cluster    string   `json:"cluster,omitempty"`
		Attributes []string `json:"attributes,omitempty"`
	} `json:"instance_group"`
	DeploymentConfiguration struct {
		MinHealthyPercent *int `json:"min_healthy_percent,omitempty"`
		TimeoutSeconds    *int `json:"timeout_seconds,omitempty"`
	} `json:"deployment_configuration"`
}

// DaemonVersionCreated is what creating or updating an environment returns.
type DaemonVersionCreated struct {
	Name               string         `json:"name"`
	EnvironmentVersion string         `json:"environment_version"`
	Version            *DaemonVersion `json:"version"`
}

// DaemonDiff is what a deployment of a version would change.
type DaemonDiff struct {
	VersionID string   `json:"version_id"`
	Instances int      `json:"matching_instances"`
	Start     []string `json:"start"`
	Replace   []struct {
		InstanceID string `json:"instance_id"`
		TaskID     string `json:"task_id"`
		From       string `json:"from_version"`
	} `json:"replace"`
	Stop []struct {
		InstanceID string `json:"instance_id"`
		TaskID     string `json:"task_id"`
		Reason     string `json:"reason"`
	} `json:"stop"`
	Unchanged  []string `json:"unchanged"`
	FirstBatch int      `json:"first_batch_replacements"`
}

func daemonEnvPath(name string) string { return "/daemons/environments/" + url.PathEscape(name) }

// DaemonEnvironments lists the daemon environments.
func (c *Client) DaemonEnvironments(ctx context.Context) ([]DaemonEnvironment, error) {
	var out struct {
		Environments []DaemonEnvironment `json:"environments"`
	}
	err := c.retryIdempotent(ctx, func() error { return c.call(ctx, http.MethodGet, "/daemons/environments", nil, &out) })
	return out.Environments, err
}

// DaemonEnvironment is one environment.
func (c *Client) DaemonEnvironment(ctx context.Context, name string) (*DaemonEnvironment, error) {
	var out DaemonEnvironment
	err := c.retryIdempotent(ctx, func() error { return c.call(ctx, http.MethodGet, daemonEnvPath(name), nil, &out) })
	return &out, err
}

// CreateDaemonEnvironment creates an environment and its first version.
func (c *Client) CreateDaemonEnvironment(ctx context.Context, spec DaemonEnvironmentSpec) (*DaemonVersionCreated, error) {
	var out DaemonVersionCreated
	return &out, c.call(ctx, http.MethodPost, "/daemons/environments", spec, &out)
}

// UpdateDaemonEnvironment stores a new version of an environment.
func (c *Client) UpdateDaemonEnvironment(ctx context.Context, name string, spec DaemonEnvironmentSpec) (*DaemonVersionCreated, error) {
	var out DaemonVersionCreated
	return &out, c.call(ctx, http.MethodPatch, daemonEnvPath(name), spec, &out)
}

// DeleteDaemonEnvironment deletes an environment.
func (c *Client) DeleteDaemonEnvironment(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, daemonEnvPath(name), nil, nil)
}

// DaemonDiff shows what a deployment of version would change.
func (c *Client) DaemonDiff(ctx context.Context, name, versionID string) (*DaemonDiff, error) {
	var out DaemonDiff
	path := daemonEnvPath(name) + "/diff?version_id=" + url.QueryEscape(versionID)
	err := c.retryIdempotent(ctx, func() error { return c.call(ctx, http.MethodGet, path, nil, &out) })
	return &out, err
}

// StartDaemonDeployment asks for version to be deployed.
func (c *Client) StartDaemonDeployment(ctx context.Context, name, versionID string) (*DaemonDeployment, error) {
	var out DaemonDeployment
	return &out, c.call(ctx, http.MethodPost, daemonEnvPath(name)+"/deployments", map[string]string{"version_id": versionID}, &out)
}

// RollbackDaemonDeployment deploys versionID, or the previous version when
// it is empty.
func (c *Client) RollbackDaemonDeployment(ctx context.Context, name, versionID string) (*DaemonDeployment, error) {
	var body any = struct{}{}
	if versionID != "" {
		body = map[string]string{"version_id": versionID}
	}
	var out DaemonDeployment
	return &out, c.call(ctx, http.MethodPost, daemonEnvPath(name)+"/rollback", body, &out)
}

// StopDaemonDeployment halts the in-progress deployment.
func (c *Client) StopDaemonDeployment(ctx context.Context, name string) (*DaemonDeployment, error) {
	var out DaemonDeployment
	return &out, c.call(ctx, http.MethodPost, daemonEnvPath(name)+"/stop", nil, &out)
}

// DaemonDeployments lists an environment's deployments, latest first.
func (c *Client) DaemonDeployments(ctx context.Context, name string) ([]DaemonDeployment, error) {
	var out struct {
		Deployments []DaemonDeployment `json:"deployments"`
	}
	err := c.retryIdempotent(ctx, func() error { return c.call(ctx, http.MethodGet, daemonEnvPath(name)+"/deployments", nil, &out) })
	return out.Deployments, err
}

// DaemonDeployment is one deployment with its tasks.
func (c *Client) DaemonDeployment(ctx context.Context, name, id string) (*DaemonDeployment, error) {
	var out DaemonDeployment
	path := daemonEnvPath(name) + "/deployments/" + url.PathEscape(id)
	err := c.retryIdempotent(ctx, func() error { return c.call(ctx, http.MethodGet, path, nil, &out) })
	return &out, err
}

// AgentRegistration is an agent's registration and the server's answer.
type AgentRegistration struct {
	ID               string            `json:"id,omitempty"`
	InstanceID       string            `json:"instance_id,omitempty"`
	Cluster          string            `json:"cluster"`
	Hostname         string            `json:"hostname,omitempty"`
	Attributes       map[string]string `json:"attributes,omitempty"`
	HeartbeatSeconds int               `json:"heartbeat_seconds,omitempty"`
}

// AgentTasks is an agent's assignment.
type AgentTasks struct {
	Tag              string      `json:"tag"`
	HeartbeatSeconds int         `json:"heartbeat_seconds"`
	Tasks            []AgentTask `json:"tasks"`
	// Steps are pipeline steps to run once each (agent_steps.go).
	Steps []AgentStep `json:"steps"`
}

// AgentTask is one task an agent runs (Run) or stops.
type AgentTask struct {
	ID          string            `json:"id"`
	Environment string            `json:"environment"`
	Version     int               `json:"version"`
	Run         bool              `json:"run"`
	Command     []string          `json:"command"`
	Env         map[string]string `json:"env"`
}

// AgentReport is a task's start or exit.
type AgentReport struct {
	State    string `json:"state"`
	PID      *int   `json:"pid,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// RegisterAgent registers the machine as an instance of r.Cluster.
func (c *Client) RegisterAgent(ctx context.Context, r AgentRegistration) (*AgentRegistration, error) {
	var out AgentRegistration
	err := c.retryIdempotent(ctx, func() error { return c.call(ctx, http.MethodPost, "/daemons/agents", r, &out) })
	return &out, err
}

// PollAgent heartbeats and waits up to wait for the instance's tasks to
// differ from tag.
func (c *Client) PollAgent(ctx context.Context, instanceID, tag string, wait time.Duration) (*AgentTasks, error) {
	var out AgentTasks
	path := "/daemons/agents/" + url.PathEscape(instanceID) + "/tasks?tag=" + url.QueryEscape(tag) + "&wait=" + wait.String()
	return &out, c.call(ctx, http.MethodGet, path, nil, &out)
}

// ReportTask tells the server a task started or exited.
func (c *Client) ReportTask(ctx context.Context, instanceID, taskID string, r AgentReport) error {
	path := "/daemons/agents/" + url.PathEscape(instanceID) + "/tasks/" + url.PathEscape(taskID)
	return c.retryIdempotent(ctx, func() error { return c.call(ctx, http.MethodPost, path, r, nil) })
}

// LeaveAgent takes the instance out of its cluster.
func (c *Client) LeaveAgent(ctx context.Context, instanceID string) error {
	return c.call(ctx, http.MethodDelete, "/daemons/agents/"+url.PathEscape(instanceID), nil, nil)
}
