package pools

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/gantryhq/gantry/internal/allocation"
	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// Lease is one environment handed to a test.
type Lease struct {
	Allocation  *models.Allocation
	Environment *models.Environment
	Credentials Credentials
}

// Allocate leases one environment per requirement, all or nothing.
//
// It locks the leasable environments that match, in preference order
// (released longest ago first), with FOR UPDATE SKIP LOCKED, so concurrent
// requests take different rows instead of queueing on the same one. It locks
// a few more than it needs, lets the matching engine choose among them, and
// widens the window when those few cannot serve the request. Only when the
// request fails does it read the whole pool, to tell 423 (wait) from 400
// (never).
func (s *Service) Allocate(ctx context.Context, req allocation.Request, client, actor string) ([]Lease, error) {
	if err := req.Validate(); err != nil {
		return nil, engineError(err)
	}
	done, err := s.admit(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	wanted := req.Wanted()
	window := len(wanted)
	for {
		leases, exhausted, err := s.claim(ctx, req.Pool, wanted, window, req.Requester, client, actor)
		if err != nil || leases != nil {
			return leases, err
		}
		if exhausted {
			return nil, s.whyNot(ctx, req.Pool, client, wanted)
		}
		window *= 2
	}
}

// whyNot explains a request that cannot be served: 400 for an unknown pool,
// 403 for a client the pool does not serve, 400 when the pool could not
// serve it even with every environment free, 423 otherwise.
func (s *Service) whyNot(ctx context.Context, name, client string, wanted []allocation.Requirement) error {
	db := s.Queue.DB()
	pool, err := models.PoolByName(ctx, db, name)
	if errors.Is(err, models.ErrNotFound) {
		return apperr.Field("pool", fmt.Sprintf("no pool named %q is registered", name))
	}
	if err != nil {
		return err
	}
	if !pool.AllowsClient(client) {
		return forbidden(pool, client)
	}
	registered, err := models.ListEnvironments(ctx, db, models.EnvironmentFilter{Pool: pool.Name})
	if err != nil {
		return err
	}
	if err := allocation.Classify(engineEnvironments(registered), wanted); err != nil {
		return engineError(err)
	}
	return noneFreeNow(pool)
}

func forbidden(pool *models.Pool, client string) error {
	return apperr.New(apperr.Forbidden, "Client %s may not lease from pool %s.", client, pool.Name)
}

// claim locks up to window matching environments and, when they can serve
// the request, records the allocations, obtains credentials, schedules the
// timeouts and commits. It returns no leases and exhausted when fewer than
// window environments were leasable (widening cannot help), and no leases
// and !exhausted when a wider window might.
func (s *Service) claim(ctx context.Context, poolName string, wanted []allocation.Requirement, window int, requester, client, actor string) (leases []Lease, exhausted bool, err error) {
	reqCaps := make([]map[string]string, len(wanted))
	for i, r := range wanted {
		reqCaps[i] = r.Capabilities
	}
	var pool *models.Pool
	var kind Kind
	err = s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		leases = nil
		var locked []models.Environment
		var err error
		pool, locked, err = models.LockLeasable(ctx, tx, poolName, reqCaps, window)
		if err != nil {
			return err
		}
		if pool == nil { // nothing leasable, or no such pool: whyNot tells
			exhausted = true
			return errNotEnough
		}
		if !pool.AllowsClient(client) {
			return forbidden(pool, client)
		}
		if kind, err = s.kind(pool.Kind); err != nil {
			return err
		}
		exhausted = len(locked) < window
		picks, err := allocation.Match(engineEnvironments(locked), nil, wanted)
		if err != nil {
			return errNotEnough
		}
		byID := make(map[int64]*models.Environment, len(locked))
		for i := range locked {
			byID[locked[i].ID] = &locked[i]
		}
		// To the microsecond, as PostgreSQL keeps it: the answer shows the
		// expiry that a later read of the allocation shows.
		expires := time.Now().Add(pool.Session()).Truncate(time.Microsecond)
		requestID := uuid.New()
		allocs := make([]*models.Allocation, len(picks))
		entries := make([]*models.LogEntry, len(picks))
		timeouts := make([]river.InsertManyParams, len(picks))
		for i, id := range picks {
			a := &models.Allocation{ID: uuid.New(), RequestID: requestID, EnvironmentID: id, Pool: pool.Name,
				Requester: requester, Client: client, Capabilities: byID[id].Capabilities, ExpiresAt: expires}
			allocs[i] = a
			entries[i] = logEntry(byID[id], EventAllocated, actor, map[string]any{
				"allocation": a.ID.String(), "requester": requester, "client": client, "expires_at": a.ExpiresAt,
			})
			timeouts[i] = river.InsertManyParams{Args: jobs.AllocationTimeoutArgs{AllocationID: a.ID}, InsertOpts: &river.InsertOpts{ScheduledAt: a.ExpiresAt}}
		}
		// One statement records the allocations, marks the environments in
		// use and writes the log; one more schedules every timeout.
		if err := models.RecordAllocations(ctx, tx, allocs, entries); err != nil {
			return err
		}
		for _, id := range picks {
			byID[id].Status = models.EnvInUse
		}
		if err := tx.EnqueueMany(ctx, timeouts); err != nil {
			return err
		}
		// Credentials last, just before commit: when anything above fails
		// none were issued, and when a grant fails the ones before it are
		// revoked (below) and the environments stay available.
		for _, a := range allocs {
			env := byID[a.EnvironmentID]
			creds, ref, err := kind.Grant(ctx, pool, env, a.ID.String(), a.ExpiresAt)
			if err != nil {
				return fmt.Errorf("issuing credentials for %s: %w", env.Name(), err)
			}
			a.CredentialRef = ref
			leases = append(leases, Lease{Allocation: a, Environment: env, Credentials: creds})
			if ref == "" {
				continue
			}
			if err := models.SetCredentialRef(ctx, tx, a.ID, ref); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errNotEnough) {
		return nil, exhausted, nil
	}
	if err != nil && len(leases) > 0 {
		// A later grant, or the commit, failed after credentials were
		// issued.
		s.revokeLeases(pool, kind, leases)
	}
	if err != nil {
		return nil, false, err
	}
	return leases, false, nil
}

var errNotEnough = errors.New("the locked environments cannot serve the request")

func (s *Service) revokeLeases(pool *models.Pool, kind Kind, leases []Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, l := range leases {
		if err := kind.Revoke(ctx, pool, l.Environment, l.Allocation.CredentialRef, time.Now()); err != nil {
			s.Logger.Error("revoking credentials of a failed allocation", "environment", l.Environment.Key, "error", err)
		}
	}
}

func noneFreeNow(pool *models.Pool) error {
	return apperr.New(apperr.Locked, "Pool %s has no matching environment free now; retry later.", pool.Name)
}

func engineEnvironments(envs []models.Environment) []allocation.Environment {
	out := make([]allocation.Environment, len(envs))
	for i, e := range envs {
		out[i] = allocation.Environment{ID: e.ID, Pool: e.Pool, Capabilities: e.Capabilities, Status: allocation.Status(e.Status)}
		if e.Deregistering() {
			out[i].Status = allocation.StatusDeregistering
		}
		if e.LastReleasedAt != nil {
			out[i].LastReleasedAt = *e.LastReleasedAt
		}
	}
	return out
}

// engineError turns the matching engine's errors into app errors.
func engineError(err error) error {
	var fes allocation.FieldErrors
	var never *allocation.NeverSatisfiableError
	switch {
	case errors.As(err, &fes):
		bad := apperr.Fields{}
		for _, fe := range fes {
			bad.Add(fe.Field, fe.Reason)
		}
		return bad.Err()
	case errors.As(err, &never):
		return apperr.Field(never.Field, never.Reason)
	case errors.Is(err, allocation.ErrUnsatisfiableNow):
		return apperr.New(apperr.Locked, "No matching environment is free now; retry later.")
	}
	return err
}
