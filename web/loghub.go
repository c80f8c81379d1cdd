package web

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gantryhq/gantry/models"
)

// logHub lets every open live page in this process wait on one poll of the
// log's newest id, so a hundred open log pages cost one small query a
// second, not a hundred. (A NOTIFY per entry would cost more: PostgreSQL
// serialises the commits of notifying transactions.)
type logHub struct {
	db       *models.DB
	logger   *slog.Logger
	interval time.Duration
	mu       sync.Mutex
	subs     map[chan struct{}]struct{}
}

func newLogHub(db *models.DB, logger *slog.Logger) *logHub {
	return &logHub{db: db, logger: logger, interval: time.Second, subs: map[chan struct{}]struct{}{}}
}

// subscribe returns a channel that receives a signal after new entries; the
// signal carries no data, so a slow reader misses nothing by coalescing.
func (h *logHub) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

func (h *logHub) wake() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (h *logHub) listening() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs) > 0
}

// run polls the newest log id while anyone is watching, until ctx ends.
func (h *logHub) run(ctx context.Context) {
	tick := time.NewTicker(h.interval)
	defer tick.Stop()
	var last int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !h.listening() {
			continue
		}
		id, err := models.LastLogID(ctx, h.db.Bun)
		if err != nil {
			if ctx.Err() == nil {
				h.logger.Warn("polling the deployment log", "error", err)
			}
			continue
		}
		if id != last {
			last = id
			h.wake()
		}
	}
}
