package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/gantryhq/gantry/models"
)

// HeartbeatMisses is how many heartbeats in a row a running job may miss
// before the sweeps take its worker for dead (QuietAfter).
const HeartbeatMisses = 6

// QuietAfter is how long a job's heartbeat may go quiet before the areas'
// sweeps take its worker for dead, for a heartbeat every interval: long
// enough that a busy machine or a database failover does not count, short
// enough that a dead worker's apply is noticed in minutes rather than at
// River's rescue (hours).
func QuietAfter(interval time.Duration) time.Duration { return HeartbeatMisses * interval }

// ErrWorkerTakenForDead is why a job's work is cancelled when its heartbeat
// row was taken by a sweep: the sweep decided what happens to the work, and
// this attempt must not record anything more.
var ErrWorkerTakenForDead = errors.New("a sweep took this job's worker for dead (its heartbeat was quiet too long) and handed its work on")

// heartbeats is the worker middleware that keeps a job_heartbeats row for
// each running attempt of the kinds that run commands (Area.Heartbeats),
// touched every interval by the database's clock. River cannot tell a
// long apply from a dead worker until its rescue (hours); the row can.
type heartbeats struct {
	river.MiddlewareDefaults
	db       *models.DB
	logger   *slog.Logger
	interval time.Duration
	kinds    map[string]bool
	worker   string // host:pid
}

func newHeartbeats(db *models.DB, logger *slog.Logger, interval time.Duration, kinds map[string]bool) *heartbeats {
	host, _ := os.Hostname()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &heartbeats{db: db, logger: logger, interval: interval, kinds: kinds, worker: fmt.Sprintf("%s:%d", host, os.Getpid())}
}

func (h *heartbeats) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	if !h.kinds[job.Kind] {
		return doInner(ctx)
	}
	// Without its row a job could not be told from a dead one: it does not
	// start, and River retries it.
	if err := models.StartHeartbeat(ctx, h.db.Bun, job.ID, job.Kind, job.Attempt, h.worker); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		h.beat(ctx, job, cancel)
	}()
	// Deferred, so that a panicking job ends its heartbeat too.
	defer func() {
		cancel(nil)
		<-beating
		if err := models.EndHeartbeat(context.WithoutCancel(ctx), h.db.Bun, job.ID, job.Attempt); err != nil {
			// A row left behind is found quiet by the sweep, which then
			// finds River done with the job and only deletes it.
			h.logger.Warn("ending a job's heartbeat", "job", job.ID, "kind", job.Kind, "error", err)
		}
	}()
	return doInner(ctx)
}

// beat touches the job's row every interval until ctx ends. A row that is
// gone was taken by a sweep: the work is cancelled with
// ErrWorkerTakenForDead. A failed touch (the database briefly away) is
// only logged: the next one may succeed, and the sweep needs several.
func (h *heartbeats) beat(ctx context.Context, job *rivertype.JobRow, cancel context.CancelCauseFunc) {
	tick := time.NewTicker(h.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		bctx, done := context.WithTimeout(ctx, h.interval)
		alive, err := models.Beat(bctx, h.db.Bun, job.ID, job.Attempt)
		done()
		switch {
		case err != nil && ctx.Err() == nil:
			h.logger.Warn("recording a job's heartbeat", "job", job.ID, "kind", job.Kind, "error", err)
		case err == nil && !alive:
			cancel(ErrWorkerTakenForDead)
			return
		}
	}
}
