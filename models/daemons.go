package models

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Daemons (seed 002): environments, their immutable versions, deployments,
// and Gantry's cached view of each cluster.

// Deployment types and states of daemon deployments, as stored.
const (
	DaemonUserCreated  = "user-created"
	DaemonNewInstance  = "new-instance"
	DaemonHealthRepair = "health-repair"

	DaemonPending    = "pending"
	DaemonInProgress = "in-progress"
	DaemonComplete   = "complete"
	DaemonUnhealthy  = "unhealthy"
	DaemonTimedOut   = "timed-out"
	DaemonStopped    = "stopped"
	DaemonCanceled   = "canceled"
)

// DaemonEnvironment is one daemon environment.
type DaemonEnvironment struct {
	bun.BaseModel `bun:"table:daemon_environments,alias:de"`

	ID                int64 `bun:",pk,autoincrement"`
	Name              string
	Type              string
	Active            bool
	Source            string
	DeployedVersionID *uuid.UUID
	CreatedAt         time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	UpdatedAt         time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	DeletedAt         *time.Time
}

// DaemonVersion is one immutable version of an environment.
type DaemonVersion struct {
	bun.BaseModel `bun:"table:daemon_versions,alias:dv"`

	ID                uuid.UUID `bun:",pk"`
	EnvironmentID     int64
	Number            int
	TaskDefinition    string
	Command           []string          `bun:",array"`
	TaskEnv           map[string]string `bun:",type:jsonb"`
	Cluster           string
	Attributes        []string `bun:",array"`
	Role              string
	MinHealthyPercent int
	TimeoutSeconds    int
	CreatedBy         string
	CreatedAt         time.Time `bun:",nullzero,notnull,default:current_timestamp"`
}

// DaemonDeployment is one deployment of an environment version.
type DaemonDeployment struct {
	bun.BaseModel `bun:"table:daemon_deployments,alias:dd"`

	ID            uuid.UUID `bun:",pk"`
	EnvironmentID int64
	VersionID     uuid.UUID
	Type          string
	State         string
	Reason        string
	Batches       int
	CreatedBy     string
	CreatedAt     time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	StartedAt     *time.Time
	EndedAt       *time.Time
	DeadlineAt    *time.Time
	SteppedAt     *time.Time
}

// Ended says whether the deployment is over.
func (d *DaemonDeployment) Ended() bool {
	return d.State != DaemonPending && d.State != DaemonInProgress
}

// DaemonInstance is one machine of a cluster as Gantry last saw it.
type DaemonInstance struct {
	bun.BaseModel `bun:"table:daemon_instances,alias:di"`

	ID           string `bun:",pk"`
	Cluster      string
	Backend      string
	Hostname     string
	Attributes   map[string]string `bun:",type:jsonb"`
	Status       string
	RegisteredAt time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	LastSeenAt   time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	LeftAt       *time.Time
}

// DaemonTask is one task of an environment on one instance.
type DaemonTask struct {
	bun.BaseModel `bun:"table:daemon_tasks,alias:dt"`

	ID            uuid.UUID `bun:",pk"`
	EnvironmentID int64
	InstanceID    string
	VersionID     uuid.UUID
	DeploymentID  uuid.UUID
	State         string
	Replaces      *uuid.UUID
	ExitCode      *int
	Reason        string
	PID           *int      `bun:"pid"`
	CreatedAt     time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	RunningAt     *time.Time
	StoppingAt    *time.Time
	EndedAt       *time.Time
}

// DaemonCrashLoop is how many of an environment's tasks failed in a row on
// one instance.
type DaemonCrashLoop struct {
	bun.BaseModel `bun:"table:daemon_crash_loops,alias:dc"`

	EnvironmentID int64  `bun:",pk"`
	InstanceID    string `bun:",pk"`
	Failures      int
	LastExitAt    time.Time
}

// DaemonCluster is when a cluster's view was last refreshed in full.
type DaemonCluster struct {
	bun.BaseModel `bun:"table:daemon_clusters,alias:dcl"`

	Name        string `bun:",pk"`
	Backend     string
	RefreshedAt time.Time
}

