package web

import (
	"time"

	"github.com/google/uuid"

	"github.com/gantryhq/gantry/internal/daemons"
	"github.com/gantryhq/gantry/models"
)

// The daemons API's JSON, mapped from the service's types.

type daemonTaskDefinitionJSON struct {
	Name    string            `json:"name"`
	Command []string          `json:"command"`
	Env     map[string]string `json:"env,omitempty"`
}

type daemonInstanceGroupJSON struct {
	Cluster    string   `json:"cluster"`
	Attributes []string `json:"attributes"`
}

type daemonDeploymentConfigJSON struct {
	MinHealthyPercent *int `json:"min_healthy_percent,omitempty"`
	TimeoutSeconds    *int `json:"timeout_seconds,omitempty"`
}

// daemonEnvironmentRequest is CreateEnvironment's and UpdateEnvironment's
// body (update takes no name: it is in the path).
type daemonEnvironmentRequest struct {
	Name                    string                     `json:"name"`
	TaskDefinition          daemonTaskDefinitionJSON   `json:"task_definition"`
	InstanceGroup           daemonInstanceGroupJSON    `json:"instance_group"`
	Role                    string                     `json:"role"`
	DeploymentConfiguration daemonDeploymentConfigJSON `json:"deployment_configuration"`
}

func (r daemonEnvironmentRequest) spec() daemons.Spec {
	return daemons.Spec{
		TaskDefinition: daemons.TaskDefinition{Name: r.TaskDefinition.Name, Command: r.TaskDefinition.Command, Env: r.TaskDefinition.Env},
		InstanceGroup:  daemons.InstanceGroup{Cluster: r.InstanceGroup.Cluster, Attributes: r.InstanceGroup.Attributes},
		Role:           r.Role, MinHealthyPercent: r.DeploymentConfiguration.MinHealthyPercent,
		TimeoutSeconds: r.DeploymentConfiguration.TimeoutSeconds,
	}
}

type daemonVersionJSON struct {
	ID                      uuid.UUID                  `json:"id"`
	Number                  int                        `json:"number"`
	TaskDefinition          daemonTaskDefinitionJSON   `json:"task_definition"`
	InstanceGroup           daemonInstanceGroupJSON    `json:"instance_group"`
	Role                    string                     `json:"role"`
	DeploymentConfiguration daemonDeploymentConfigJSON `json:"deployment_configuration"`
	CreatedBy               string                     `json:"created_by"`
	CreatedAt               time.Time                  `json:"created_at"`
}

func daemonVersionJSONOf(v *models.DaemonVersion) *daemonVersionJSON {
	if v == nil {
		return nil
	}
	mh, to := v.MinHealthyPercent, v.TimeoutSeconds
	return &daemonVersionJSON{ID: v.ID, Number: v.Number,
		TaskDefinition:          daemonTaskDefinitionJSON{Name: v.TaskDefinition, Command: v.Command, Env: v.TaskEnv},
		InstanceGroup:           daemonInstanceGroupJSON{Cluster: v.Cluster, Attributes: nonNilSlice(v.Attributes)},
		Role:                    v.Role,
		DeploymentConfiguration: daemonDeploymentConfigJSON{MinHealthyPercent: &mh, TimeoutSeconds: &to},
		CreatedBy:               v.CreatedBy, CreatedAt: v.CreatedAt,
	}
}

type daemonDeploymentJSON struct {
	ID          uuid.UUID        `json:"id"`
	Environment string           `json:"environment"`
	VersionID   uuid.UUID        `json:"version_id"`
	Type        string           `json:"type"`
	State       string           `json:"state"`
	Reason      string           `json:"reason,omitempty"`
	Batches     int              `json:"batches"`
	CreatedBy   string           `json:"created_by"`
	CreatedAt   time.Time        `json:"created_at"`
	StartedAt   *time.Time       `json:"started_at,omitempty"`
	EndedAt     *time.Time       `json:"ended_at,omitempty"`
	DeadlineAt  *time.Time       `json:"deadline_at,omitempty"`
	Tasks       []daemonTaskJSON `json:"tasks,omitempty"`
}

func daemonDeploymentJSONOf(env string, d *models.DaemonDeployment) *daemonDeploymentJSON {
	if d == nil {
		return nil
	}
	return &daemonDeploymentJSON{ID: d.ID, Environment: env, VersionID: d.VersionID, Type: d.Type, State: d.State, Reason: d.Reason,
		Batches: d.Batches, CreatedBy: d.CreatedBy, CreatedAt: d.CreatedAt, StartedAt: d.StartedAt, EndedAt: d.EndedAt, DeadlineAt: d.DeadlineAt}
}

type daemonTaskJSON struct {
	ID         uuid.UUID  `json:"id"`
	InstanceID string     `json:"instance_id"`
	VersionID  uuid.UUID  `json:"version_id"`
	State      string     `json:"state"`
	ExitCode   *int       `json:"exit_code,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	RunningAt  *time.Time `json:"running_at,omitempty"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
}

