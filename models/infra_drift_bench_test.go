package models_test

import (
	"context"
	"fmt"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/models"
)

// BenchmarkListDrift is what /infra and every metrics scrape read for
// drift: the latest finished check of each unit of a 1,000-unit
// repository's last sweep, after `history` sweeps (each keeps a finished
// check with ~1 KB of plan output per unit; 120 is a month of "every 6h",
// as much as is kept), 5% drifted. The baseline,
// measured in the same run on the same database, is pgbench's select-only
// transaction (-S, one client): the ratio is ListDrift's time in pgbench
// transactions, which moves little with the machine.
//
//	go test -run '^$' -bench ListDrift -benchtime 200x ./models/
func BenchmarkListDrift(b *testing.B) {
	for _, history := range []int{1, 30, 120} {
		b.Run(fmt.Sprintf("units=1000/history=%d", history), func(b *testing.B) { benchListDrift(b, 1000, history) })
	}
}

func benchListDrift(b *testing.B, units, history int) {
	db := testdb.New(b)
	ctx := context.Background()
	require.NoError(b, models.UpsertRepository(ctx, db.Bun, &models.Repository{
		Name: "live", URL: "https://git.example.com/live.git", Trunk: "main", Scan: "graph", WebhookSecretEnv: "SECRET",
		InitCommand: []string{}, PlanCommand: []string{"plan"}, ApplyCommand: []string{"apply"}, DestroyCommand: []string{},
		DriftEverySeconds: 6 * 3600,
	}))
	paths := make([]string, units)
	for i := range paths {
		paths[i] = fmt.Sprintf("live/prod/unit-%04d", i)
	}
	require.NoError(b, models.SaveDriftSweep(ctx, db.Bun, &models.DriftSweep{Repository: "live", CommitSHA: strings.Repeat("a", 40), Units: paths}))
	output := strings.Repeat("terraform_data.x: Refreshing state...\n", 25) + "Plan: 0 to add, 1 to change, 0 to destroy.\n"
	_, err := db.Bun.ExecContext(ctx, `INSERT INTO drift_checks (repository, path, commit_sha, status, has_changes, exit_code, output, finished_at)
		SELECT 'live', p, repeat('a', 40), 'succeeded', (h = ? AND i % 20 = 0), CASE WHEN h = ? AND i % 20 = 0 THEN 2 ELSE 0 END, ?, now()
		FROM generate_series(1, ?) AS h, unnest(?::text[]) WITH ORDINALITY AS u(p, i) ORDER BY h, i`,
		history, history, output, history, pgdialect.Array(paths))
	require.NoError(b, err)
	_, err = db.Bun.ExecContext(ctx, "VACUUM ANALYZE drift_checks")
	require.NoError(b, err)

	repos, err := models.ListDrift(ctx, db.Bun)
	require.NoError(b, err)
	require.Len(b, repos[0].Drifted, units/20)

	tps := pgbenchSelectOnly(b, db)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if _, err := models.ListDrift(ctx, db.Bun); err != nil {
			b.Fatal(err)
		}
	}
	per := time.Since(start) / time.Duration(b.N)
	b.StopTimer()
	b.ReportMetric(float64(per.Microseconds())/1000, "ms/list")
	b.ReportMetric(tps, "pgbench_S_tps")
	b.ReportMetric(per.Seconds()*tps, "pgbench_tx/list")
}

var tpsLine = regexp.MustCompile(`tps = ([0-9.]+)`)

// pgbenchSelectOnly runs pgbench's select-only workload with one client on
// db for five seconds and returns its transactions per second.
func pgbenchSelectOnly(b *testing.B, db *models.DB) float64 {
	bin, err := osexec.LookPath("pgbench")
	if err != nil {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
		require.NotEmpty(b, matches, "pgbench is needed for the baseline (Debian: postgresql-client or postgresql)")
		bin = matches[len(matches)-1]
	}
	var name string
	require.NoError(b, db.Pool.QueryRow(context.Background(), "SELECT current_database()").Scan(&name))
	conn := db.Pool.Config().ConnConfig
	uri := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", conn.User, conn.Host, conn.Port, name)
	out, err := osexec.Command(bin, "-i", "-q", "-s", "1", uri).CombinedOutput()
	require.NoError(b, err, string(out))
	out, err = osexec.Command(bin, "-S", "-n", "-c", "1", "-T", "5", uri).CombinedOutput()
	require.NoError(b, err, string(out))
	m := tpsLine.FindSubmatch(out)
	require.NotNil(b, m, string(out))
	tps, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(b, err)
	return tps
}
