package jobs

import (
	"context"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
)

// AllocationTimeoutArgs releases an allocation its test forgot, at its
// expiry. One per allocation, inserted with it; an extension adds none (the
// job snoozes to the new expiry), so no unique insert is needed: it would
// only cost a hash and an index entry on every allocation.
type AllocationTimeoutArgs struct {
	AllocationID uuid.UUID `json:"allocation_id"`
}

func (AllocationTimeoutArgs) Kind() string { return "allocation_timeout" }

func (AllocationTimeoutArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueEnvironments}
}

// AllocationTimeoutWorker is idempotent: an ended allocation is left alone,
// and an extended one snoozes until its new expiry.
type AllocationTimeoutWorker struct {
	river.WorkerDefaults[AllocationTimeoutArgs]
	Pools EnvironmentPools
}

func (w *AllocationTimeoutWorker) Work(ctx context.Context, job *river.Job[AllocationTimeoutArgs]) error {
	wait, err := w.Pools.Expire(ctx, job.Args.AllocationID)
	if err != nil {
		return err
	}
	if wait > 0 {
		return river.JobSnooze(wait)
	}
	return nil
}
