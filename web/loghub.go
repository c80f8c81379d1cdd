package web

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gantryhq/gantry/models"
)

// logHub fans one PostgreSQL LISTEN connection out to every open live page,
// so a hundred open log pages cost one connection, not a hundred.
type logHub struct {
	db     *models.DB
	logger *slog.Logger
	mu     sync.Mutex
	subs   map[chan struct{}]struct{}
}

func newLogHub(db *models.DB, logger *slog.Logger) *logHub {
	return &logHub{db: db, logger: logger, subs: map[chan struct{}]struct{}{}}
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

// run listens until ctx ends, reconnecting after failures; streams poll
// meanwhile, so a lost connection only slows them down.
func (h *logHub) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := models.ListenLog(ctx, h.db.Pool, h.wake)
		if ctx.Err() != nil {
			return
		}
		h.logger.Warn("log listener stopped; reconnecting", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}
