package daemons

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/daemonplan"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// TaskDefinition is what a task runs: a command with its arguments and
// environment, under a name that identifies the daemon (two environments
// whose instance groups overlap may not run the same one).
type TaskDefinition struct {
	Name    string
	Command []string
	Env     map[string]string
}

// InstanceGroup is where an environment's tasks run: every instance of the
// cluster carrying all the attributes ("name" or "name=value").
type InstanceGroup struct {
	Cluster    string
	Attributes []string
}

// Spec is what CreateEnvironment and UpdateEnvironment take. On update
// every field but TaskDefinition may be left out (nil, empty) to keep the
// previous version's.
type Spec struct {
	TaskDefinition    TaskDefinition
	InstanceGroup     InstanceGroup
	Role              string
	MinHealthyPercent *int
	// TimeoutSeconds is a deployment's deadline.
	TimeoutSeconds *int
}

// DefaultMinHealthyPercent is the budget when an environment sets none:
// half the instances keep their task during a rollout.
const DefaultMinHealthyPercent = 50

var (
	namePattern      = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	attributePattern = regexp.MustCompile(`^[A-Za-z0-9_.:/-]{1,128}(=[^\s]{0,256})?$`)
)

// ValidName checks an environment name.
func ValidName(name string) error {
	if !namePattern.MatchString(name) {
		return apperr.Field("name", "must be 1–63 lower-case letters, digits, '-' or '_', starting with a letter or digit")
	}
	return nil
}

// version builds a new version from spec over prev (nil for the first),
// reporting each bad field.
func (s *Service) version(spec Spec, prev *models.DaemonVersion) (*models.DaemonVersion, error) {
	bad := apperr.Fields{}
	td := spec.TaskDefinition
	if strings.TrimSpace(td.Name) == "" {
		bad.Add("task_definition.name", "is required")
	}
	for k := range td.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			bad.Add("task_definition.env", fmt.Sprintf("%q is not a variable name", k))
		}
	}
	v := &models.DaemonVersion{ID: uuid.New(), TaskDefinition: strings.TrimSpace(td.Name), Command: td.Command, TaskEnv: td.Env,
		Role: spec.Role, TimeoutSeconds: int(DefaultDeploymentTimeout / time.Second), MinHealthyPercent: DefaultMinHealthyPercent}
	if v.Command == nil {
		v.Command = []string{} // none: an ECS task definition's own
	}
	if prev != nil {
		v.Cluster, v.Attributes, v.Role, v.MinHealthyPercent, v.TimeoutSeconds = prev.Cluster, prev.Attributes, prev.Role, prev.MinHealthyPercent, prev.TimeoutSeconds
		if spec.Role != "" {
			v.Role = spec.Role
		}
	}
	if spec.InstanceGroup.Cluster != "" {
		v.Cluster = spec.InstanceGroup.Cluster
		v.Attributes = spec.InstanceGroup.Attributes
	} else if spec.InstanceGroup.Attributes != nil {
		v.Attributes = spec.InstanceGroup.Attributes
	}
	if v.Cluster == "" {
		bad.Add("instance_group.cluster", "is required")
	} else if !namePattern.MatchString(v.Cluster) {
		bad.Add("instance_group.cluster", "must be 1–63 lower-case letters, digits, '-' or '_'")
	}
	// The command is the local backend's (an agent runs it); an ECS task
	// definition holds its own. A Service that knows no backends (the
	// gantry.yaml check) cannot tell which a cluster is.
	switch b := s.backendFor(v.Cluster); {
	case b == nil:
	case b.Name() == BackendLocal && (len(td.Command) == 0 || strings.TrimSpace(td.Command[0]) == ""):
		bad.Add("task_definition.command", "is required: the program and its arguments, such as [\"/usr/bin/fluent-bit\", \"-c\", \"/etc/fb.conf\"]")
	case b.Name() != BackendLocal && (len(td.Command) > 0 || len(td.Env) > 0):
		bad.Add("task_definition.command", "must be empty on "+b.Name()+" cluster "+v.Cluster+": name the ECS task definition (family:revision or its ARN), which holds the command and environment")
	}
	for _, a := range v.Attributes {
		if !attributePattern.MatchString(a) {
			bad.Add("instance_group.attributes", fmt.Sprintf("%q is not an attribute filter: use name or name=value", a))
		}
	}
	if p := spec.MinHealthyPercent; p != nil {
		if *p < 0 || *p > 100 {
			bad.Add("deployment_configuration.min_healthy_percent", "must be between 0 and 100")
		}
		v.MinHealthyPercent = *p
	}
	if t := spec.TimeoutSeconds; t != nil {
		if *t <= 0 {
			bad.Add("deployment_configuration.timeout_seconds", "must be positive")
		}
		v.TimeoutSeconds = *t
	}
	if v.TaskEnv == nil {
		v.TaskEnv = map[string]string{}
	}
	v.Attributes = slices.Clone(v.Attributes)
	slices.Sort(v.Attributes)
	v.Attributes = slices.Compact(v.Attributes)
	return v, bad.Err()
}

