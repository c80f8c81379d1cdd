package infra_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// BenchmarkPlanStartDelay measures the delay from an execution's last
// dependency succeeding to its plan starting: ready_at, stamped in the
// transaction that records the dependency's success and enqueues the plan
// job, to plan_started_at, stamped by the plan job as it begins. The
// executions form a chain of units whose plan command finds no changes at
// once, so each success starts the next; the production River client works
// the jobs (jobs.NewClient, default fetch settings).
//
// The baseline, measured in the same run on the same database: River's own
// delay for a no-op job inserted the same way (in a committed Bun
// transaction through jobs.Queue) until a client with the same settings as
// the infra queue's starts working it. The ratio is Gantry's orchestration over River's floor.
//
//	go test -run '^$' -bench PlanStartDelay -benchtime 1x ./internal/infra/
func BenchmarkPlanStartDelay(b *testing.B) {
	const units = 40
	s := servertest.Services(b)
	repo := infratest.New(b)
	files := map[string]string{"live/root.hcl": "locals {}\n"}
	for i := range units {
		hcl := "include \"root\" {\n  path = find_in_parent_folders(\"root.hcl\")\n}\n"
		if i > 0 {
			hcl += fmt.Sprintf("dependency \"prev\" {\n  config_path = \"../u%02d\"\n}\n", i-1)
		}
		files[fmt.Sprintf("live/chain/u%02d/terragrunt.hcl", i)] = hcl
	}
	repo.Write(files)
	repo.Commit("a chain of units")
	repo.Push(infratest.Trunk)
	s.Sync(b, fmt.Sprintf(`repositories:
  - name: chain
    url: %s
    webhook_secret_env: %s
    runner: custom
    commands:
      plan: ["true", "-detailed-exitcode", "-out={plan_file}", "{dir}"]
      apply: ["true", "{plan_file}"]
      destroy: ["true"]
    accounts:
      - {name: chain, path: live/chain, voters: [ada@example.com], min_approvals: 1, min_rejections: 1}
`, repo.Remote, servertest.WebhookSecretEnv))

	client, err := s.App.RiverClient(jobs.ClientOptions{Work: true, Concurrency: 5})
	require.NoError(b, err)
	require.NoError(b, client.Start(context.Background()))
	b.Cleanup(func() { _ = client.Stop(context.Background()) })

	var gantry, baseline []time.Duration
	b.ResetTimer()
	for n := range b.N {
		// Gantry: a pull request touching the first unit selects the chain.
		p := repo.OpenPR(100+n, map[string]string{"live/chain/u00/terragrunt.hcl": files["live/chain/u00/terragrunt.hcl"] + fmt.Sprintf("# change %d\n", n)})
		sha := repo.Merge(p.Branch)
		s.Deliver(b, "pull_request", repo.Event(p, "closed", sha))
		run := s.WaitRunOf(b, "chain", sha)
		run = s.WaitRun(b, run.ID, models.RunSucceeded, models.RunFailed)
		require.Equal(b, models.RunSucceeded, run.Status, run.Error)
		xs, err := models.ExecutionsOfRun(context.Background(), s.DB.Bun, run.ID)
		require.NoError(b, err)
		require.Len(b, xs, units)
		for _, x := range xs {
			if len(x.CfgDeps) > 0 { // the first unit has no dependency to wait for
				gantry = append(gantry, x.PlanStartedAt.Sub(*x.ReadyAt))
			}
		}
		// River's floor: the same number of no-op jobs, one after another.
		baseline = append(baseline, riverDelays(b, s, units)...)
	}
	b.StopTimer()
	report(b, "gantry", gantry)
	report(b, "river", baseline)
	b.ReportMetric(float64(median(gantry))/float64(median(baseline)), "ratio-p50")
}

// pingArgs is a job that only records when it started.
type pingArgs struct {
	Sent time.Time `json:"sent"`
}

func (pingArgs) Kind() string { return "bench_ping" }

type pingWorker struct {
	river.WorkerDefaults[pingArgs]
	started chan time.Duration
}

func (w *pingWorker) Work(_ context.Context, job *river.Job[pingArgs]) error {
	w.started <- time.Since(job.Args.Sent)
	return nil
}

// riverDelays inserts n no-op jobs one after another through jobs.Queue, each
// a while after the previous started, and returns each one's delay from its commit
// to its start in a worker of a client configured like Gantry's.
func riverDelays(b *testing.B, s *servertest.Server, n int) []time.Duration {
	w := &pingWorker{started: make(chan time.Duration, 1)}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(s.DB.Pool), &river.Config{
		Workers: workers, Queues: map[string]river.QueueConfig{"bench": {MaxWorkers: 5, FetchPollInterval: jobs.InfraPollInterval, FetchCooldown: jobs.InfraFetchCooldown}}, Logger: s.Logger,
	})
	require.NoError(b, err)
	require.NoError(b, client.Start(context.Background()))
	defer func() { _ = client.Stop(context.Background()) }()
	var out []time.Duration
	var mu sync.Mutex
	for range n {
		var committed time.Time
		err := s.Queue.InTx(context.Background(), func(ctx context.Context, tx jobs.Tx) error {
			committed = time.Now()
			return tx.Enqueue(ctx, pingArgs{Sent: committed}, &river.InsertOpts{Queue: "bench"})
		})
		require.NoError(b, err)
		select {
		case d := <-w.started:
			mu.Lock()
			out = append(out, d)
			mu.Unlock()
		case <-time.After(30 * time.Second):
			b.Fatal("a no-op job did not start within 30 s")
		}
		// Past the cooldowns, so each job meets an idle client: the floor.
		time.Sleep(2 * jobs.InfraPollInterval)
	}
	return out
}

func median(ds []time.Duration) time.Duration { return percentile(ds, 50) }

func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func report(b *testing.B, name string, ds []time.Duration) {
	b.ReportMetric(float64(percentile(ds, 50).Microseconds())/1000, name+"-p50-ms")
	b.ReportMetric(float64(percentile(ds, 90).Microseconds())/1000, name+"-p90-ms")
	b.ReportMetric(float64(percentile(ds, 99).Microseconds())/1000, name+"-p99-ms")
}
