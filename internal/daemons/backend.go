package daemons

import (
	"context"
	"time"

	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/daemonplan"
	"github.com/gantryhq/gantry/models"
)

// Backend is how Gantry reaches a cluster: the machines that run tasks.
// The service keeps its own copy of each cluster (daemon_instances,
// daemon_tasks) and decides everything from it; a backend only observes the
// cluster and carries out decisions. `local` (agents, below) is one;
// `ecs` (ECS container instances and StartTask) is another.
type Backend interface {
	// Name is the backend's name as stored with each instance.
	Name() string
	// Observe reports the cluster as the backend sees it now: its instances
	// (an instance missing from the view has left) and the states of the
	// tasks it knows. It is the state service's full reconcile; events
	// between two reconciles arrive by the backend's own path.
	Observe(ctx context.Context, cluster string) (*ClusterView, error)
	// Dispatch carries out what the service committed: tasks to start (in
	// state launching) and tasks to stop (stopping). It is called after the
	// commit, and again for tasks still launching or stopping, so it must be
	// idempotent by task ID (ECS: startedBy = the deployment, a ListTasks
	// before StartTask).
	Dispatch(ctx context.Context, start, stop []models.DaemonTask) error
}

// ClusterView is a backend's view of one cluster.
type ClusterView struct {
	Instances []ObservedInstance
	Tasks     []ObservedTask
}

// ObservedInstance is an instance as the backend sees it.
type ObservedInstance struct {
	ID         string
	Hostname   string
	Attributes map[string]string
	Status     daemonplan.InstanceStatus
}

// ObservedTask is a task's state as the backend sees it.
type ObservedTask struct {
	ID       string
	State    daemonplan.TaskState
	ExitCode *int
	Reason   string
}

// LocalBackend is the `local` backend: machines run `gantry agent`, which
// registers the machine as an instance, heartbeats, long-polls for the
// tasks the database assigns it and reports their starts and exits itself
// (agents.go). The database is therefore the backend's own state: Observe
// reads the instances and takes those silent past the heartbeat TTL for
// gone, and Dispatch has nothing to push, because agents pull.
type LocalBackend struct {
	DB  bun.IDB
	TTL time.Duration
	Now func() time.Time
}

// BackendLocal is the local backend's name.
const BackendLocal = "local"

func (b *LocalBackend) Name() string { return BackendLocal }

func (b *LocalBackend) Observe(ctx context.Context, cluster string) (*ClusterView, error) {
	instances, err := models.DaemonClusterInstances(ctx, b.DB, cluster)
	if err != nil {
		return nil, err
	}
	silentSince := b.Now().Add(-b.TTL)
	view := &ClusterView{}
	for _, in := range instances {
		if in.Backend != BackendLocal || in.LastSeenAt.Before(silentSince) {
			continue // missing from the view: it has left
		}
		view.Instances = append(view.Instances, ObservedInstance{ID: in.ID, Hostname: in.Hostname,
			Attributes: in.Attributes, Status: daemonplan.InstanceStatus(in.Status)})
	}
	return view, nil
}

// Dispatch has nothing to do: agents long-poll for their tasks.
func (b *LocalBackend) Dispatch(context.Context, []models.DaemonTask, []models.DaemonTask) error {
	return nil
}
