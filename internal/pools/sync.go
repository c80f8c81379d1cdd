package pools

import (
	"context"
	"fmt"

	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// SyncResult says what a sync changed.
type SyncResult struct {
	Registered    []string
	Deregistering []string
	Deregistered  []string
}

// Sync makes the registered clients, pools and environments those of f.
// Environments removed from f leave at once when nothing holds them, and
// after their allocation ends otherwise.
func (s *Service) Sync(ctx context.Context, f *gantryfile.File, actor string) (SyncResult, error) {
	var res SyncResult
	poolRows := make(map[string]*models.Pool, len(f.Pools))
	for _, p := range f.Pools {
		row := &models.Pool{
			Name: p.Name, Kind: p.Kind,
			SessionSeconds: int(p.Session.Seconds()), MaxSessionSeconds: int(p.MaxSession.Seconds()), CleanupTimeoutSeconds: int(p.CleanupTimeout.Seconds()),
			Clients: nonNil(p.Clients), CleanupCommand: nonNil(p.Cleanup), NotifyEmails: nonNil(p.Notify.Emails), NotifyWebhook: p.Notify.Webhook,
		}
		if p.Postgres != nil {
			row.PostgresAdminURLEnv, row.PostgresTemplate = p.Postgres.AdminURLEnv, p.Postgres.Template
		}
		poolRows[p.Name] = row
	}
	envRows := make([]*models.Environment, 0, len(f.Environments))
	for _, e := range f.Environments {
		pool := poolRows[e.Pool]
		envRows = append(envRows, &models.Environment{
			Key: e.Key(pool.Kind), Pool: e.Pool, Kind: pool.Kind, Account: e.Account, Region: e.Region,
			AdminRole: e.AdminRole, Database: e.Database, SlotName: e.Name, Capabilities: e.StringCapabilities(),
		})
	}
	// Prepare new environments (create their databases) before recording
	// them, so a registered environment is always leasable.
	for _, e := range envRows {
		k, err := s.kind(e.Kind)
		if err != nil {
			return res, err
		}
		if err := k.Register(ctx, poolRows[e.Pool], e); err != nil {
			return res, fmt.Errorf("registering %s: %w", e.Key, err)
		}
	}
	err := s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		if err := models.LockConfigSync(ctx, tx); err != nil {
			return err
		}
		clients := make([]models.Client, len(f.Clients))
		for i, c := range f.Clients {
			clients[i] = models.Client{Name: c.Name, Users: nonNil(c.Users), AWSAccounts: nonNil(c.AWSAccounts), Rate: c.Rate}
		}
		if err := models.ReplaceClients(ctx, tx, clients); err != nil {
			return err
		}
		keepPools := make([]string, 0, len(poolRows))
		for name, p := range poolRows {
			if err := models.UpsertPool(ctx, tx, p); err != nil {
				return err
			}
			keepPools = append(keepPools, name)
		}
		before, err := models.ListEnvironments(ctx, tx, models.EnvironmentFilter{WithDeregistered: true})
		if err != nil {
			return err
		}
		registered := map[string]bool{}
		for _, b := range before {
			registered[b.Key] = b.Status != models.EnvDeregistered && b.DeregisterRequestedAt == nil
		}
		keep := make([]string, 0, len(envRows))
		for _, e := range envRows {
			isNew := !registered[e.Key]
			if err := models.UpsertEnvironment(ctx, tx, e); err != nil {
				return err
			}
			keep = append(keep, e.Key)
			if isNew {
				res.Registered = append(res.Registered, e.Key)
				if err := s.log(ctx, tx, e, EventRegistered, actor, map[string]any{"pool": e.Pool}); err != nil {
					return err
				}
			}
		}
		touched, err := models.DeregisterExcept(ctx, tx, keep)
		if err != nil {
			return err
		}
		for i := range touched {
			e := &touched[i]
			event := EventDeregistering
			if e.Status == models.EnvDeregistered {
				event = EventDeregistered
				res.Deregistered = append(res.Deregistered, e.Key)
			} else {
				res.Deregistering = append(res.Deregistering, e.Key)
			}
			if err := s.log(ctx, tx, e, event, actor, map[string]any{"pool": e.Pool, "status": e.Status}); err != nil {
				return err
			}
		}
		_, err = models.RemovePoolsExcept(ctx, tx, keepPools)
		return err
	})
	return res, err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