// groupsOverlap says whether two attribute filters on one cluster can
// select the same instance: unless one asks name=a and the other name=b.
func groupsOverlap(a, b []string) bool {
	want := map[string]string{}
	for _, f := range a {
		if name, value, ok := strings.Cut(f, "="); ok {
			want[name] = value
		}
	}
	for _, f := range b {
		if name, value, ok := strings.Cut(f, "="); ok {
			if w, ok := want[name]; ok && w != value {
				return false
			}
		}
	}
	return true
}

// checkOverlap refuses a version whose task definition another live
// environment already runs on an overlapping instance group.
func checkOverlap(ctx context.Context, tx jobs.Tx, envID int64, v *models.DaemonVersion) error {
	others, err := models.LatestDaemonVersionsOnCluster(ctx, tx, v.Cluster)
	if err != nil {
		return err
	}
	for _, o := range others {
		if o.EnvironmentID == envID || o.TaskDefinition != v.TaskDefinition || !groupsOverlap(o.Attributes, v.Attributes) {
			continue
		}
		name, err := environmentName(ctx, tx, o.EnvironmentID)
		if err != nil {
			return err
		}
		return &apperr.Error{Code: apperr.Conflict,
			Message: fmt.Sprintf("Daemon environment %s already runs task definition %s on cluster %s with an overlapping instance group: one copy per instance means one environment per daemon.", name, v.TaskDefinition, v.Cluster),
			Fields:  map[string]string{"task_definition.name": "already run by environment " + name}}
	}
	return nil
}

func environmentName(ctx context.Context, tx jobs.Tx, id int64) (string, error) {
	e, err := models.LockDaemonEnvironmentByID(ctx, tx, id)
	if err != nil {
		return "", err
	}
	return e.Name, nil
}

// CreateEnvironment stores a new, inactive environment and its first
// version, returning both.
func (s *Service) CreateEnvironment(ctx context.Context, name string, spec Spec, source, actor string) (*models.DaemonEnvironment, *models.DaemonVersion, error) {
	bad := apperr.Fields{}
	if err := ValidName(name); err != nil {
		bad.Add("name", "must be 1–63 lower-case letters, digits, '-' or '_', starting with a letter or digit")
	}
	v, err := s.version(spec, nil)
	var ae *apperr.Error
	if errors.As(err, &ae) {
		for k, r := range ae.Fields {
			bad.Add(k, r)
		}
	}
	if err := bad.Err(); err != nil {
		return nil, nil, err
	}
	env := &models.DaemonEnvironment{Name: name, Type: "daemon", Source: source}
	err = s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		if err := models.InsertDaemonEnvironment(ctx, tx, env); errors.Is(err, models.ErrConflict) {
			return &apperr.Error{Code: apperr.Conflict, Message: fmt.Sprintf("A daemon environment named %s already exists.", name),
				Fields: map[string]string{"name": "already taken"}}
		} else if err != nil {
			return err
		}
		v.EnvironmentID, v.CreatedBy = env.ID, actor
		if err := checkOverlap(ctx, tx, env.ID, v); err != nil {
			return err
		}
		if err := models.InsertDaemonVersion(ctx, tx, v); err != nil {
			return err
		}
		return logEnv(ctx, tx, name, uuid.Nil, v.ID, EventEnvironmentCreated, actor, versionDetail(v, source))
	})
	if err != nil {
		return nil, nil, err
	}
	return env, v, nil
}

// Where an environment is declared.
const (
	sourceAPI  = "api"
	sourceFile = "file"
)

// UpdateEnvironment stores a new version of an environment; it deploys
// nothing (StartDeployment does). An environment declared in gantry.yaml
// is changed in the file, not here (409).
func (s *Service) UpdateEnvironment(ctx context.Context, name string, spec Spec, source, actor string) (*models.DaemonVersion, error) {
	return s.updateEnvironment(ctx, name, spec, source, actor, false)
}

