package daemons

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/daemonplan"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// StartDeployment asks for version of the environment to be rolled out: a
// pending user-created deployment, which cancels an earlier pending
// user-created one and starts when no other deployment of the environment
// is in progress.
func (s *Service) StartDeployment(ctx context.Context, name string, versionID uuid.UUID, actor string) (*models.DaemonDeployment, error) {
	return s.startDeployment(ctx, name, actor, false, func(ctx context.Context, tx jobs.Tx, env *models.DaemonEnvironment) (*models.DaemonVersion, error) {
		return s.versionOf(ctx, tx, env, versionID)
	})
}

// RollbackDeployment starts a deployment of version, or when it is nil of
// the version deployed before the current one.
func (s *Service) RollbackDeployment(ctx context.Context, name string, versionID *uuid.UUID, actor string) (*models.DaemonDeployment, error) {
	return s.startDeployment(ctx, name, actor, true, func(ctx context.Context, tx jobs.Tx, env *models.DaemonEnvironment) (*models.DaemonVersion, error) {
		if versionID != nil {
			return s.versionOf(ctx, tx, env, *versionID)
		}
		if env.DeployedVersionID == nil {
			return nil, apperr.New(apperr.Conflict, "Nothing to roll back to: no deployment of %s has started yet.", name)
		}
		ds, err := models.DaemonDeployments(ctx, tx, env.ID, 1000)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			if d.Type == models.DaemonUserCreated && d.StartedAt != nil && d.VersionID != *env.DeployedVersionID {
				return models.DaemonVersionByID(ctx, tx, d.VersionID)
			}
		}
		return nil, apperr.New(apperr.Conflict, "Nothing to roll back to: %s has deployed only its current version; name one with version_id.", name)
	})
}

// versionOf is version id of env: 404 when there is no such version, 400
// when it is another environment's.
func (s *Service) versionOf(ctx context.Context, tx jobs.Tx, env *models.DaemonEnvironment, id uuid.UUID) (*models.DaemonVersion, error) {
	v, err := models.DaemonVersionByID(ctx, tx, id)
	if errors.Is(err, models.ErrNotFound) {
		return nil, apperr.New(apperr.NotFound, "No daemon environment version %s.", id)
	}
	if err != nil {
		return nil, err
	}
	if v.EnvironmentID != env.ID {
		other, err := models.LockDaemonEnvironmentByID(ctx, tx, v.EnvironmentID)
		if err != nil {
			return nil, err
		}
		return nil, apperr.Field("version_id", fmt.Sprintf("is a version of environment %s, not of %s", other.Name, env.Name))
	}
	return v, nil
}

func (s *Service) startDeployment(ctx context.Context, name, actor string, rollback bool,
	pick func(context.Context, jobs.Tx, *models.DaemonEnvironment) (*models.DaemonVersion, error)) (*models.DaemonDeployment, error) {
	var d *models.DaemonDeployment
	err := s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		env, err := s.lockEnv(ctx, tx, name)
		if err != nil {
			return err
		}
		v, err := pick(ctx, tx, env)
		if err != nil {
			return err
		}
		open, err := models.OpenDaemonDeployments(ctx, tx, env.ID)
		if err != nil {
			return err
		}
		now := s.now()
		for i := range open {
			o := &open[i]
			if o.State != models.DaemonPending || o.Type != models.DaemonUserCreated {
				continue
			}
			if _, err := models.EndDaemonDeployment(ctx, tx, o, models.DaemonCanceled, "replaced by a newer deployment", now, models.DaemonPending); err != nil {
				return err
			}
			if err := logEnv(ctx, tx, name, o.ID, o.VersionID, EventDeploymentCanceled, actor, map[string]any{"reason": "replaced by a newer deployment"}); err != nil {
				return err
			}
		}
		d = &models.DaemonDeployment{ID: uuid.New(), EnvironmentID: env.ID, VersionID: v.ID, Type: models.DaemonUserCreated,
			State: models.DaemonPending, CreatedBy: actor}
		if err := models.InsertDaemonDeployment(ctx, tx, d); err != nil {
			return err
		}
		if err := logEnv(ctx, tx, name, d.ID, v.ID, EventDeploymentPending, actor, map[string]any{"version": v.Number, "rollback": rollback}); err != nil {
			return err
		}
		return tx.Enqueue(ctx, jobs.DaemonClaimDeploymentArgs{DeploymentID: d.ID}, nil)
	})
	return d, err
}

// StopDeployment halts the environment's in-progress deployment: its tasks
// stay as they are, and the environment goes inactive so that monitors
// start nothing (new instances get no task) until the next deployment.
func (s *Service) StopDeployment(ctx context.Context, name, actor string) (*models.DaemonDeployment, error) {
	var stopped *models.DaemonDeployment
	err := s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		env, err := s.lockEnv(ctx, tx, name)
		if err != nil {
			return err
		}
		open, err := models.OpenDaemonDeployments(ctx, tx, env.ID)
		if err != nil {
			return err
		}
		for i := range open {
			if open[i].State == models.DaemonInProgress {
				stopped = &open[i]
			}
		}
		if stopped == nil {
			return apperr.New(apperr.Conflict, "No deployment of %s is in progress.", name)
		}
		if _, err := models.EndDaemonDeployment(ctx, tx, stopped, models.DaemonStopped, "stopped by "+actor, s.now(), models.DaemonInProgress); err != nil {
			return err
		}
		env.Active = false
		if err := models.UpdateDaemonEnvironment(ctx, tx, env); err != nil {
			return err
		}
		if err := logEnv(ctx, tx, name, stopped.ID, stopped.VersionID, EventDeploymentStopped, actor, map[string]any{"batches": stopped.Batches}); err != nil {
			return err
		}
		return s.claimNextInTx(ctx, tx, env.ID)
	})
	return stopped, err
}

