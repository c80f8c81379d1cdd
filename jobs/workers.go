package jobs

import (
	"time"

	"github.com/riverqueue/river"
)

// NewWorkers registers every job kind Gantry works.
func NewWorkers(deps Deps) *river.Workers {
	w := river.NewWorkers()
	river.AddWorker(w, &PruneSessionsWorker{DB: deps.DB, Logger: deps.Logger})
	river.AddWorker(w, &AllocationTimeoutWorker{Pools: deps.Pools})
	river.AddWorker(w, &CleanupEnvironmentWorker{Pools: deps.Pools})
	river.AddWorker(w, &CleanupTimeoutWorker{Pools: deps.Pools})
	river.AddWorker(w, &NotifyDirtyWorker{Pools: deps.Pools})
	river.AddWorker(w, &PruneAllocationsWorker{Pools: deps.Pools, Logger: deps.Logger})
	river.AddWorker(w, &HandleDeliveryWorker{Infra: deps.Infra})
	river.AddWorker(w, &PlanPullRequestWorker{Infra: deps.Infra})
	river.AddWorker(w, &RunPRPlanWorker{Infra: deps.Infra})
	river.AddWorker(w, &StartRunWorker{Infra: deps.Infra})
	river.AddWorker(w, &PlanExecutionWorker{Infra: deps.Infra})
	river.AddWorker(w, &RequestVoteWorker{Infra: deps.Infra})
	river.AddWorker(w, &ApplyExecutionWorker{Infra: deps.Infra})
	river.AddWorker(w, &PostStatusWorker{Infra: deps.Infra})
	river.AddWorker(w, &RefreshMergeLockWorker{Infra: deps.Infra})
	river.AddWorker(w, &ReconcileInfraWorker{Infra: deps.Infra})
	return w
}

// PeriodicJobs are the sweeps River's elected leader enqueues on a schedule.
func PeriodicJobs() []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return PruneSessionsArgs{}, nil },
			&river.PeriodicJobOpts{ID: "prune_sessions", RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(6*time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return PruneAllocationsArgs{}, nil },
			&river.PeriodicJobOpts{ID: "prune_allocations", RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(time.Minute),
			func() (river.JobArgs, *river.InsertOpts) { return ReconcileInfraArgs{}, nil },
			&river.PeriodicJobOpts{ID: "reconcile_infra", RunOnStart: true}),
	}
}