// updateEnvironment is UpdateEnvironment; fromFile lets gantry.yaml's sync
// change what the file declares.
func (s *Service) updateEnvironment(ctx context.Context, name string, spec Spec, source, actor string, fromFile bool) (*models.DaemonVersion, error) {
	var v *models.DaemonVersion
	err := s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		env, err := s.lockEnv(ctx, tx, name)
		if err != nil {
			return err
		}
		if env.Source == sourceFile && !fromFile {
			return &apperr.Error{Code: apperr.Conflict,
				Message: fmt.Sprintf("Daemon environment %s is declared in gantry.yaml: change it there and run gantry config apply (the file wins).", name),
				Fields:  map[string]string{"name": "declared in gantry.yaml"}}
		}
		prev, err := models.LatestDaemonVersion(ctx, tx, env.ID)
		if err != nil {
			return err
		}
		if v, err = s.version(spec, prev); err != nil {
			return err
		}
		v.EnvironmentID, v.CreatedBy = env.ID, actor
		if err := checkOverlap(ctx, tx, env.ID, v); err != nil {
			return err
		}
		if env.Source != source {
			env.Source = source
			if err := models.UpdateDaemonEnvironment(ctx, tx, env); err != nil {
				return err
			}
		}
		if err := models.InsertDaemonVersion(ctx, tx, v); err != nil {
			return err
		}
		return logEnv(ctx, tx, name, uuid.Nil, v.ID, EventEnvironmentUpdated, actor, versionDetail(v, source))
	})
	return v, err
}

