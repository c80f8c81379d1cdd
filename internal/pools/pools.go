// Package pools is the environment pools area (seed 001): registering pools
// and environments from gantry.yaml, leasing them to tests with temporary
// credentials, taking them back, cleaning them, and handing dirty ones to a
// human. Web handlers and job workers call it; the matching itself is the
// pure engine in internal/allocation, and the per-kind work (credentials,
// cleanup) is behind Kind.
package pools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"golang.org/x/sync/semaphore"

	"github.com/gantryhq/gantry/internal/allocation"
	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// Log events of this area.
const (
	EventRegistered        = "environment-registered"
	EventDeregistering     = "environment-deregistering"
	EventDeregistered      = "environment-deregistered"
	EventAllocated         = "environment-allocated"
	EventExtended          = "allocation-extended"
	EventReleased          = "environment-released"
	EventCleaned           = "environment-cleaned"
	EventCleanupFailed     = "environment-cleanup-failed"
	EventCleanupTimedOut   = "environment-cleanup-timed-out"
	EventCleanupRetried    = "environment-cleanup-retried"
	EventMarkedClean       = "environment-marked-clean"
	EventDirtyNotification = "environment-dirty-notified"
)

// Service is the environment pools area.
type Service struct {
	Queue  *jobs.Queue
	Kinds  map[string]Kind
	Logger *slog.Logger
	Notify Notifier
	// Retention is how long allocation history is kept.
	Retention time.Duration
	Metrics   *Metrics // nil: not measured
	// Admission bounds the lease transactions (allocate, release, extend)
	// running at once; the rest wait their turn in arrival order. A burst of
	// CI requests then holds a few database connections, not all of them
	// (pages and jobs keep theirs), and PostgreSQL works on a few
	// transactions at a time instead of switching between dozens, which
	// keeps the slowest answers near the typical ones. nil: no bound.
	Admission *semaphore.Weighted
}

// admissionReserve is the time a turn must leave for the transaction itself
// before the caller's deadline (or half the time left, if that is shorter): a
// turn that came with milliseconds to spare would revoke credentials and
// then fail to commit, or commit a lease whose answer never arrives.
const admissionReserve = 5 * time.Second

// admit waits for a turn to run a lease transaction; done ends the turn.
func (s *Service) admit(ctx context.Context) (done func(), err error) {
	if s.Admission == nil {
		return func() {}, nil
	}
	wait := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		wait, cancel = context.WithDeadline(ctx, deadline.Add(-min(admissionReserve, time.Until(deadline)/2)))
		defer cancel()
	}
	start := time.Now()
	err = s.Admission.Acquire(wait, 1)
	s.Metrics.admitted(time.Since(start))
	if err != nil {
		if ctx.Err() != nil { // the caller gave up (the client went away, the job is stopping)
			return nil, ctx.Err()
		}
		return nil, apperr.New(apperr.Unavailable, "Too many allocation requests are waiting; try again.")
	}
	return func() { s.Admission.Release(1) }, nil
}

// Target is the log target of an environment.
func Target(e *models.Environment) string { return "environment:" + e.Key }

func (s *Service) kind(name string) (Kind, error) {
	k, ok := s.Kinds[name]
	if !ok {
		return nil, fmt.Errorf("no support for %s environments in this process", name)
	}
	return k, nil
}

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
		return nil, fieldErrors(err)
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
		return fieldErrors(err)
	}
	return unavailable(pool)
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

func unavailable(pool *models.Pool) error {
	return apperr.New(apperr.Locked, "Pool %s has no matching environment free now; retry later.", pool.Name)
}

