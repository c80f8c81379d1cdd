package jobs

import (
	"context"

	"github.com/riverqueue/river"
)

// NotifyRollbackHeldArgs mails the operators of a rollback that failed and
// waits for them. It is inserted with the failure, once per failure.
type NotifyRollbackHeldArgs struct {
	ExecutionID int64 `json:"execution_id"` // the rollback execution's row id
}

func (NotifyRollbackHeldArgs) Kind() string { return "notify_rollback_held" }
func (NotifyRollbackHeldArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueInfra, MaxAttempts: 8}
}

// NotifyRollbackHeldWorker may mail twice when the mail server took a
// message and the answer was lost; never not at all while attempts remain.
type NotifyRollbackHeldWorker struct {
	river.WorkerDefaults[NotifyRollbackHeldArgs]
	Infra Infra
}

func (w *NotifyRollbackHeldWorker) Work(ctx context.Context, job *river.Job[NotifyRollbackHeldArgs]) error {
	return w.Infra.NotifyRollbackHeld(ctx, job.Args.ExecutionID)
}