// SameDefinition says whether a version says the same as spec would make
// of prev (gantry.yaml's sync makes no version when nothing changed).
func (s *Service) SameDefinition(spec Spec, prev *models.DaemonVersion) bool {
	v, err := s.version(spec, prev)
	if err != nil {
		return false
	}
	return v.TaskDefinition == prev.TaskDefinition && slices.Equal(v.Command, prev.Command) && mapsEqual(v.TaskEnv, prev.TaskEnv) &&
		v.Cluster == prev.Cluster && slices.Equal(v.Attributes, prev.Attributes) && v.Role == prev.Role &&
		v.MinHealthyPercent == prev.MinHealthyPercent && v.TimeoutSeconds == prev.TimeoutSeconds
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func versionDetail(v *models.DaemonVersion, source string) map[string]any {
	return map[string]any{"version": v.Number, "task_definition": v.TaskDefinition, "cluster": v.Cluster,
		"attributes": v.Attributes, "min_healthy_percent": v.MinHealthyPercent, "source": source}
}

// lockEnv locks the live environment called name, 404 when there is none.
func (s *Service) lockEnv(ctx context.Context, tx jobs.Tx, name string) (*models.DaemonEnvironment, error) {
	env, err := models.LockDaemonEnvironment(ctx, tx, name)
	if errors.Is(err, models.ErrNotFound) {
		return nil, apperr.New(apperr.NotFound, "No daemon environment %s.", name)
	}
	return env, err
}

// Environment is an environment and what its pages and API show.
type Environment struct {
	models.DaemonEnvironment
	Latest   *models.DaemonVersion
	Deployed *models.DaemonVersion    // nil until a deployment started
	Active   *models.DaemonDeployment // the pending or in-progress deployment, nil when none
	Last     *models.DaemonDeployment // the latest deployment that ended (canceled ones aside), nil when none
	Counts   map[string]int           // tasks by state (live ones and the failed ones not yet replaced)
}

// Healthy says whether every task is up: no failed task waits for a
// restart and the last deployment did not end unhealthy or timed out.
func (e *Environment) Healthy() bool {
	if e.Counts["failed"] > 0 {
		return false
	}
	return e.Last == nil || (e.Last.State != models.DaemonUnhealthy && e.Last.State != models.DaemonTimedOut)
}

// HealthLine is the seed's "2 active, 3 launching, 1 unhealthy".
func (e *Environment) HealthLine() string {
	return fmt.Sprintf("%d active, %d launching, %d unhealthy", e.Counts["running"], e.Counts["launching"], e.Counts["failed"])
}

// GetEnvironment is one environment with its state.
func (s *Service) GetEnvironment(ctx context.Context, name string) (*Environment, error) {
	db := s.Queue.DB()
	env, err := models.DaemonEnvironmentByName(ctx, db, name)
	if errors.Is(err, models.ErrNotFound) {
		return nil, apperr.New(apperr.NotFound, "No daemon environment %s.", name)
	}
	if err != nil {
		return nil, err
	}
	counts, err := models.DaemonTaskCounts(ctx, db)
	if err != nil {
		return nil, err
	}
	return s.describe(ctx, env, counts[env.ID])
}

// ListEnvironments lists the environments (of type typ when not empty).
func (s *Service) ListEnvironments(ctx context.Context, typ string) ([]*Environment, error) {
	if typ != "" && typ != "daemon" {
		return nil, apperr.Field("type", "must be daemon (the only type of environment so far)")
	}
	db := s.Queue.DB()
	envs, err := models.DaemonEnvironments(ctx, db)
	if err != nil {
		return nil, err
	}
	counts, err := models.DaemonTaskCounts(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make([]*Environment, 0, len(envs))
	for i := range envs {
		e, err := s.describe(ctx, &envs[i], counts[envs[i].ID])
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func (s *Service) describe(ctx context.Context, env *models.DaemonEnvironment, counts map[string]int) (*Environment, error) {
	db := s.Queue.DB()
	e := &Environment{DaemonEnvironment: *env, Counts: counts}
	if e.Counts == nil {
		e.Counts = map[string]int{}
	}
	var err error
	if e.Latest, err = models.LatestDaemonVersion(ctx, db, env.ID); err != nil {
		return nil, err
	}
	if env.DeployedVersionID != nil {
		if e.Deployed, err = models.DaemonVersionByID(ctx, db, *env.DeployedVersionID); err != nil {
			return nil, err
		}
	}
	open, err := models.OpenDaemonDeployments(ctx, db, env.ID)
	if err != nil {
		return nil, err
	}
	for i := range open {
		if e.Active == nil || open[i].State == models.DaemonInProgress {
			e.Active = &open[i]
		}
	}
	recent, err := models.DaemonDeployments(ctx, db, env.ID, 20)
	if err != nil {
		return nil, err
	}
	for i := range recent {
		if recent[i].Ended() && recent[i].State != models.DaemonCanceled {
			e.Last = &recent[i]
			break
		}
	}
	return e, nil
}

// DeleteEnvironment removes an environment: refused (409) while a
// user-created deployment is in progress; a monitor-created one is stopped,
// a pending one canceled; every task is stopped. Its versions and
// deployments stay for the record.
func (s *Service) DeleteEnvironment(ctx context.Context, name, actor string) error {
	var stopping []models.DaemonTask
	err := s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		env, err := s.lockEnv(ctx, tx, name)
		if err != nil {
			return err
		}
		open, err := models.OpenDaemonDeployments(ctx, tx, env.ID)
		if err != nil {
			return err
		}
		now := s.now()
		for i := range open {
			d := &open[i]
			if d.State == models.DaemonInProgress && d.Type == models.DaemonUserCreated {
				return &apperr.Error{Code: apperr.Conflict,
					Message: fmt.Sprintf("Deployment %s of %s is in progress: stop it (or let it finish) before deleting the environment.", d.ID, name),
					Fields:  map[string]string{"name": "has deployment " + d.ID.String() + " in progress"}}
			}
			state, event := models.DaemonStopped, EventDeploymentStopped
			if d.State == models.DaemonPending {
				state, event = models.DaemonCanceled, EventDeploymentCanceled
			}
			if _, err := models.EndDaemonDeployment(ctx, tx, d, state, "environment deleted", now, d.State); err != nil {
				return err
			}
			if err := logEnv(ctx, tx, name, d.ID, d.VersionID, event, actor, map[string]any{"reason": "environment deleted"}); err != nil {
				return err
			}
		}
		if stopping, err = s.stopAll(ctx, tx, env, "environment deleted", actor); err != nil {
			return err
		}
		env.Active, env.DeletedAt = false, &now
		if err := models.UpdateDaemonEnvironment(ctx, tx, env); err != nil {
			return err
		}
		return logEnv(ctx, tx, name, uuid.Nil, uuid.Nil, EventEnvironmentDeleted, actor, nil)
	})
	if err != nil {
		return err
	}
	s.dispatch(ctx, nil, stopping)
	return nil
}

// stopAll moves every live task of env to stopping.
func (s *Service) stopAll(ctx context.Context, tx jobs.Tx, env *models.DaemonEnvironment, reason, actor string) ([]models.DaemonTask, error) {
	live, err := models.LiveDaemonTasks(ctx, tx, env.ID)
	if err != nil {
		return nil, err
	}
	var ids []uuid.UUID
	var stopping []models.DaemonTask
	for i := range live {
		t := &live[i]
		if t.State == "stopping" {
			continue
		}
		ids = append(ids, t.ID)
		stopping = append(stopping, *t)
		if err := logTask(ctx, tx, env.Name, t, EventTaskStopping, actor, map[string]any{"reason": reason}); err != nil {
			return nil, err
		}
	}
	return stopping, models.StopDaemonTasks(ctx, tx, ids, reason, s.now())
}

// dispatch hands committed starts and stops to the backends; a failure is
// logged and retried by the next step, reconcile or refresh, which dispatch
// what is still launching or stopping. Each backend skips the tasks of
// other backends' instances. Tasks a backend reports it cannot start
// (StartFailures) end failed with its reason.
func (s *Service) dispatch(ctx context.Context, start, stop []models.DaemonTask) {
	if len(start)+len(stop) == 0 {
		return
	}
	backends := []Backend{}
	if s.Backend != nil {
		backends = append(backends, s.Backend)
	}
	for _, name := range slices.Sorted(maps.Keys(s.ClusterBackends)) {
		if b := s.ClusterBackends[name]; !slices.Contains(backends, b) {
			backends = append(backends, b)
		}
	}
	for _, b := range backends {
		err := b.Dispatch(ctx, start, stop)
		var refused *StartFailures
		if errors.As(err, &refused) {
			err = errors.Join(refused.Err, s.failStarts(ctx, refused.Reasons))
		}
		if err != nil && s.Logger != nil {
			s.Logger.Warn("dispatching daemon tasks", "backend", b.Name(), "starts", len(start), "stops", len(stop), "err", err)
		}
	}
}

// failStarts ends tasks the backend refused to start as failed, with its
// reason: the deployment that started them sees a failed task. One
// transaction per task, as an agent's report (it locks the task, then its
// environment).
func (s *Service) failStarts(ctx context.Context, reasons map[uuid.UUID]string) error {
	var errs []error
	for _, id := range slices.SortedFunc(maps.Keys(reasons), func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) }) {
		errs = append(errs, s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
			return s.observeTask(ctx, tx, ObservedTask{ID: id.String(), State: daemonplan.TaskFailed, Reason: reasons[id]})
		}))
	}
	return errors.Join(errs...)
}