// Release ends an allocation: its credentials stop working at once, the
// environment starts cleaning. Releasing an ended allocation is harmless;
// ended says whether this call ended it. A non-empty client may release only
// its own allocations; others read as not found.
func (s *Service) Release(ctx context.Context, id uuid.UUID, client, by, outcome, actor string) (a *models.Allocation, ended bool, err error) {
	if len(outcome) > 1024 {
		return nil, false, apperr.Field("outcome", "must be at most 1024 characters")
	}
	done, err := s.admit(ctx)
	if err != nil {
		return nil, false, err
	}
	defer done()
	err = s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		ended = false
		var pool *models.Pool
		a, pool, err = models.EndActiveAllocation(ctx, tx, id, client, by, outcome)
		if errors.Is(err, models.ErrNotFound) {
			// Not active, or not this client's: an ended allocation is
			// released again harmlessly, others are not found.
			a, err = models.AllocationByID(ctx, tx, id)
			if err != nil || (client != "" && a.Client != client) {
				return notFound(models.ErrNotFound, id)
			}
			if a.Active() {
				return fmt.Errorf("releasing allocation %s: its pool %s is not registered", id, a.Pool)
			}
			return nil
		}
		if err != nil {
			return err
		}
		env := a.Environment
		kind, err := s.kind(pool.Kind)
		if err != nil {
			return err
		}
		// Revoked before the transaction commits: a 200 means the
		// credentials no longer work.
		if err := kind.Revoke(ctx, pool, env, a.CredentialRef, time.Now()); err != nil {
			return fmt.Errorf("revoking credentials of %s: %w", env.Name(), err)
		}
		released := logEntry(env, EventReleased, actor, map[string]any{
			"allocation": a.ID.String(), "ended_by": by, "outcome": outcome, "requester": a.Requester,
		})
		ended = true
		if !kind.NeedsCleanup(pool) {
			return s.returnEnvironment(ctx, tx, env, released)
		}
		if err := s.startCleanup(ctx, tx, pool, env, a.ID); err != nil {
			return err
		}
		return models.AppendLog(ctx, tx, released)
	})
	if err != nil {
		return nil, false, err
	}
	return a, ended, nil
}

// returnEnvironment makes an environment that needs no cleaning available
// again (or deregistered) and logs its release, in the releasing
// transaction.
func (s *Service) returnEnvironment(ctx context.Context, tx jobs.Tx, env *models.Environment, released *models.LogEntry) error {
	status, err := models.ReturnEnvironment(ctx, tx, env.ID, []*models.LogEntry{released})
	if err != nil || status != models.EnvDeregistered {
		return err
	}
	env.Status = status
	return s.log(ctx, tx, env, EventDeregistered, "gantry:release", nil)
}

// startCleanup marks env cleaning under cleanupID and schedules the cleanup
// and its timeout, in the caller's transaction.
func (s *Service) startCleanup(ctx context.Context, tx jobs.Tx, pool *models.Pool, env *models.Environment, cleanupID uuid.UUID) error {
	if err := models.StartCleaning(ctx, tx, env.ID, cleanupID); err != nil {
		return err
	}
	if err := tx.Enqueue(ctx, jobs.CleanupEnvironmentArgs{EnvironmentID: env.ID, CleanupID: cleanupID}, nil); err != nil {
		return err
	}
	return tx.Enqueue(ctx, jobs.CleanupTimeoutArgs{EnvironmentID: env.ID, CleanupID: cleanupID},
		&river.InsertOpts{ScheduledAt: time.Now().Add(pool.CleanupTimeout())})
}

// Extend moves an active allocation's expiry to until, at most the pool's
// max_session after it started. It returns new credentials when the kind
// issues new ones.
func (s *Service) Extend(ctx context.Context, id uuid.UUID, until time.Time, client, actor string) (*models.Allocation, *Credentials, error) {
	done, err := s.admit(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	var creds *Credentials
	err = s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		a, err := models.LockAllocation(ctx, tx, id)
		if err != nil {
			return notFound(err, id)
		}
		if client != "" && a.Client != client {
			return notFound(models.ErrNotFound, id)
		}
		if !a.Active() {
			return apperr.New(apperr.Conflict, "Allocation %s has ended.", id)
		}
		pool, err := models.PoolByNameAny(ctx, tx, a.Pool)
		if err != nil {
			return err
		}
		limit := a.StartedAt.Add(pool.MaxSession())
		if until.After(limit) {
			return apperr.Field("duration", fmt.Sprintf("the pool allows at most %s per allocation: until %s", pool.MaxSession(), limit.UTC().Format(time.RFC3339)))
		}
		if !until.After(a.ExpiresAt) {
			return apperr.Field("duration", "must move the expiry later than "+a.ExpiresAt.UTC().Format(time.RFC3339))
		}
		env, err := models.EnvironmentByID(ctx, tx, a.EnvironmentID)
		if err != nil {
			return err
		}
		kind, err := s.kind(pool.Kind)
		if err != nil {
			return err
		}
		newCreds, ref, err := kind.Extend(ctx, pool, env, a.CredentialRef, a.ID.String(), until)
		if err != nil {
			return fmt.Errorf("extending credentials of %s: %w", env.Name(), err)
		}
		creds = newCreds
		if ref != a.CredentialRef {
			if err := models.SetCredentialRef(ctx, tx, id, ref); err != nil {
				return err
			}
		}
		if err := models.ExtendAllocation(ctx, tx, id, until); err != nil {
			return err
		}
		return s.log(ctx, tx, env, EventExtended, actor, map[string]any{"allocation": id.String(), "expires_at": until})
	})
	if err != nil {
		return nil, nil, err
	}
	a, err := models.AllocationByID(ctx, s.Queue.DB(), id)
	return a, creds, err
}

