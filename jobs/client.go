// Package jobs holds Gantry's background work as River jobs: one file per job
// kind (its Args and its Worker), the registry of workers and periodic jobs,
// and the two River clients a process needs.
package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/gantryhq/gantry/models"
)

// Queues, one per area, so a slow area cannot starve another.
const (
	QueueDefault      = river.QueueDefault
	QueueMaintenance  = "maintenance"
	QueueInfra        = "infra"
	QueueEnvironments = "environments"
	QueueDaemons      = "daemons"
	QueueModules      = "modules"
	QueuePipelines    = "pipelines"
)

// AllQueues lists every queue a worker process works.
var AllQueues = []string{QueueDefault, QueueMaintenance, QueueInfra, QueueEnvironments, QueueDaemons, QueueModules, QueuePipelines}

// Deps are what workers need; each worker takes only its part of it.
type Deps struct {
	DB     *models.DB
	Logger *slog.Logger
	Pools  EnvironmentPools
	Infra  Infra
}

// ClientOptions says whether this process works jobs and how many at once.
type ClientOptions struct {
	Work        bool // false: the client only lists, retries and cancels jobs (web-only processes)
	Concurrency int  // jobs per queue
	Logger      *slog.Logger
}

// NewClient builds the River client over the process's pgx pool. It works
// jobs only when opts.Work; otherwise it serves the admin jobs page.
func NewClient(deps Deps, opts ClientOptions) (*river.Client[pgx.Tx], error) {
	cfg := &river.Config{
		Logger:               riverLogger(opts.Logger),
		Workers:              NewWorkers(deps),
		JobTimeout:           time.Hour, // terraform applies can be long; each kind narrows it with Timeout()
		RescueStuckJobsAfter: rescueAfter(deps),
		MaxAttempts:          10,
		ErrorHandler:         &errorHandler{logger: opts.Logger},
	}
	if opts.Work {
		cfg.Queues = make(map[string]river.QueueConfig, len(AllQueues))
		for _, q := range AllQueues {
			cfg.Queues[q] = river.QueueConfig{MaxWorkers: opts.Concurrency}
		}
		// An execution's plan job is inserted the moment its last dependency
		// succeeds. River sends at most one insert notification per queue
		// per FetchCooldown, so a job inserted right after another waits for
		// the next poll: a short poll keeps each step of a run under a fifth
		// of a second instead of a second, and a short cooldown lets a
		// notified job be fetched at once (docs/performance.md).
		cfg.Queues[QueueInfra] = river.QueueConfig{MaxWorkers: opts.Concurrency, FetchPollInterval: InfraPollInterval, FetchCooldown: InfraFetchCooldown}
		// Periodic jobs are enqueued only by River's elected leader, so any
		// number of worker processes run each sweep once.
		cfg.PeriodicJobs = PeriodicJobs()
	}
	client, err := river.NewClient(riverpgxv5.New(deps.DB.Pool), cfg)
	if err != nil {
		return nil, fmt.Errorf("creating River client: %w", err)
	}
	return client, nil
}

// InfraPollInterval is how often a worker looks for infra jobs it was not
// notified of: one small indexed query per worker process each time.
// InfraFetchCooldown is the least time between two fetches of the queue,
// so a job notified just after a fetch waits little.
const (
	InfraPollInterval  = 200 * time.Millisecond
	InfraFetchCooldown = 20 * time.Millisecond
)

// rescueAfter is when River takes a job still running for lost (its
// process died) and runs it again: later than any job may legitimately run,
// so a long apply is never run twice at once.
func rescueAfter(deps Deps) time.Duration {
	d := 2 * time.Hour
	if deps.Infra != nil {
		d = max(d, deps.Infra.JobTimeout()+30*time.Minute)
	}
	return d
}

// River logs routine events at info; Gantry's operators want only problems.
func riverLogger(l *slog.Logger) *slog.Logger {
	return slog.New(levelFloor{l.Handler(), slog.LevelWarn})
}

type levelFloor struct {
	slog.Handler
	min slog.Level
}

func (h levelFloor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

// errorHandler logs failed attempts with the job's kind, so an operator can
// find them; River retries them by itself.
type errorHandler struct{ logger *slog.Logger }

func (h *errorHandler) HandleError(ctx context.Context, job *rivertype.JobRow, err error) *river.ErrorHandlerResult {
	h.logger.WarnContext(ctx, "job attempt failed", "kind", job.Kind, "job_id", job.ID, "attempt", job.Attempt, "error", err)
	return nil
}

func (h *errorHandler) HandlePanic(ctx context.Context, job *rivertype.JobRow, panicVal any, trace string) *river.ErrorHandlerResult {
	h.logger.ErrorContext(ctx, "job panicked", "kind", job.Kind, "job_id", job.ID, "panic", panicVal, "trace", trace)
	return nil
}