// Picture is what an environment's grid shows: the instances its group
// matches (by the deployed version, else the latest) and each one's newest
// task.
type Picture struct {
	Version   *models.DaemonVersion
	Instances []models.DaemonInstance
	Tasks     map[string]models.DaemonTask // by instance ID
	Backoff   map[string]time.Time         // instances whose restart waits, until when
}

// PictureOf builds an environment's picture.
func (s *Service) PictureOf(ctx context.Context, e *Environment) (*Picture, error) {
	db := s.Queue.DB()
	v := e.Latest
	if e.Deployed != nil {
		v = e.Deployed
	}
	p := &Picture{Version: v, Tasks: map[string]models.DaemonTask{}, Backoff: map[string]time.Time{}}
	all, err := models.DaemonClusterInstances(ctx, db, v.Cluster)
	if err != nil {
		return nil, err
	}
	for _, in := range all {
		if daemonplan.Matches(daemonplan.Instance{ID: in.ID, Status: daemonplan.InstanceStatus(in.Status), Attributes: in.Attributes}, v.Attributes) {
			p.Instances = append(p.Instances, in)
		}
	}
	tasks, err := models.LatestDaemonTasks(ctx, db, e.ID)
	if err != nil {
		return nil, err
	}
	// Per instance: the task that runs or launches, else a stopping one,
	// else the newest (tasks come newest first).
	rank := func(state string) int {
		switch state {
		case "launching", "running":
			return 0
		case "stopping":
			return 1
		}
		return 2
	}
	for _, t := range tasks {
		if cur, ok := p.Tasks[t.InstanceID]; !ok || rank(t.State) < rank(cur.State) {
			p.Tasks[t.InstanceID] = t
		}
	}
	crashes, err := models.DaemonCrashLoops(ctx, db, e.ID)
	if err != nil {
		return nil, err
	}
	for _, c := range crashes {
		if until := c.LastExitAt.Add(s.Backoff.Delay(c.Failures)); until.After(s.now()) {
			p.Backoff[c.InstanceID] = until
		}
	}
	return p, nil
}