// Expire is the allocation timeout: it releases the allocation on behalf of
// the test, or says how long to wait when the allocation was extended.
func (s *Service) Expire(ctx context.Context, id uuid.UUID) (time.Duration, error) {
	a, err := models.AllocationByID(ctx, s.Queue.DB(), id)
	if errors.Is(err, models.ErrNotFound) {
		return 0, nil // pruned long ago
	}
	if err != nil || !a.Active() {
		return 0, err
	}
	if wait := time.Until(a.ExpiresAt); wait > 0 {
		return wait, nil
	}
	_, _, err = s.Release(ctx, id, "", models.EndedByTimeout, "timeout", "gantry:allocation-timeout")
	return 0, err
}

// Clean runs the cleanup cleanupID of an environment. It does nothing when
// that cleanup is no longer the current one (it timed out, or an operator
// retried), so a redelivered job cannot undo a later decision.
func (s *Service) Clean(ctx context.Context, envID int64, cleanupID uuid.UUID) error {
	db := s.Queue.DB()
	env, err := models.EnvironmentByID(ctx, db, envID)
	if err != nil {
		return err
	}
	if env.Status != models.EnvCleaning || env.CleanupID == nil || *env.CleanupID != cleanupID {
		return nil
	}
	pool, err := models.PoolByNameAny(ctx, db, env.Pool)
	if err != nil {
		return err
	}
	kind, err := s.kind(pool.Kind)
	if err != nil {
		return err
	}
	out := func(text string) {
		if err := models.AppendCleanupOutput(context.WithoutCancel(ctx), db, envID, cleanupID, text); err != nil {
			s.Logger.Warn("recording cleanup output", "environment", env.Key, "error", err)
		}
	}
	started := time.Now()
	cleanErr := kind.Clean(ctx, pool, env, out)
	if errors.Is(cleanErr, context.Canceled) && ctx.Err() != nil {
		return ctx.Err() // the worker is stopping: River retries the job
	}
	if cleanErr != nil {
		out("cleanup failed: " + cleanErr.Error() + "\n")
	}
	return s.Queue.InTx(context.WithoutCancel(ctx), func(ctx context.Context, tx jobs.Tx) error {
		after, current, err := models.FinishCleaning(ctx, tx, envID, cleanupID, cleanErr == nil)
		if err != nil || !current {
			return err
		}
		s.Metrics.cleanup(pool.Name, cleanErr == nil, time.Since(started))
		if cleanErr == nil {
			event := EventCleaned
			if after.Status == models.EnvDeregistered {
				event = EventDeregistered
			}
			return s.log(ctx, tx, after, event, "gantry:cleanup", nil)
		}
		if err := s.log(ctx, tx, after, EventCleanupFailed, "gantry:cleanup", map[string]any{"error": cleanErr.Error()}); err != nil {
			return err
		}
		return tx.Enqueue(ctx, jobs.NotifyDirtyArgs{EnvironmentID: envID, CleanupID: cleanupID, Reason: "cleanup failed: " + cleanErr.Error()}, nil)
	})
}