// DaemonEnvironmentTarget is an environment's log target.
func DaemonEnvironmentTarget(name string) string { return "daemons/" + name }

// DaemonInstanceTarget is the log target of an environment on an instance.
func DaemonInstanceTarget(env, instance string) string { return "daemons/" + env + "/" + instance }

// --- environments and versions ---

// DaemonEnvironmentByName is the live environment called name.
func DaemonEnvironmentByName(ctx context.Context, db bun.IDB, name string) (*DaemonEnvironment, error) {
	e := new(DaemonEnvironment)
	err := db.NewSelect().Model(e).Where("name = ?", name).Where("deleted_at IS NULL").Scan(ctx)
	return e, notFound(err)
}

// LockDaemonEnvironment reads the live environment called name and locks
// its row until the transaction ends: every change to an environment's
// deployments goes through this lock, so they happen one at a time.
func LockDaemonEnvironment(ctx context.Context, db bun.IDB, name string) (*DaemonEnvironment, error) {
	e := new(DaemonEnvironment)
	err := db.NewSelect().Model(e).Where("name = ?", name).Where("deleted_at IS NULL").For("UPDATE").Scan(ctx)
	return e, notFound(err)
}

// LockDaemonEnvironmentByID is LockDaemonEnvironment by id, deleted ones
// included.
func LockDaemonEnvironmentByID(ctx context.Context, db bun.IDB, id int64) (*DaemonEnvironment, error) {
	e := new(DaemonEnvironment)
	err := db.NewSelect().Model(e).Where("id = ?", id).For("UPDATE").Scan(ctx)
	return e, notFound(err)
}

// DaemonEnvironments lists the live environments by name.
func DaemonEnvironments(ctx context.Context, db bun.IDB) ([]DaemonEnvironment, error) {
	var es []DaemonEnvironment
	err := db.NewSelect().Model(&es).Where("deleted_at IS NULL").OrderExpr("name").Scan(ctx)
	return es, err
}

// InsertDaemonEnvironment stores a new environment; ErrConflict when the
// name is taken.
func InsertDaemonEnvironment(ctx context.Context, db bun.IDB, e *DaemonEnvironment) error {
	_, err := db.NewInsert().Model(e).Returning("id, created_at, updated_at").Exec(ctx)
	return uniqueViolation(err)
}

// UpdateDaemonEnvironment writes an environment's state columns.
func UpdateDaemonEnvironment(ctx context.Context, db bun.IDB, e *DaemonEnvironment) error {
	e.UpdatedAt = time.Now()
	_, err := db.NewUpdate().Model(e).Column("active", "source", "deployed_version_id", "updated_at", "deleted_at").WherePK().Exec(ctx)
	return err
}

// InsertDaemonVersion stores a version, numbered after the environment's
// last one (the caller holds the environment's lock).
func InsertDaemonVersion(ctx context.Context, db bun.IDB, v *DaemonVersion) error {
	err := db.NewSelect().Model((*DaemonVersion)(nil)).ColumnExpr("coalesce(max(number), 0) + 1").
		Where("environment_id = ?", v.EnvironmentID).Scan(ctx, &v.Number)
	if err != nil {
		return fmt.Errorf("numbering version: %w", err)
	}
	if v.TaskEnv == nil {
		v.TaskEnv = map[string]string{}
	}
	if v.Attributes == nil {
		v.Attributes = []string{}
	}
	_, err = db.NewInsert().Model(v).Returning("created_at").Exec(ctx)
	return err
}

// DaemonVersionByID is one version.
func DaemonVersionByID(ctx context.Context, db bun.IDB, id uuid.UUID) (*DaemonVersion, error) {
	v := new(DaemonVersion)
	err := db.NewSelect().Model(v).Where("id = ?", id).Scan(ctx)
	return v, notFound(err)
}

