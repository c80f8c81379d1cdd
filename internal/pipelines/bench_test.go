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
// hosts, times the fan-out); each iteration registers 4 revisions at once
// and waits until all went through, every step a River job that appends
// its completion to the log in the transaction that records it. The
// baseline, in the same run on the same database, is pgbench's
// simple-update workload with as many connections as workers.
func BenchmarkStepThroughput(b *testing.B) {
	const (
		groups, hosts, revisions = 10, 50, 4
		workers                  = 32
	)
	s := servertest.Services(b)
	ctx := context.Background()
	def := gantryfile.Pipeline{Name: "fleet", Stages: []gantryfile.PipelineStage{{Name: "all"}}}
	for g := range groups {
		hg := gantryfile.HostGroup{Name: fmt.Sprintf("g%d", g)}
		for h := range hosts {
			hg.Hosts = append(hg.Hosts, fmt.Sprintf("h%d", h))
		}
		def.Stages[0].HostGroups = append(def.Stages[0].HostGroups, hg)
	}
	// Hosts with no commands are refused by gantry.yaml (a stage's hosts
	// need a step); written directly they are the pure bookkeeping measured.
	raw, err := json.Marshal(def)
	require.NoError(b, err)
	shape, err := def.Shape()
	require.NoError(b, err)
	require.NoError(b, models.UpsertPipeline(ctx, s.DB.Bun, &models.Pipeline{Name: "fleet", Definition: raw, Events: shape.Events()}))

	client, err := s.App.RiverClient(jobs.ClientOptions{Work: true, Concurrency: workers, SkipPeriodic: true, FetchPollInterval: 50 * time.Millisecond})
	require.NoError(b, err)
	require.NoError(b, client.Start(ctx))
	b.Cleanup(func() {
		stop, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(stop)
	})
	svc := s.Pipelines()

	var steps int
	var elapsed time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		for r := range revisions {
			_, _, err := svc.Register(ctx, "fleet", fmt.Sprintf("v%d-%d", i, r), "bench")
			require.NoError(b, err)
		}
		servertest.WaitFor(b, func() (bool, string) {
			revs, err := models.InFlightRevisions(ctx, s.DB.Bun, "fleet")
			require.NoError(b, err)
			return len(revs) == 0, fmt.Sprintf("%d revisions in flight", len(revs))
		})
		elapsed += time.Since(start)
		for r := range revisions {
			entries, err := models.ListLog(ctx, s.DB.Bun, models.LogFilter{Deployment: pipelines.DeploymentID("fleet", fmt.Sprintf("v%d-%d", i, r)), Limit: models.MaxLogPage})
			require.NoError(b, err)
			steps += countAll(ctx, b, s, fmt.Sprintf("v%d-%d", i, r), len(entries))
		}
	}
	b.StopTimer()
	perSecond := float64(steps) / elapsed.Seconds()
	tps := pgbenchTPS(b, s, workers)
	b.ReportMetric(perSecond, "steps/s")
	b.ReportMetric(tps, "pgbench_tps")
	b.ReportMetric(perSecond/tps, "ratio")
	b.ReportMetric(float64(steps)/float64(b.N), "steps/op")
}

// countAll is the number of log entries of a revision's deployment (the
// first page's count is a lower bound when it is full).
func countAll(ctx context.Context, b *testing.B, s *servertest.Server, rev string, firstPage int) int {
	var n int
	err := s.DB.Bun.NewSelect().Model((*models.LogEntry)(nil)).ColumnExpr("count(*)").
		Where("deployment_id = ?", pipelines.DeploymentID("fleet", rev)).Scan(ctx, &n)
	require.NoError(b, err)
	require.GreaterOrEqual(b, n, firstPage)
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