// ListDeployments lists an environment's deployments, latest first.
func (s *Service) ListDeployments(ctx context.Context, name string, limit int) ([]models.DaemonDeployment, error) {
	env, err := s.GetEnvironment(ctx, name)
	if err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	return models.DaemonDeployments(ctx, s.Queue.DB(), env.ID, limit)
}

// Deployment is a deployment with its version and tasks.
type Deployment struct {
	models.DaemonDeployment
	Environment string
	Version     *models.DaemonVersion
	Tasks       []models.DaemonTask
}

// GetDeployment is one deployment of the environment.
func (s *Service) GetDeployment(ctx context.Context, name string, id uuid.UUID) (*Deployment, error) {
	env, err := s.GetEnvironment(ctx, name)
	if err != nil {
		return nil, err
	}
	db := s.Queue.DB()
	d, err := models.DaemonDeploymentByID(ctx, db, id)
	if errors.Is(err, models.ErrNotFound) || (err == nil && d.EnvironmentID != env.ID) {
		return nil, apperr.New(apperr.NotFound, "No deployment %s of daemon environment %s.", id, name)
	}
	if err != nil {
		return nil, err
	}
	out := &Deployment{DaemonDeployment: *d, Environment: name}
	if out.Version, err = models.DaemonVersionByID(ctx, db, d.VersionID); err != nil {
		return nil, err
	}
	if out.Tasks, err = models.DeploymentDaemonTasks(ctx, db, d.ID); err != nil {
		return nil, err
	}
	return out, nil
}

// Diff is what a deployment of a version would change now: which matching
// instances get a task, which tasks are replaced, which stop, and which
// stay.
type Diff struct {
	Version    *models.DaemonVersion
	Instances  int               // matching instances
	Start      []string          // instance IDs
	Replace    []DiffReplacement // every task of another version, in or past the first batch
	Stop       []DiffStop
	Unchanged  []string // instance IDs already on the version
	FirstBatch int      // how many replacements the first batch makes
}

// DiffReplacement is a task to be replaced.
type DiffReplacement struct {
	InstanceID string
	TaskID     uuid.UUID
	From       string // the version number it runs ("v3")
}

// DiffStop is a task to be stopped.
type DiffStop struct {
	InstanceID string
	TaskID     uuid.UUID
	Reason     string
}

// DiffDeployment shows the change a deployment of version would make.
func (s *Service) DiffDeployment(ctx context.Context, name string, versionID uuid.UUID) (*Diff, error) {
	var diff *Diff
	err := s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		env, err := models.DaemonEnvironmentByName(ctx, tx, name)
		if errors.Is(err, models.ErrNotFound) {
			return apperr.New(apperr.NotFound, "No daemon environment %s.", name)
		}
		if err != nil {
			return err
		}
		v, err := s.versionOf(ctx, tx, env, versionID)
		if err != nil {
			return err
		}
		snap, err := s.snapshot(ctx, tx, env, v, nil)
		if err != nil {
			return err
		}
		p := daemonplan.Make(snap.input)
		diff = &Diff{Version: v, Instances: p.Matching, Unchanged: p.Leave}
		numbers, err := s.versionNumbers(ctx, tx, env.ID)
		if err != nil {
			return err
		}
		for _, st := range p.Start {
			diff.Start = append(diff.Start, st.InstanceID)
		}
		for _, b := range p.Backoff {
			diff.Start = append(diff.Start, b.InstanceID)
		}
		for _, r := range p.Replace {
			diff.Replace = append(diff.Replace, DiffReplacement{InstanceID: r.InstanceID, TaskID: uuid.MustParse(r.TaskID), From: numbers[r.Version]})
			if r.Running {
				diff.FirstBatch++
			}
		}
		for _, w := range p.Waiting {
			t := snap.tasks[w.TaskID]
			diff.Replace = append(diff.Replace, DiffReplacement{InstanceID: w.InstanceID, TaskID: t.ID, From: numbers[t.VersionID.String()]})
		}
		for _, st := range p.Stop {
			diff.Stop = append(diff.Stop, DiffStop{InstanceID: st.InstanceID, TaskID: uuid.MustParse(st.TaskID), Reason: string(st.Reason)})
		}
		return nil
	})
	return diff, err
}

// versionNumbers names an environment's versions "v1", "v2", … by ID.
func (s *Service) versionNumbers(ctx context.Context, tx jobs.Tx, envID int64) (map[string]string, error) {
	vs, err := models.DaemonVersions(ctx, tx, envID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(vs))
	for _, v := range vs {
		out[v.ID.String()] = fmt.Sprintf("v%d", v.Number)
	}
	return out, nil
}
