package jobs

import (
	"context"

	"github.com/riverqueue/river"
)

// HandleDeliveryArgs does the work of one GitHub delivery, recorded by the
// webhook in the same transaction.
type HandleDeliveryArgs struct {
	DeliveryID string `json:"delivery_id"`
}

func (HandleDeliveryArgs) Kind() string                 { return "github_delivery" }
func (HandleDeliveryArgs) InsertOpts() river.InsertOpts { return infraOpts(10) }

// HandleDeliveryWorker is idempotent: the delivery is a stored row read
// again on every attempt, a pull request's update applies only when newer
// than the stored one (UpsertPullRequest), and the jobs it starts are unique
// by their arguments.
type HandleDeliveryWorker struct {
	river.WorkerDefaults[HandleDeliveryArgs]
	Infra Infra
}

func (w *HandleDeliveryWorker) Work(ctx context.Context, job *river.Job[HandleDeliveryArgs]) error {
	return w.Infra.HandleDelivery(ctx, job.Args.DeliveryID)
}
