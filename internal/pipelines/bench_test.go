package pipelines_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/pipelines"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// BenchmarkStepThroughput is issue 14's end-to-end aim: at least 1,000
// no-op steps per second through River and the log. A pipeline of one
// stage with 10 host groups of 50 hosts and no host commands is 1,025
// bookkeeping steps per revision (the seed's ~8 steps of a stage with no
// hosts, times the fan-out); each iteration registers 4 revisions, starts
// the workers and waits until all four went through, counting the log
// entries written meanwhile. The progression rounds write these steps
// themselves. The baseline, in the same run on the same database, is
// pgbench's simple-update workload with as many connections as workers.
func BenchmarkStepThroughput(b *testing.B) {
	benchmarkThroughput(b, fleet(nil), "", nil)
}

// BenchmarkJobStepThroughput measures steps that each go through their
// own do_pipeline_step River job, doing as little as such a step can: a
// build stage waiting for 500 architectures whose artifacts were all
// registered before the workers started, so each artifact step's job
// finds its artifact and completes (fetch, the reads, the transaction
// that ends the step and appends it, River's completion). job_steps/s
// counts only those.
func BenchmarkJobStepThroughput(b *testing.B) {
	const archs = 500
	def := gantryfile.Pipeline{Name: "fleet", Stages: []gantryfile.PipelineStage{{Name: "build"}}}
	for a := range archs {
		def.Stages[0].Artifacts = append(def.Stages[0].Artifacts, fmt.Sprintf("a%d", a))
	}
	benchmarkThroughput(b, def, "build-stage-received-", func(s *pipelines.Service, rev string) {
		for _, arch := range def.Stages[0].Artifacts {
			_, _, err := s.RegisterArtifact(context.Background(), "fleet", rev, arch, "s3://"+rev+"/"+arch, "bench")
			require.NoError(b, err)
		}
	})
}

// BenchmarkCommandStepThroughput is the fleet with one host step whose
// command is true: 500 steps per revision through their own job, each
// starting the runner's supervisor process and the command.
func BenchmarkCommandStepThroughput(b *testing.B) {
	benchmarkThroughput(b, fleet([]gantryfile.PipelineStep{{Name: "noop", Run: []string{"true"}, CommandTimeout: time.Minute}}), "host-noop", nil)
}

// fleet is one stage of 10 host groups of 50 hosts running hostSteps.
func fleet(hostSteps []gantryfile.PipelineStep) gantryfile.Pipeline {
	def := gantryfile.Pipeline{Name: "fleet", Stages: []gantryfile.PipelineStage{{Name: "all", Steps: hostSteps}}}
	for g := range 10 {
		hg := gantryfile.HostGroup{Name: fmt.Sprintf("g%d", g)}
		for h := range 50 {
			hg.Hosts = append(hg.Hosts, fmt.Sprintf("h%d", h))
		}
		def.Stages[0].HostGroups = append(def.Stages[0].HostGroups, hg)
	}
	return def
}

