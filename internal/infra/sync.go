package infra

import (
	"context"
	"slices"
	"strings"

	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// SyncResult says what a sync changed.
type SyncResult struct {
	Registered []string
	Removed    []string
}

// Sync makes the registered repositories those of f. A removed repository
// keeps its history; deliveries for it are ignored from then on.
func (s *Service) Sync(ctx context.Context, f *gantryfile.File, actor string) (SyncResult, error) {
	var res SyncResult
	err := s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		res = SyncResult{}
		if err := models.LockConfigSync(ctx, tx); err != nil {
			return err
		}
		before, err := models.ListRepositories(ctx, tx)
		if err != nil {
			return err
		}
		keep := make([]string, 0, len(f.Repositories))
		for _, r := range f.Repositories {
			row := repositoryRow(r)
			if err := models.UpsertRepository(ctx, tx, row); err != nil {
				return err
			}
			keep = append(keep, r.Name)
			if !slices.ContainsFunc(before, func(b models.Repository) bool { return b.Name == r.Name }) {
				res.Registered = append(res.Registered, r.Name)
				if err := models.AppendLog(ctx, tx, &models.LogEntry{TargetID: RepositoryTarget(r.Name), Event: EventRepositoryRegistered, Actor: actor,
					Detail: map[string]any{"url": r.URL, "trunk": r.Trunk, "scan": r.Scan}}); err != nil {
					return err
				}
			}
		}
		removed, err := models.RemoveRepositoriesExcept(ctx, tx, keep)
		if err != nil {
			return err
		}
		for _, name := range removed {
			res.Removed = append(res.Removed, name)
			if err := models.AppendLog(ctx, tx, &models.LogEntry{TargetID: RepositoryTarget(name), Event: EventRepositoryRemoved, Actor: actor}); err != nil {
				return err
			}
		}
		return nil
	})
	return res, err
}

func repositoryRow(r gantryfile.Repository) *models.Repository {
	row := &models.Repository{
		Name: r.Name, URL: r.URL, Trunk: r.Trunk, Scan: r.Scan,
		WebhookSecretEnv: r.WebhookSecretEnv, StatusTokenEnv: r.StatusTokenEnv,
		InitCommand: nonNil(r.Commands.Init), PlanCommand: nonNil(r.Commands.Plan),
		ApplyCommand: nonNil(r.Commands.Apply), DestroyCommand: nonNil(r.Commands.Destroy),
		PlanStatuses: r.StatusEnabled("plan"), MergeLockStatuses: r.StatusEnabled("merge_lock"), PlanForks: r.PlanForks,
		PlanComments: r.PlanCommentsEnabled(), ECS: r.ECS,
	}
	if r.Drift != nil {
		row.DriftEverySeconds, row.DriftNotify = int(r.Drift.Every.Seconds()), lowerAll(r.Drift.Notify)
	}
	row.DriftNotify = nonNil(row.DriftNotify)
	for _, a := range r.Accounts {
		row.Accounts = append(row.Accounts, models.Account{
			Name: a.Name, Path: a.Path, DependsOn: nonNil(a.DependsOn), PlanRole: a.PlanRole, ApplyRole: a.ApplyRole,
			Voters: lowerAll(a.Voters), MinApprovals: a.MinApprovals, MinRejections: a.MinRejections,
		})
	}
	return row
}

// lowerAll lower-cases email addresses, as votes and sign-ins compare them.
func lowerAll(emails []string) []string {
	out := make([]string, len(emails))
	for i, e := range emails {
		out[i] = strings.ToLower(strings.TrimSpace(e))
	}
	return out
}