// CleanupTimedOut marks an environment dirty when its cleanup cleanupID is
// still running at the pool's cleanup timeout.
func (s *Service) CleanupTimedOut(ctx context.Context, envID int64, cleanupID uuid.UUID) error {
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		after, current, err := models.FinishCleaning(ctx, tx, envID, cleanupID, false)
		if err != nil || !current {
			return err
		}
		if err := s.log(ctx, tx, after, EventCleanupTimedOut, "gantry:cleanup-timeout", nil); err != nil {
			return err
		}
		return tx.Enqueue(ctx, jobs.NotifyDirtyArgs{EnvironmentID: envID, CleanupID: cleanupID, Reason: "cleanup did not finish in time"}, nil)
	})
}

// RetryCleanup is the operator's "clean this dirty environment again".
func (s *Service) RetryCleanup(ctx context.Context, envID int64, actor string) error {
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		env, err := models.LockEnvironment(ctx, tx, envID)
		if err != nil {
			return apperr.New(apperr.NotFound, "No environment with id %d.", envID)
		}
		if env.Status != models.EnvDirty {
			return apperr.New(apperr.Conflict, "Environment %s is %s, not dirty.", env.Name(), env.Status)
		}
		pool, err := models.PoolByNameAny(ctx, tx, env.Pool)
		if err != nil {
			return err
		}
		if err := s.startCleanup(ctx, tx, pool, env, uuid.New()); err != nil {
			return err
		}
		return s.log(ctx, tx, env, EventCleanupRetried, actor, nil)
	})
}

// MarkClean is the operator's "this dirty environment is fine as it is".
func (s *Service) MarkClean(ctx context.Context, envID int64, actor string) error {
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		env, err := models.MarkClean(ctx, tx, envID)
		if errors.Is(err, models.ErrNotFound) {
			return apperr.New(apperr.Conflict, "Environment %d is not dirty.", envID)
		}
		if err != nil {
			return err
		}
		return s.log(ctx, tx, env, EventMarkedClean, actor, map[string]any{"status": env.Status})
	})
}

// PruneHistory deletes allocation history older than the retention.
func (s *Service) PruneHistory(ctx context.Context) (int64, error) {
	return models.PruneAllocations(ctx, s.Queue.DB(), time.Now().Add(-s.Retention))
}

func (s *Service) log(ctx context.Context, tx jobs.Tx, env *models.Environment, event, actor string, detail map[string]any) error {
	return models.AppendLog(ctx, tx, logEntry(env, event, actor, detail))
}

func logEntry(env *models.Environment, event, actor string, detail map[string]any) *models.LogEntry {
	return &models.LogEntry{TargetID: Target(env), Event: event, Actor: actor, Detail: detail}
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

// fieldErrors turns the engine's errors into the API's.
func fieldErrors(err error) error {
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

func notFound(err error, id uuid.UUID) error {
	if errors.Is(err, models.ErrNotFound) {
		return apperr.New(apperr.NotFound, "No allocation %s.", id)
	}
	return err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Notifier tells people about an environment that needs them.
type Notifier interface {
	DirtyEnvironment(ctx context.Context, pool *models.Pool, env *models.Environment, reason string) error
}

// NotifyDirty sends the dirty-environment notification of cleanup cleanupID,
// unless the environment was dealt with meanwhile.
func (s *Service) NotifyDirty(ctx context.Context, envID int64, cleanupID uuid.UUID, reason string) error {
	db := s.Queue.DB()
	env, err := models.EnvironmentByID(ctx, db, envID)
	if err != nil {
		return err
	}
	if env.Status != models.EnvDirty || env.CleanupID == nil || *env.CleanupID != cleanupID {
		return nil
	}
	pool, err := models.PoolByNameAny(ctx, db, env.Pool)
	if err != nil {
		return err
	}
	if s.Notify != nil {
		if err := s.Notify.DirtyEnvironment(ctx, pool, env, reason); err != nil {
			return err
		}
	}
	return models.AppendLog(ctx, db, &models.LogEntry{TargetID: Target(env), Event: EventDirtyNotification, Actor: "gantry:notify",
		Detail: map[string]any{"reason": reason, "emails": strings.Join(pool.NotifyEmails, ","), "webhook": pool.NotifyWebhook != ""}})
}
