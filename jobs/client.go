// Package jobs holds Gantry's background work as River jobs: one file per job
// kind (its Args and its Worker), each area's list of kinds (Area, in the
// area's own file), and the two River clients a process needs.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/gantryhq/gantry/models"
)

// SharedDeps are what the jobs that belong to no area need.
type SharedDeps struct {
	DB     *models.DB
	Logger *slog.Logger
	// Approvals mails vote requests for every area's subjects.
	Approvals Approvals
	// HeartbeatInterval is how often a running job of an area's Heartbeats
	// kinds says it is alive.
	HeartbeatInterval time.Duration
}

// ClientOptions says whether this process works jobs and how.
type ClientOptions struct {
	Work        bool // false: the client only lists, retries and cancels jobs (web-only processes)
	Concurrency int  // jobs per queue, unless the area's queue says otherwise
	Logger      *slog.Logger
	// FetchPollInterval, when set, is every queue's poll: test harnesses
	// shorten it so a job inserted without a notification runs soon.
	FetchPollInterval time.Duration
	// SkipPeriodic leaves the areas' sweeps out (test harnesses run them
	// when a test asks).
	SkipPeriodic bool
}

// NewClient builds the River client over the process's pgx pool with the
// jobs of every area. It works jobs only when opts.Work; otherwise it
// serves the admin jobs page.
func NewClient(deps SharedDeps, areas []Area, opts ClientOptions) (*river.Client[pgx.Tx], error) {
	all := append([]Area{sharedArea(deps)}, areas...)
	workers := river.NewWorkers()
	rescue := 2 * time.Hour
	beating := map[string]bool{}
	for _, a := range all {
		if a.AddWorkers != nil {
			a.AddWorkers(workers)
		}
		// Later than any job may legitimately run, so a long apply is never
		// run twice at once. The kinds that run commands do not wait for
		// it: their heartbeats tell the areas' sweeps in minutes that a
		// worker died, and a sweep cancels the dead attempt (River's
		// rescue then ends it as cancelled, never runs it again).
		rescue = max(rescue, a.LongestJob+30*time.Minute)
		for _, k := range a.Heartbeats {
			beating[k] = true
		}
	}
	cfg := &river.Config{
		Logger:               riverLogger(opts.Logger),
		Workers:              workers,
		JobTimeout:           time.Hour, // terraform applies can be long; each kind narrows it with Timeout()
		RescueStuckJobsAfter: rescue,
		MaxAttempts:          10,
		ErrorHandler:         &errorHandler{logger: opts.Logger},
	}
	if opts.Work {
		if len(beating) > 0 && deps.HeartbeatInterval > 0 {
			cfg.Middleware = []rivertype.Middleware{newHeartbeats(deps.DB, opts.Logger, deps.HeartbeatInterval, beating)}
		}
		cfg.Queues = map[string]river.QueueConfig{QueueDefault: queueConfig(QueueConfig{Name: QueueDefault}, opts)}
		for _, a := range all {
			cfg.Queues[a.Queue.Name] = queueConfig(a.Queue, opts)
			// Periodic jobs are enqueued only by River's elected leader, so
			// any number of worker processes run each sweep once.
			if !opts.SkipPeriodic {
				cfg.PeriodicJobs = append(cfg.PeriodicJobs, a.Periodic...)
			}
		}
	}
	client, err := river.NewClient(riverpgxv5.New(deps.DB.Pool), cfg)
	if err != nil {
		return nil, fmt.Errorf("creating River client: %w", err)
	}
	return client, nil
}

// QueueNames are the queues a worker process with these areas works.
func QueueNames(areas []Area) []string {
	names := []string{QueueDefault, QueueMaintenance}
	for _, a := range areas {
		names = append(names, a.Queue.Name)
	}
	return names
}

func queueConfig(q QueueConfig, opts ClientOptions) river.QueueConfig {
	c := river.QueueConfig{MaxWorkers: q.MaxWorkers, FetchPollInterval: q.FetchPollInterval, FetchCooldown: q.FetchCooldown}
	if c.MaxWorkers == 0 {
		c.MaxWorkers = opts.Concurrency
	}
	if opts.FetchPollInterval > 0 && (c.FetchPollInterval == 0 || opts.FetchPollInterval < c.FetchPollInterval) {
		c.FetchPollInterval = opts.FetchPollInterval
		c.FetchCooldown = min(c.FetchCooldown, opts.FetchPollInterval)
		if c.FetchCooldown == 0 {
			c.FetchCooldown = opts.FetchPollInterval / 2
		}
	}
	return c
}

// River logs routine events at info; Gantry's operators want only problems.
// Nor do they want River's own shutdown noise: when the process stops,
// River's services see their contexts canceled and log what they were doing
// as an error ("maintenance.PeriodicJobEnqueuer: Error starting
// transaction", error "context canceled"). Those records are dropped.
func riverLogger(l *slog.Logger) *slog.Logger {
	return slog.New(riverHandler{l.Handler(), slog.LevelWarn})
}

// riverHandler passes on River's records at min or above, except those
// whose "error" is a context cancellation.
type riverHandler struct {
	slog.Handler
	min slog.Level
}

func (h riverHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h riverHandler) Handle(ctx context.Context, r slog.Record) error {
	canceled := false
	r.Attrs(func(a slog.Attr) bool {
		canceled = a.Key == "error" && isCancellation(a.Value)
		return !canceled
	})
	if canceled {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs and WithGroup keep the floor and the filter on loggers River
// derives with With.
func (h riverHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return riverHandler{h.Handler.WithAttrs(as), h.min}
}

func (h riverHandler) WithGroup(name string) slog.Handler {
	return riverHandler{h.Handler.WithGroup(name), h.min}
}

// isCancellation: River logs errors as their text (err.Error()), sometimes
// as the error itself.
func isCancellation(v slog.Value) bool {
	v = v.Resolve()
	if err, ok := v.Any().(error); ok && errors.Is(err, context.Canceled) {
		return true
	}
	return v.Kind() == slog.KindString && strings.Contains(v.String(), context.Canceled.Error())
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