// DaemonVersions lists an environment's versions, newest first.
func DaemonVersions(ctx context.Context, db bun.IDB, envID int64) ([]DaemonVersion, error) {
	var vs []DaemonVersion
	err := db.NewSelect().Model(&vs).Where("environment_id = ?", envID).OrderExpr("number DESC").Scan(ctx)
	return vs, err
}

// LatestDaemonVersion is an environment's newest version.
func LatestDaemonVersion(ctx context.Context, db bun.IDB, envID int64) (*DaemonVersion, error) {
	v := new(DaemonVersion)
	err := db.NewSelect().Model(v).Where("environment_id = ?", envID).OrderExpr("number DESC").Limit(1).Scan(ctx)
	return v, notFound(err)
}

// LatestDaemonVersionsOnCluster is the newest version of every live
// environment on cluster, for the overlap check.
func LatestDaemonVersionsOnCluster(ctx context.Context, db bun.IDB, cluster string) ([]DaemonVersion, error) {
	var vs []DaemonVersion
	err := db.NewSelect().Model(&vs).
		DistinctOn("dv.environment_id").
		Join("JOIN daemon_environments AS de ON de.id = dv.environment_id AND de.deleted_at IS NULL").
		OrderExpr("dv.environment_id, dv.number DESC").Scan(ctx)
	if err != nil {
		return nil, err
	}
	out := vs[:0]
	for _, v := range vs {
		if v.Cluster == cluster {
			out = append(out, v)
		}
	}
	return out, nil
}

// --- deployments ---

// InsertDaemonDeployment stores a deployment. ErrConflict when the
// database refuses it (a second in-progress or pending user-created one).
func InsertDaemonDeployment(ctx context.Context, db bun.IDB, d *DaemonDeployment) error {
	_, err := db.NewInsert().Model(d).Returning("created_at").Exec(ctx)
	return uniqueViolation(err)
}