func daemonTaskJSONOf(t models.DaemonTask) daemonTaskJSON {
	return daemonTaskJSON{ID: t.ID, InstanceID: t.InstanceID, VersionID: t.VersionID, State: t.State, ExitCode: t.ExitCode,
		Reason: t.Reason, CreatedAt: t.CreatedAt, RunningAt: t.RunningAt, EndedAt: t.EndedAt}
}

type daemonEnvironmentJSON struct {
	Name             string                `json:"name"`
	Type             string                `json:"type"`
	State            string                `json:"state"`  // active, inactive
	Health           string                `json:"health"` // healthy, unhealthy
	HealthLine       string                `json:"health_line"`
	Source           string                `json:"source"` // api, file
	LatestVersion    *daemonVersionJSON    `json:"latest_version"`
	DeployedVersion  *daemonVersionJSON    `json:"deployed_version,omitempty"`
	ActiveDeployment *daemonDeploymentJSON `json:"active_deployment,omitempty"`
	Tasks            map[string]int        `json:"tasks"`
}

func daemonEnvironmentJSONOf(e *daemons.Environment) daemonEnvironmentJSON {
	state, health := "inactive", "healthy"
	if e.DaemonEnvironment.Active {
		state = "active"
	}
	if !e.Healthy() {
		health = "unhealthy"
	}
	return daemonEnvironmentJSON{Name: e.Name, Type: e.Type, State: state, Health: health, HealthLine: e.HealthLine(), Source: e.Source,
		LatestVersion: daemonVersionJSONOf(e.Latest), DeployedVersion: daemonVersionJSONOf(e.Deployed),
		ActiveDeployment: daemonDeploymentJSONOf(e.Name, e.Active), Tasks: e.Counts}
}

type daemonDiffJSON struct {
	VersionID  uuid.UUID               `json:"version_id"`
	Instances  int                     `json:"matching_instances"`
	Start      []string                `json:"start"`
	Replace    []daemonDiffReplaceJSON `json:"replace"`
	Stop       []daemonDiffStopJSON    `json:"stop"`
	Unchanged  []string                `json:"unchanged"`
	FirstBatch int                     `json:"first_batch_replacements"`
}

type daemonDiffReplaceJSON struct {
	InstanceID string    `json:"instance_id"`
	TaskID     uuid.UUID `json:"task_id"`
	From       string    `json:"from_version"`
}

type daemonDiffStopJSON struct {
	InstanceID string    `json:"instance_id"`
	TaskID     uuid.UUID `json:"task_id"`
	Reason     string    `json:"reason"`
}

func daemonDiffJSONOf(d *daemons.Diff) daemonDiffJSON {
	out := daemonDiffJSON{VersionID: d.Version.ID, Instances: d.Instances, Start: nonNilSlice(d.Start), Unchanged: nonNilSlice(d.Unchanged),
		FirstBatch: d.FirstBatch, Replace: []daemonDiffReplaceJSON{}, Stop: []daemonDiffStopJSON{}}
	for _, r := range d.Replace {
		out.Replace = append(out.Replace, daemonDiffReplaceJSON{InstanceID: r.InstanceID, TaskID: r.TaskID, From: r.From})
	}
	for _, s := range d.Stop {
		out.Stop = append(out.Stop, daemonDiffStopJSON{InstanceID: s.InstanceID, TaskID: s.TaskID, Reason: s.Reason})
	}
	return out
}

type daemonVersionRequest struct {
	VersionID *uuid.UUID `json:"version_id"`
}

// The agent protocol.

type daemonRegisterRequest struct {
	ID         string            `json:"id"`
	Cluster    string            `json:"cluster"`
	Hostname   string            `json:"hostname"`
	Attributes map[string]string `json:"attributes"`
}

type daemonRegisterJSON struct {
	InstanceID       string `json:"instance_id"`
	Cluster          string `json:"cluster"`
	HeartbeatSeconds int    `json:"heartbeat_seconds"`
}

type daemonAgentTaskJSON struct {
	ID          uuid.UUID         `json:"id"`
	Environment string            `json:"environment"`
	Version     int               `json:"version"`
	Run         bool              `json:"run"`
	Command     []string          `json:"command"`
	Env         map[string]string `json:"env"`
}

type daemonAgentTasksJSON struct {
	Tag              string                `json:"tag"`
	HeartbeatSeconds int                   `json:"heartbeat_seconds"`
	Tasks            []daemonAgentTaskJSON `json:"tasks"`
	// Steps are pipeline steps to run once (pipelines_agent.go).
	Steps []agentStepJSON `json:"steps"`
}

type daemonReportRequest struct {
	State    string `json:"state"`
	PID      *int   `json:"pid"`
	ExitCode *int   `json:"exit_code"`
	Reason   string `json:"reason"`
}
