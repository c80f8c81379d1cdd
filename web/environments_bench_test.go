package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkAllocateRelease measures the allocation API end to end (HTTP,
// authentication, matching, row locks, the transaction, the timeout job,
// release, cleanup through River) and, in the same run against a database
// on the same server, pgbench's simple-update workload at the same
// concurrency, so the result reads as a ratio that holds on a noisy machine.
// It runs for a fixed time per concurrency and ignores b.N:
//
//	go test -run '^$' -bench AllocateRelease -benchtime 1x ./web/
//
// The pool is of kind slot (no credentials, no cleanup command), so what is
// measured is Gantry, not PostgreSQL's CREATE ROLE or CREATE DATABASE.
func BenchmarkAllocateRelease(b *testing.B) {
	for _, clients := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchAllocateRelease(b, clients) })
	}
}

const benchDuration = 10 * time.Second

func benchAllocateRelease(b *testing.B, clients int) {
	bundle := setup(b, "GANTRY_API_RATE=1000000") // the rest as shipped
	var envs strings.Builder
	size := 4 * clients
	for i := 0; i < size; i++ {
		fmt.Fprintf(&envs, "  - {pool: bench, name: slot-%d}\n", i)
	}
	bundle.sync(b, "clients:\n  - name: ci\n    users: [ci@example.com]\npools:\n  - name: bench\n    kind: slot\nenvironments:\n"+envs.String())
	bundle.startWorkers(b) // after the pools, so the workers stop before the pools are dropped
	token := bundle.ciToken(b)

	pgbenchTPS := pgbench(b, bundle, clients)

	transport := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	client := &http.Client{Transport: transport}
	defer transport.CloseIdleConnections()
	var mu sync.Mutex
	var latencies []time.Duration
	locked := 0
	deadline := time.Now().Add(benchDuration)
	var wg sync.WaitGroup
	b.ResetTimer()
	goCPU0, pgCPU0 := processCPU(), backendsCPU(b, bundle)
	start := time.Now()
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			busy := 0
			for time.Now().Before(deadline) {
				t0 := time.Now()
				status, id := benchAllocate(b, client, bundle.srv.URL, token)
				if status == http.StatusLocked {
					busy++
					continue
				}
				mine = append(mine, time.Since(t0))
				t1 := time.Now()
				benchRelease(b, client, bundle.srv.URL, token, id)
				mine = append(mine, time.Since(t1))
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			locked += busy
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	goCPU, pgCPU := processCPU()-goCPU0, backendsCPU(b, bundle)-pgCPU0
	b.StopTimer()

	slices.Sort(latencies)
	ops := float64(len(latencies)) / elapsed.Seconds()
	b.ReportMetric(ops, "ops/s")
	b.ReportMetric(pgbenchTPS, "pgbench_tps")
	b.ReportMetric(ops/pgbenchTPS, "ratio")
	b.ReportMetric(ms(percentile(latencies, 0.50)), "p50_ms")
	b.ReportMetric(ms(percentile(latencies, 0.99)), "p99_ms")
	b.ReportMetric(ms(percentile(latencies, 0.999)), "p999_ms")
	b.ReportMetric(float64(locked), "423s")
	// Where the time goes, per op, whatever else the machine is doing: CPU
	// of this process (server, River worker and the HTTP clients) and of
	// the PostgreSQL backends serving this database.
	b.ReportMetric(float64(goCPU.Microseconds())/float64(len(latencies)), "go_cpu_us/op")
	if pgCPU >= 0 {
		b.ReportMetric(float64(pgCPU.Microseconds())/float64(len(latencies)), "pg_cpu_us/op")
	}
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// backendsCPU is the CPU time used so far by the PostgreSQL backends
// connected to the bundle's database, read from /proc when the server runs on
// this machine; -1 when it cannot be read. Gantry's pool keeps its
// connections for the whole run, so the difference over the run is theirs.
func backendsCPU(b *testing.B, bundle *bundle) time.Duration {
	rows, err := bundle.db.Pool.Query(context.Background(), "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
	if err != nil {
		return -1
	}
	defer rows.Close()
	var total time.Duration
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return -1
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return -1
		}
		// Fields 14 and 15 (utime, stime) in clock ticks, after the
		// parenthesised command name.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		total += time.Duration(utime+stime) * time.Second / clockTicks
	}
	if rows.Err() != nil {
		return -1
	}
	return total
}

const clockTicks = 100 // USER_HZ on Linux

func benchAllocate(b *testing.B, client *http.Client, base, token string) (int, string) {
	req, _ := http.NewRequest("POST", base+"/allocations", strings.NewReader(`{"pool":"bench","requester":"bench"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		b.Error(err)
		return 0, ""
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, res.Body)
		return res.StatusCode, ""
	}
	var out allocateResponse
	if err := jsonDecode(res, &out); err != nil {
		b.Error(err)
		return 0, ""
	}
	return res.StatusCode, out.Allocations[0].ID
}

func benchRelease(b *testing.B, client *http.Client, base, token, id string) {
	req, _ := http.NewRequest("DELETE", base+"/allocations/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		b.Error(err)
		return
	}
	// Read to the end, as a real client does, or the transport closes the
	// connection instead of keeping it alive for the next request.
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b.Errorf("release answered %d", res.StatusCode)
	}
}

var tpsLine = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// pgbench runs the simple-update workload (-N) with clients connections for
// benchDuration on the bundle's own database, and returns its transactions
// per second.
func pgbench(b *testing.B, bundle *bundle, clients int) float64 {
	bin, err := exec.LookPath("pgbench")
	if err != nil {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
		require.NotEmpty(b, matches, "pgbench is needed for the baseline (Debian: postgresql-client or postgresql)")
		bin = matches[len(matches)-1]
	}
	var dbURL string
	require.NoError(b, bundle.db.Pool.QueryRow(context.Background(), "SELECT current_database()").Scan(&dbURL))
	conn := bundle.db.Pool.Config().ConnConfig
	uri := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", conn.User, conn.Host, conn.Port, dbURL)
	out, err := exec.Command(bin, "-i", "-q", "-s", "4", uri).CombinedOutput()
	require.NoError(b, err, string(out))
	out, err = exec.Command(bin, "-N", "-n", "-c", strconv.Itoa(clients), "-j", "2", "-T", strconv.Itoa(int(benchDuration.Seconds())), uri).CombinedOutput()
	require.NoError(b, err, string(out))
	m := tpsLine.FindSubmatch(out)
	require.NotNil(b, m, string(out))
	tps, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(b, err)
	return tps
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func jsonDecode(res *http.Response, v any) error { return json.NewDecoder(res.Body).Decode(v) }

var benchClients = []int{16, 64} // the concurrency levels