// InsertDaemonDeploymentInProgress stores an in-progress deployment unless
// the environment already has one; it reports whether it did.
func InsertDaemonDeploymentInProgress(ctx context.Context, db bun.IDB, d *DaemonDeployment) (bool, error) {
	d.State = DaemonInProgress
	res, err := db.NewInsert().Model(d).
		On("CONFLICT (environment_id) WHERE state = 'in-progress' DO NOTHING").Exec(ctx)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ClaimDaemonDeployment moves a pending deployment to in-progress when its
// environment has none in progress: the conditional update that claims the
// environment's slot. It reports whether it did.
func ClaimDaemonDeployment(ctx context.Context, db bun.IDB, d *DaemonDeployment, now time.Time, deadline time.Time) (bool, error) {
	res, err := db.NewUpdate().Model(d).
		Set("state = ?", DaemonInProgress).Set("started_at = ?", now).Set("deadline_at = ?", deadline).Set("stepped_at = ?", now).
		WherePK().Where("state = ?", DaemonPending).
		Where("NOT EXISTS (SELECT 1 FROM daemon_deployments AS o WHERE o.environment_id = dd.environment_id AND o.state = ?)", DaemonInProgress).
		Returning("*").Exec(ctx)
	if err != nil {
		return false, uniqueViolation(err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// EndDaemonDeployment moves a deployment from one of from to state.
func EndDaemonDeployment(ctx context.Context, db bun.IDB, d *DaemonDeployment, state, reason string, now time.Time, from ...string) (bool, error) {
	res, err := db.NewUpdate().Model(d).
		Set("state = ?", state).Set("reason = ?", reason).Set("ended_at = ?", now).
		WherePK().Where("state IN (?)", bun.In(from)).Returning("*").Exec(ctx)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// StepDaemonDeployment records a step: its batch count and when.
func StepDaemonDeployment(ctx context.Context, db bun.IDB, id uuid.UUID, batches int, now time.Time) error {
	_, err := db.NewUpdate().Model((*DaemonDeployment)(nil)).
		Set("batches = ?", batches).Set("stepped_at = ?", now).Where("id = ?", id).Exec(ctx)
	return err
}

// DaemonDeploymentByID is one deployment.
func DaemonDeploymentByID(ctx context.Context, db bun.IDB, id uuid.UUID) (*DaemonDeployment, error) {
	d := new(DaemonDeployment)
	err := db.NewSelect().Model(d).Where("id = ?", id).Scan(ctx)
	return d, notFound(err)
}

// DaemonDeployments lists an environment's deployments, latest first.
func DaemonDeployments(ctx context.Context, db bun.IDB, envID int64, limit int) ([]DaemonDeployment, error) {
	var ds []DaemonDeployment
	err := db.NewSelect().Model(&ds).Where("environment_id = ?", envID).OrderExpr("created_at DESC, id").Limit(int64(limit)).Scan(ctx)
	return ds, err
}

// OpenDaemonDeployments are an environment's pending and in-progress
// deployments, oldest first.
func OpenDaemonDeployments(ctx context.Context, db bun.IDB, envID int64) ([]DaemonDeployment, error) {
	var ds []DaemonDeployment
	err := db.NewSelect().Model(&ds).Where("environment_id = ?", envID).
		Where("state IN (?)", bun.In([]string{DaemonPending, DaemonInProgress})).OrderExpr("created_at, id").Scan(ctx)
	return ds, err
}

// StaleDaemonDeployments are in-progress deployments no step has touched
// since before, for the stale-lock sweep.
func StaleDaemonDeployments(ctx context.Context, db bun.IDB, before time.Time) ([]DaemonDeployment, error) {
	var ds []DaemonDeployment
	err := db.NewSelect().Model(&ds).Where("state = ?", DaemonInProgress).
		Where("coalesce(stepped_at, started_at) < ?", before).Scan(ctx)
	return ds, err
}

// PendingDaemonDeployments are the pending deployments of environments
// with none in progress, for the sweep that starts them.
func PendingDaemonDeployments(ctx context.Context, db bun.IDB) ([]DaemonDeployment, error) {
	var ds []DaemonDeployment
	err := db.NewSelect().Model(&ds).Where("state = ?", DaemonPending).
		Where("NOT EXISTS (SELECT 1 FROM daemon_deployments AS o WHERE o.environment_id = dd.environment_id AND o.state = ?)", DaemonInProgress).
		OrderExpr("created_at").Scan(ctx)
	return ds, err
}

// --- instances, tasks and crash loops ---

// UpsertDaemonInstance registers an instance (again): active, seen now.
func UpsertDaemonInstance(ctx context.Context, db bun.IDB, in *DaemonInstance) error {
	_, err := db.NewInsert().Model(in).
		On("CONFLICT (id) DO UPDATE").
		Set("cluster = EXCLUDED.cluster, hostname = EXCLUDED.hostname, attributes = EXCLUDED.attributes, status = EXCLUDED.status, last_seen_at = EXCLUDED.last_seen_at, left_at = NULL").
		Returning("*").Exec(ctx)
	if err != nil {
		return err
	}
	_, err = db.NewInsert().Model(&DaemonCluster{Name: in.Cluster, Backend: in.Backend, RefreshedAt: in.LastSeenAt}).
		On("CONFLICT (name) DO NOTHING").Exec(ctx)
	return err
}

// DaemonInstanceByID is one instance.
func DaemonInstanceByID(ctx context.Context, db bun.IDB, id string) (*DaemonInstance, error) {
	in := new(DaemonInstance)
	err := db.NewSelect().Model(in).Where("id = ?", id).Scan(ctx)
	return in, notFound(err)
}

// TouchDaemonInstance records a heartbeat of an active instance; ErrNotFound
// when the instance is unknown or has left (it must register again).
func TouchDaemonInstance(ctx context.Context, db bun.IDB, id string, now time.Time) error {
	res, err := db.NewUpdate().Model((*DaemonInstance)(nil)).Set("last_seen_at = ?", now).
		Where("id = ?", id).Where("status = 'active'").Exec(ctx)
	return affectedOne(res, err)
}

// SetDaemonInstanceGone marks an instance as having left the cluster.
func SetDaemonInstanceGone(ctx context.Context, db bun.IDB, id string, now time.Time) (bool, error) {
	res, err := db.NewUpdate().Model((*DaemonInstance)(nil)).Set("status = 'gone'").Set("left_at = ?", now).
		Where("id = ?", id).Where("status <> 'gone'").Exec(ctx)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// SilentDaemonInstances are the active instances of a backend whose last
// heartbeat is older than before.
func SilentDaemonInstances(ctx context.Context, db bun.IDB, backend string, before time.Time) ([]DaemonInstance, error) {
	var ins []DaemonInstance
	err := db.NewSelect().Model(&ins).Where("backend = ?", backend).Where("status = 'active'").
		Where("last_seen_at < ?", before).Scan(ctx)
	return ins, err
}

// DaemonClusterInstances lists a cluster's instances that have not left, by id.
func DaemonClusterInstances(ctx context.Context, db bun.IDB, cluster string) ([]DaemonInstance, error) {
	var ins []DaemonInstance
	err := db.NewSelect().Model(&ins).Where("cluster = ?", cluster).Where("status <> 'gone'").OrderExpr("id").Scan(ctx)
	return ins, err
}

// RefreshDaemonCluster records a full refresh of a cluster's view.
func RefreshDaemonCluster(ctx context.Context, db bun.IDB, name, backend string, now time.Time) error {
	_, err := db.NewInsert().Model(&DaemonCluster{Name: name, Backend: backend, RefreshedAt: now}).
		On("CONFLICT (name) DO UPDATE").Set("refreshed_at = EXCLUDED.refreshed_at").Exec(ctx)
	return err
}

// DaemonClusters lists every cluster Gantry has seen.
func DaemonClusters(ctx context.Context, db bun.IDB) ([]DaemonCluster, error) {
	var cs []DaemonCluster
	err := db.NewSelect().Model(&cs).OrderExpr("name").Scan(ctx)
	return cs, err
}

// LiveDaemonTasks are an environment's tasks that run or may soon
// (launching, running, stopping).
func LiveDaemonTasks(ctx context.Context, db bun.IDB, envID int64) ([]DaemonTask, error) {
	var ts []DaemonTask
	err := db.NewSelect().Model(&ts).Where("environment_id = ?", envID).
		Where("state IN ('launching', 'running', 'stopping')").OrderExpr("created_at, id").Scan(ctx)
	return ts, err
}

// LatestDaemonTasks is, per instance, an environment's newest task whatever
// its state, plus every other live one: the planner's snapshot and the
// grid. Newest first per instance.
func LatestDaemonTasks(ctx context.Context, db bun.IDB, envID int64) ([]DaemonTask, error) {
	var ts []DaemonTask
	err := db.NewRaw(`SELECT * FROM daemon_tasks WHERE environment_id = ? AND state IN ('launching', 'running', 'stopping')
		UNION
		SELECT * FROM (SELECT DISTINCT ON (instance_id) * FROM daemon_tasks WHERE environment_id = ?
			ORDER BY instance_id, created_at DESC, id) AS newest
		ORDER BY instance_id, created_at DESC`, envID, envID).Scan(ctx, &ts)
	return ts, err
}

// NewestDaemonTasksOn is an environment's newest task on each of the
// instances, for the ones that have any.
func NewestDaemonTasksOn(ctx context.Context, db bun.IDB, envID int64, instanceIDs []string) ([]DaemonTask, error) {
	if len(instanceIDs) == 0 {
		return nil, nil
	}
	var ts []DaemonTask
	err := db.NewSelect().Model(&ts).DistinctOn("instance_id").Where("environment_id = ?", envID).
		Where("instance_id IN (?)", bun.In(instanceIDs)).OrderExpr("instance_id, created_at DESC, id").Scan(ctx)
	return ts, err
}

// DeploymentDaemonTasks are the tasks a deployment started.
func DeploymentDaemonTasks(ctx context.Context, db bun.IDB, deploymentID uuid.UUID) ([]DaemonTask, error) {
	var ts []DaemonTask
	err := db.NewSelect().Model(&ts).Where("deployment_id = ?", deploymentID).OrderExpr("created_at, id").Scan(ctx)
	return ts, err
}

// ClusterDaemonTasks are the live tasks on a cluster's instances that have
// not left, every environment's (deleted ones' too, whose tasks are being
// stopped), with the names of their environments by id.
func ClusterDaemonTasks(ctx context.Context, db bun.IDB, cluster string) ([]DaemonTask, map[int64]string, error) {
	var ts []DaemonTask
	err := db.NewSelect().Model(&ts).
		Where("instance_id IN (SELECT id FROM daemon_instances WHERE cluster = ? AND status <> 'gone')", cluster).
		Where("state IN ('launching', 'running', 'stopping')").OrderExpr("created_at, id").Scan(ctx)
	if err != nil || len(ts) == 0 {
		return ts, nil, err
	}
	ids := map[int64]bool{}
	for _, t := range ts {
		ids[t.EnvironmentID] = true
	}
	var envs []DaemonEnvironment
	err = db.NewSelect().Model(&envs).Column("id", "name").Where("id IN (?)", bun.In(slices.Collect(maps.Keys(ids)))).Scan(ctx)
	names := map[int64]string{}
	for _, e := range envs {
		names[e.ID] = e.Name
	}
	return ts, names, err
}

// InstanceDaemonTasks are the live tasks on an instance, every environment's.
func InstanceDaemonTasks(ctx context.Context, db bun.IDB, instanceID string) ([]DaemonTask, error) {
	var ts []DaemonTask
	err := db.NewSelect().Model(&ts).Where("instance_id = ?", instanceID).
		Where("state IN ('launching', 'running', 'stopping')").OrderExpr("created_at, id").Scan(ctx)
	return ts, err
}

// LockDaemonTask reads a task and locks it until the transaction ends.
func LockDaemonTask(ctx context.Context, db bun.IDB, id uuid.UUID) (*DaemonTask, error) {
	t := new(DaemonTask)
	err := db.NewSelect().Model(t).Where("id = ?", id).For("UPDATE").Scan(ctx)
	return t, notFound(err)
}

// InsertDaemonTasks stores new tasks; ErrConflict when one would be a
// second launching or running task of its environment on its instance.
func InsertDaemonTasks(ctx context.Context, db bun.IDB, ts []DaemonTask) error {
	if len(ts) == 0 {
		return nil
	}
	_, err := db.NewInsert().Model(&ts).Returning("created_at").Exec(ctx)
	return uniqueViolation(err)
}

// UpdateDaemonTask writes a task's state columns.
func UpdateDaemonTask(ctx context.Context, db bun.IDB, t *DaemonTask) error {
	_, err := db.NewUpdate().Model(t).
		Column("state", "exit_code", "reason", "pid", "running_at", "stopping_at", "ended_at").WherePK().Exec(ctx)
	return err
}

// StopDaemonTasks moves live tasks to stopping (or, for those still
// launching on an instance that has left, straight to stopped).
func StopDaemonTasks(ctx context.Context, db bun.IDB, ids []uuid.UUID, reason string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := db.NewUpdate().Model((*DaemonTask)(nil)).
		Set("state = 'stopping'").Set("stopping_at = ?", now).Set("reason = ?", reason).
		Where("id IN (?)", bun.In(ids)).Where("state IN ('launching', 'running')").Exec(ctx)
	return err
}

// EndDaemonTasks marks live tasks stopped at once (their instance is gone).
func EndDaemonTasks(ctx context.Context, db bun.IDB, ids []uuid.UUID, reason string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := db.NewUpdate().Model((*DaemonTask)(nil)).
		Set("state = 'stopped'").Set("ended_at = ?", now).Set("reason = ?", reason).
		Where("id IN (?)", bun.In(ids)).Where("state IN ('launching', 'running', 'stopping')").Exec(ctx)
	return err
}

// EndDaemonTasksOn marks every live task on a departed instance stopped:
// nothing can run there any more.
func EndDaemonTasksOn(ctx context.Context, db bun.IDB, instanceID, reason string, now time.Time) ([]DaemonTask, error) {
	var ts []DaemonTask
	_, err := db.NewUpdate().Model(&ts).
		Set("state = 'stopped'").Set("ended_at = ?", now).Set("reason = ?", reason).
		Where("instance_id = ?", instanceID).Where("state IN ('launching', 'running', 'stopping')").
		Returning("*").Exec(ctx)
	return ts, err
}

// DaemonCrashLoops are an environment's crash records by instance.
func DaemonCrashLoops(ctx context.Context, db bun.IDB, envID int64) ([]DaemonCrashLoop, error) {
	var cs []DaemonCrashLoop
	err := db.NewSelect().Model(&cs).Where("environment_id = ?", envID).Scan(ctx)
	return cs, err
}

// RecordDaemonCrash counts a failed task: one more in a row, or the first
// again when the previous failure is older than reset.
func RecordDaemonCrash(ctx context.Context, db bun.IDB, envID int64, instanceID string, now time.Time, reset time.Duration) error {
	_, err := db.NewInsert().Model(&DaemonCrashLoop{EnvironmentID: envID, InstanceID: instanceID, Failures: 1, LastExitAt: now}).
		On("CONFLICT (environment_id, instance_id) DO UPDATE").
		Set("failures = CASE WHEN dc.last_exit_at < ? THEN 1 ELSE dc.failures + 1 END", now.Add(-reset)).
		Set("last_exit_at = EXCLUDED.last_exit_at").Exec(ctx)
	return err
}

// DaemonTaskCounts counts an environment's tasks per state, live ones and
// failed ones whose instance has no live task (the health line).
func DaemonTaskCounts(ctx context.Context, db bun.IDB) (map[int64]map[string]int, error) {
	var rows []struct {
		EnvironmentID int64
		State         string
		N             int
	}
	err := db.NewSelect().TableExpr("daemon_tasks AS dt").
		ColumnExpr("dt.environment_id, dt.state, count(*) AS n").
		Where("dt.state IN ('launching', 'running', 'stopping') OR (dt.state = 'failed' AND dt.id = (SELECT l.id FROM daemon_tasks AS l WHERE l.environment_id = dt.environment_id AND l.instance_id = dt.instance_id ORDER BY l.created_at DESC, l.id LIMIT 1))").
		GroupExpr("dt.environment_id, dt.state").Scan(ctx, &rows)
	if err != nil {
		return nil, err
	}
	out := map[int64]map[string]int{}
	for _, r := range rows {
		if out[r.EnvironmentID] == nil {
			out[r.EnvironmentID] = map[string]int{}
		}
		out[r.EnvironmentID][r.State] = r.N
	}
	return out, nil
}

// DaemonDeploymentCounts counts deployments by state.
func DaemonDeploymentCounts(ctx context.Context, db bun.IDB) (map[string]int, error) {
	var rows []struct {
		State string
		N     int
	}
	err := db.NewSelect().TableExpr("daemon_deployments").ColumnExpr("state, count(*) AS n").GroupExpr("state").Scan(ctx, &rows)
	out := map[string]int{}
	for _, r := range rows {
		out[r.State] = r.N
	}
	return out, err
}

// DaemonLog is the slice of the deployment log about one environment and
// its instances, newest first.
func DaemonLog(ctx context.Context, db bun.IDB, env string, limit int) ([]LogEntry, error) {
	var entries []LogEntry
	target := DaemonEnvironmentTarget(env)
	err := db.NewSelect().Model(&entries).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("target_id = ?", target).WhereOr("starts_with(target_id, ?)", target+"/")
		}).OrderExpr("id DESC").Limit(int64(limit)).Scan(ctx)
	return entries, err
}
