// Package pools is the environment pools area (seed 001): registering pools
// and environments from gantry.yaml, leasing them to tests with temporary
// credentials, taking them back, cleaning them, and handing dirty ones to a
// human. Web handlers and job workers call it; the matching itself is the
// pure engine in internal/allocation, and the per-kind work (credentials,
// cleanup) is behind Kind.
//
// One file per step: sync.go (gantry.yaml into the database), allocate.go,
// extend.go, release.go (and the allocation timeout), cleanup.go, dirty.go
// (the operator's retry and mark-clean), notify.go, history.go; admission.go
// bounds the lease transactions, kinds.go holds the kinds.
package pools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/semaphore"

	"github.com/gantryhq/gantry/internal/apperr"
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
	EventCleanupRequeued   = "environment-cleanup-requeued"
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
	// HeartbeatInterval is how often a running cleanup says it is alive
	// (GANTRY_HEARTBEAT_INTERVAL); HandOnDeadCleanups takes one quiet for
	// jobs.QuietAfter of it for dead. Zero: 10 s.
	HeartbeatInterval time.Duration
}

// Target is the log target of an environment.
func Target(e *models.Environment) string { return models.EnvironmentTarget(e.Key) }

func (s *Service) kind(name string) (Kind, error) {
	k, ok := s.Kinds[name]
	if !ok {
		return nil, fmt.Errorf("no support for %s environments in this process", name)
	}
	return k, nil
}

func (s *Service) log(ctx context.Context, tx jobs.Tx, env *models.Environment, event, actor string, detail map[string]any) error {
	return models.AppendLog(ctx, tx, logEntry(env, event, actor, detail))
}

func logEntry(env *models.Environment, event, actor string, detail map[string]any) *models.LogEntry {
	return &models.LogEntry{TargetID: Target(env), Event: event, Actor: actor, Detail: detail}
}

func allocationNotFound(err error, id uuid.UUID) error {
	if errors.Is(err, models.ErrNotFound) {
		return apperr.New(apperr.NotFound, "No allocation %s.", id)
	}
	return err
}
