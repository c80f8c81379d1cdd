// Package daemons is the daemons area (seed 002): environments with
// immutable versions, deployments that roll a version out in batches within
// a min-healthy budget, and the monitors that keep one task of each active
// environment on every matching instance (new instances, dead tasks,
// departed instances). Web handlers and job workers call it; what to do on
// each instance is decided by the pure engine internal/daemonplan, and the
// cluster itself is reached through a Backend.
//
// One file per step: environments.go (create, update, delete, the overlap
// rule), deployments.go (start, rollback, stop, the diff), rollout.go (the
// scheduling manager: claiming the in-progress slot, batches, the monitor,
// reconcile and the sweeps), agents.go (the local backend's agents:
// register, heartbeat and long-poll, reports, leaving), backend.go.
package daemons

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/gantryhq/gantry/internal/daemonplan"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// Log events of this area.
const (
	EventEnvironmentCreated  = "daemon-environment-created"
	EventEnvironmentUpdated  = "daemon-environment-updated"
	EventEnvironmentDeleted  = "daemon-environment-deleted"
	EventDeploymentPending   = "daemon-deployment-pending"
	EventDeploymentCanceled  = "daemon-deployment-canceled"
	EventDeploymentStarted   = "daemon-deployment-started"
	EventDeploymentBatch     = "daemon-deployment-batch-started"
	EventDeploymentComplete  = "daemon-deployment-completed"
	EventDeploymentUnhealthy = "daemon-deployment-unhealthy"
	EventDeploymentTimedOut  = "daemon-deployment-timed-out"
	EventDeploymentStopped   = "daemon-deployment-stopped"
	EventTaskStarting        = "daemon-task-starting"
	EventTaskRunning         = "daemon-task-running"
	EventTaskFailed          = "daemon-task-failed"
	EventTaskStopping        = "daemon-task-stopping"
	EventTaskStopped         = "daemon-task-stopped"
	EventInstanceRegistered  = "daemon-instance-registered"
	EventInstanceLeft        = "daemon-instance-left"
)

// Actor is what the area's own monitors log as.
const Actor = "gantry:daemons"

// Service is the daemons area.
type Service struct {
	Queue  *jobs.Queue
	Logger *slog.Logger
	// Backend reaches every cluster not in ClusterBackends (the local
	// backend).
	Backend Backend
	// ClusterBackends is the backend of each cluster that has its own (an
	// ECS cluster); set before the workers start.
	ClusterBackends map[string]Backend
	Metrics         *Metrics // nil: not measured
	Now             func() time.Time
	// HeartbeatInterval is how often agents heartbeat; an instance silent
	// for HeartbeatTTL has left the cluster.
	HeartbeatInterval time.Duration
	HeartbeatTTL      time.Duration
	// StepInterval is how often an in-progress deployment is looked at
	// between events.
	StepInterval time.Duration
	// Backoff is the crash-loop backoff of dead tasks.
	Backoff daemonplan.Backoff
	// CrashReset: a task failing longer than this after the previous
	// failure starts the count again.
	CrashReset time.Duration
	// DefaultTimeout is a deployment's deadline when the environment sets
	// none.
	DefaultTimeout time.Duration
}

// Defaults for the Service's durations.
const (
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultHeartbeatTTL      = 20 * time.Second
	DefaultStepInterval      = 2 * time.Second
	DefaultCrashReset        = 10 * time.Minute
	DefaultDeploymentTimeout = 30 * time.Minute
)

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// backendFor is the backend that reaches cluster.
func (s *Service) backendFor(cluster string) Backend {
	if b, ok := s.ClusterBackends[cluster]; ok {
		return b
	}
	return s.Backend
}

func (s *Service) stepInterval() time.Duration {
	if s.StepInterval > 0 {
		return s.StepInterval
	}
	return DefaultStepInterval
}

func (s *Service) heartbeatTTL() time.Duration {
	if s.HeartbeatTTL > 0 {
		return s.HeartbeatTTL
	}
	return DefaultHeartbeatTTL
}

func (s *Service) heartbeatInterval() time.Duration {
	if s.HeartbeatInterval > 0 {
		return s.HeartbeatInterval
	}
	return DefaultHeartbeatInterval
}

// logEnv appends an environment-level entry.
func logEnv(ctx context.Context, tx jobs.Tx, env string, deployment uuid.UUID, version uuid.UUID, event, actor string, detail map[string]any) error {
	e := &models.LogEntry{TargetID: models.DaemonEnvironmentTarget(env), Event: event, Actor: actor, Detail: detail}
	if deployment != uuid.Nil {
		e.DeploymentID = deployment.String()
	}
	if version != uuid.Nil {
		e.Revision = version.String()
	}
	return models.AppendLog(ctx, tx, e)
}

// logTask appends an entry about a task on an instance.
func logTask(ctx context.Context, tx jobs.Tx, env string, t *models.DaemonTask, event, actor string, detail map[string]any) error {
	if detail == nil {
		detail = map[string]any{}
	}
	detail["task"] = t.ID.String()
	return models.AppendLog(ctx, tx, &models.LogEntry{
		TargetID: models.DaemonInstanceTarget(env, t.InstanceID), Event: event, Actor: actor,
		DeploymentID: t.DeploymentID.String(), Revision: t.VersionID.String(), Detail: detail,
	})
}