// benchmarkThroughput registers 4 revisions of def (and runs prepare on
// each), then starts 32 workers and waits until they went through. It
// reports every log entry written meanwhile per second and, with
// jobPrefix, those whose event starts with it (the steps done by a job of
// their own).
func benchmarkThroughput(b *testing.B, def gantryfile.Pipeline, jobPrefix string, prepare func(s *pipelines.Service, rev string)) {
	const revisions, workers = 4, 32
	s := servertest.Services(b)
	ctx := context.Background()
	// Hosts with no commands are refused by gantry.yaml (a stage's hosts
	// need a step); written directly they are the pure bookkeeping measured.
	raw, err := json.Marshal(def)
	require.NoError(b, err)
	shape, err := def.Shape()
	require.NoError(b, err)
	require.NoError(b, models.UpsertPipeline(ctx, s.DB.Bun, &models.Pipeline{Name: "fleet", Definition: raw, Events: shape.Events()}))
	svc := s.Pipelines()

	var steps, jobSteps int
	var commits int64
	var elapsed time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		var revs []string
		for r := range revisions {
			rev := fmt.Sprintf("v%d-%d", i, r)
			revs = append(revs, rev)
			_, _, err := svc.Register(ctx, "fleet", rev, "bench")
			require.NoError(b, err)
			if prepare != nil {
				prepare(svc, rev)
			}
		}
		var before int64
		require.NoError(b, s.DB.Bun.NewSelect().Model((*models.LogEntry)(nil)).ColumnExpr("coalesce(max(id), 0)").Scan(ctx, &before))
		client, err := s.App.RiverClient(jobs.ClientOptions{Work: true, Concurrency: workers, SkipPeriodic: true, FetchPollInterval: 50 * time.Millisecond})
		require.NoError(b, err)
		first := xactCommits(ctx, b, s)
		b.StartTimer()
		start := time.Now()
		require.NoError(b, client.Start(ctx))
		servertest.WaitFor(b, func() (bool, string) {
			inFlight, err := models.InFlightRevisions(ctx, s.DB.Bun, "fleet")
			require.NoError(b, err)
			return len(inFlight) == 0, fmt.Sprintf("%d revisions in flight", len(inFlight))
		})
		elapsed += time.Since(start)
		b.StopTimer()
		commits += xactCommits(ctx, b, s) - first
		stop, cancel := context.WithTimeout(ctx, 30*time.Second)
		require.NoError(b, client.Stop(stop))
		cancel()
		for _, rev := range revs {
			steps += countEntries(ctx, b, s, rev, before, "")
			if jobPrefix != "" {
				jobSteps += countEntries(ctx, b, s, rev, before, jobPrefix)
			}
		}
	}
	perSecond := float64(steps) / elapsed.Seconds()
	tps := pgbenchTPS(b, s, workers)
	b.ReportMetric(perSecond, "steps/s")
	b.ReportMetric(tps, "pgbench_tps")
	b.ReportMetric(perSecond/tps, "ratio")
	b.ReportMetric(float64(steps)/float64(b.N), "steps/op")
	b.ReportMetric(float64(commits)/float64(steps), "commits/step")
	if jobPrefix != "" {
		require.Equal(b, b.N*revisions*500, jobSteps, "every job step done once")
		perSecond := float64(jobSteps) / elapsed.Seconds()
		b.ReportMetric(perSecond, "job_steps/s")
		b.ReportMetric(perSecond/tps, "job_ratio")
	}
}

// countEntries is the number of log entries of a revision's deployment
// after entry id after (whose event starts with prefix, when set).
func countEntries(ctx context.Context, b *testing.B, s *servertest.Server, rev string, after int64, prefix string) int {
	var n int
	q := s.DB.Bun.NewSelect().Model((*models.LogEntry)(nil)).ColumnExpr("count(*)").
		Where("deployment_id = ?", pipelines.DeploymentID("fleet", rev)).Where("id > ?", after)
	if prefix != "" {
		q = q.Where("starts_with(event, ?)", prefix)
	}
	require.NoError(b, q.Scan(ctx, &n))
	return n
}

// xactCommits is how many transactions committed on the benchmark's
// database so far (the statistics of other sessions reach it within a
// second; River's idle clients commit a few too).
func xactCommits(ctx context.Context, b *testing.B, s *servertest.Server) int64 {
	time.Sleep(1100 * time.Millisecond) // backends flush their counts at most once a second
	var n int64
	require.NoError(b, s.DB.Pool.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&n))
	return n
}

var tpsLine = regexp.MustCompile(`tps = ([0-9.]+)`)

// pgbenchTPS runs pgbench's simple-update workload (-N) with clients
// connections for 10 s on the benchmark's own database.
func pgbenchTPS(b *testing.B, s *servertest.Server, clients int) float64 {
	bin, err := exec.LookPath("pgbench")
	if err != nil {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
		require.NotEmpty(b, matches, "pgbench is needed for the baseline (Debian: postgresql-client or postgresql)")
		bin = matches[len(matches)-1]
	}
	var db string
	require.NoError(b, s.DB.Pool.QueryRow(context.Background(), "SELECT current_database()").Scan(&db))
	conn := s.DB.Pool.Config().ConnConfig
	uri := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", conn.User, conn.Host, conn.Port, db)
	out, err := exec.Command(bin, "-i", "-q", "-s", "4", uri).CombinedOutput()
	require.NoError(b, err, string(out))
	out, err = exec.Command(bin, "-N", "-n", "-c", strconv.Itoa(clients), "-j", "2", "-T", "10", uri).CombinedOutput()
	require.NoError(b, err, string(out))
	m := tpsLine.FindSubmatch(out)
	require.NotNil(b, m, string(out))
	tps, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(b, err)
	return tps
}
