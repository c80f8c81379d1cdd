package web

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gantryhq/gantry/models"
)

// logHub is the one reader of new log entries in this process: while any
// live page is open it asks once a second for the entries after the last
// one it has seen and hands them to every open stream, which filters them
// in memory (models.LogFilter.Matches). So 800 open log pages cost one
// small query a second, not one per page per entry. (A NOTIFY per entry
// would cost more: PostgreSQL serialises the commits of notifying
// transactions.)
type logHub struct {
	db       *models.DB
	logger   *slog.Logger
	interval time.Duration
	page     int // entries per query; the hub reads pages until a short one

	mu   sync.Mutex
	subs map[*logSub]struct{}
	// last is the newest id handed out; valid only while anyone listens,
	// so an idle process neither polls nor reads a backlog on its return.
	last  int64
	valid bool
	gen   int // counts resets of last, so a poll that raced one is dropped
}

// logBatch is the entries with ids in (from, to], in order: every entry,
// not only the ones a stream wants.
type logBatch struct {
	from, to int64
	entries  []models.LogEntry // shared by all streams: read only
}

// logSub is one stream's subscription. Its buffer is bounded: a stream that
// falls logSubBuffer batches behind (its client reads too slowly) is closed
// rather than letting it hold up the hub or the other streams; the browser
// reconnects with Last-Event-ID and catches up with a query of its own.
type logSub struct {
	ch chan logBatch
}

const logSubBuffer = 64

func newLogHub(db *models.DB, logger *slog.Logger) *logHub {
	return &logHub{db: db, logger: logger, interval: time.Second, page: 200, subs: map[*logSub]struct{}{}}
}

// subscribe registers a stream. It returns the id after which the hub's
// batches start (each batch's from is the previous one's to), so the stream
// reads what came before with a query of its own, once, and the rest from
// the hub. The channel is closed when the stream fell too far behind.
func (h *logHub) subscribe(ctx context.Context) (<-chan logBatch, int64, func(), error) {
	h.mu.Lock()
	if !h.valid {
		h.mu.Unlock()
		id, err := models.LastLogID(ctx, h.db.Bun)
		if err != nil {
			return nil, 0, nil, err
		}
		h.mu.Lock()
		if !h.valid {
			h.last, h.valid = id, true
			h.gen++
		}
	}
	sub := &logSub{ch: make(chan logBatch, logSubBuffer)}
	h.subs[sub] = struct{}{}
	start := h.last
	h.mu.Unlock()
	return sub.ch, start, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[sub]; !ok {
			return // already closed by publish, or unsubscribed
		}
		delete(h.subs, sub)
		close(sub.ch)
		if len(h.subs) == 0 {
			h.valid = false
		}
	}, nil
}

// position is where the next poll starts, and whether anyone listens.
func (h *logHub) position() (last int64, gen int, listening bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last, h.gen, h.valid && len(h.subs) > 0
}

// publish hands a batch to every stream without waiting for any.
func (h *logHub) publish(gen int, b logBatch) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != h.gen || !h.valid || h.last != b.from {
		return false // nobody listened for a while: the position was reset
	}
	h.last = b.to
	for sub := range h.subs {
		select {
		case sub.ch <- b:
		default:
			delete(h.subs, sub)
			close(sub.ch) // too far behind: the stream ends, the browser resumes
		}
	}
	if len(h.subs) == 0 {
		h.valid = false
	}
	return true
}

// run polls for new entries while anyone is watching, until ctx ends.
func (h *logHub) run(ctx context.Context) {
	tick := time.NewTicker(h.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		h.poll(ctx)
	}
}

// poll reads the entries after the last one handed out, a page at a time.
func (h *logHub) poll(ctx context.Context) {
	for {
		last, gen, listening := h.position()
		if !listening {
			return
		}
		entries, err := models.ListLog(ctx, h.db.Bun, models.LogFilter{AfterID: last, Limit: h.page})
		if err != nil {
			if ctx.Err() == nil {
				h.logger.Warn("polling the deployment log", "error", err)
			}
			return
		}
		if len(entries) == 0 || !h.publish(gen, logBatch{from: last, to: entries[len(entries)-1].ID, entries: entries}) {
			return
		}
		if len(entries) < h.page {
			return
		}
	}
}
