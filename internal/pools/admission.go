package pools

import (
	"context"
	"time"

	"github.com/gantryhq/gantry/internal/apperr"
)

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
