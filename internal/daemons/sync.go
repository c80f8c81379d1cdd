package daemons

import (
	"context"
	"errors"
	"fmt"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/models"
)

// The daemons section of gantry.yaml: environments an operator commits.
// The file wins for the environments it declares: a sync stores a new
// version (source file, actor gantry:config) when the file says something
// else than the latest version, and the API refuses to change their
// definition (409). Deployments, stops and rollbacks are not in the file:
// they work the same for every environment. An environment that leaves the
// file is deleted, unless a user's deployment is in progress (then the next
// sync tries again).

// SectionKey is the section's key in gantry.yaml.
const SectionKey = "daemons"

// FileEnvironment is one environment as gantry.yaml declares it.
type FileEnvironment struct {
	Name           string `yaml:"name"`
	TaskDefinition struct {
		Name    string            `yaml:"name"`
		Command []string          `yaml:"command"`
		Env     map[string]string `yaml:"env"`
	} `yaml:"task_definition"`
	InstanceGroup struct {
		Cluster    string   `yaml:"cluster"`
		Attributes []string `yaml:"attributes"`
	} `yaml:"instance_group"`
	Role              string `yaml:"role"`
	MinHealthyPercent *int   `yaml:"min_healthy_percent"`
	TimeoutSeconds    *int   `yaml:"timeout_seconds"`
}

func (f FileEnvironment) spec() Spec {
	return Spec{
		TaskDefinition: TaskDefinition{Name: f.TaskDefinition.Name, Command: f.TaskDefinition.Command, Env: f.TaskDefinition.Env},
		InstanceGroup:  InstanceGroup{Cluster: f.InstanceGroup.Cluster, Attributes: f.InstanceGroup.Attributes},
		Role:           f.Role, MinHealthyPercent: f.MinHealthyPercent, TimeoutSeconds: f.TimeoutSeconds,
	}
}

// Section reads and checks the daemons section, each problem at its line.
var Section = gantryfile.Section{Key: SectionKey, Read: func(r *gantryfile.SectionReader) any {
	var envs []FileEnvironment
	if !r.Decode(&envs) {
		return nil
	}
	seen := map[string]bool{}
	var check Service
	for i, e := range envs {
		at := fmt.Sprintf("daemons[%d]", i)
		if err := ValidName(e.Name); err != nil {
			r.Problem(at+".name", "must be 1–63 lower-case letters, digits, '-' or '_' (got %q)", e.Name)
		}
		if seen[e.Name] {
			r.Problem(at+".name", "%s is declared twice", e.Name)
		}
		seen[e.Name] = true
		if _, err := check.version(e.spec(), nil); err != nil {
			var ae *apperr.Error
			if errors.As(err, &ae) {
				for field, why := range ae.Fields {
					r.Problem(at+"."+fileKey(field), "%s", why)
				}
			}
		}
	}
	return envs
}}

// fileKey is where an API field lives in the file (the deployment
// configuration's fields sit on the environment itself).
func fileKey(field string) string {
	switch field {
	case "deployment_configuration.min_healthy_percent":
		return "min_healthy_percent"
	case "deployment_configuration.timeout_seconds":
		return "timeout_seconds"
	}
	return field
}

// SyncResult says what a sync changed, by environment name.
type SyncResult struct {
	Created, Updated, Deleted, Kept []string
}

// Sync makes the database match the file's daemons section.
func (s *Service) Sync(ctx context.Context, f *gantryfile.File, actor string) (SyncResult, error) {
	var res SyncResult
	declared := gantryfile.SectionOf[[]FileEnvironment](f, SectionKey)
	inFile := map[string]bool{}
	for _, fe := range declared {
		inFile[fe.Name] = true
		env, err := models.DaemonEnvironmentByName(ctx, s.Queue.DB(), fe.Name)
		if errors.Is(err, models.ErrNotFound) {
			if _, _, err := s.CreateEnvironment(ctx, fe.Name, fe.spec(), sourceFile, actor); err != nil {
				return res, fmt.Errorf("daemons[%s]: %w", fe.Name, err)
			}
			res.Created = append(res.Created, fe.Name)
			continue
		}
		if err != nil {
			return res, err
		}
		latest, err := models.LatestDaemonVersion(ctx, s.Queue.DB(), env.ID)
		if err != nil {
			return res, err
		}
		if env.Source == sourceFile && s.SameDefinition(fe.spec(), latest) {
			continue
		}
		if _, err := s.updateEnvironment(ctx, fe.Name, fe.spec(), sourceFile, actor, true); err != nil {
			return res, fmt.Errorf("daemons[%s]: %w", fe.Name, err)
		}
		res.Updated = append(res.Updated, fe.Name)
	}
	envs, err := models.DaemonEnvironments(ctx, s.Queue.DB())
	if err != nil {
		return res, err
	}
	for _, e := range envs {
		if e.Source != sourceFile || inFile[e.Name] {
			continue
		}
		err := s.DeleteEnvironment(ctx, e.Name, actor)
		if apperr.CodeOf(err) == apperr.Conflict {
			res.Kept = append(res.Kept, e.Name)
			continue
		}
		if err != nil {
			return res, err
		}
		res.Deleted = append(res.Deleted, e.Name)
	}
	return res, nil
}
