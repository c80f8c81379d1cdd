package daemons_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/daemons"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// BenchmarkSweep is the full reconcile pass (daemon_sweep) over one
// cluster of 10,000 instances and 10 active environments, each with a
// running task on every instance (100,000 tasks): refresh the cluster from
// the local backend, look for stale and pending deployments, reconcile
// each environment (snapshot, plan; nothing to do). The floor, in the same
// run, reads the rows the pass must read (the cluster's instances once,
// each environment's live tasks) with the same queries and nothing else. Reported: sweep_ms,
// floor_ms and their ratio.
func BenchmarkSweep(b *testing.B) {
	const instances, environments = 10_000, 10
	srv := servertest.Services(b)
	svc := srv.Daemons()
	ctx := context.Background()
	db := srv.DB.Bun
	_, err := db.ExecContext(ctx, `INSERT INTO daemon_instances (id, cluster, backend, hostname, attributes, status, last_seen_at)
		SELECT 'i-' || lpad(n::text, 5, '0'), 'big', 'local', 'host' || n, '{"role": "web"}', 'active', now() + interval '1 hour'
		FROM generate_series(1, ?) AS n`, instances)
	require.NoError(b, err)
	require.NoError(b, models.RefreshDaemonCluster(ctx, db, "big", daemons.BackendLocal, time.Now()))
	var envIDs []int64
	for i := range environments {
		name := fmt.Sprintf("env-%d", i)
		_, v, err := svc.CreateEnvironment(ctx, name, daemons.Spec{TaskDefinition: daemons.TaskDefinition{Name: name, Command: []string{"/bin/true"}},
			InstanceGroup: daemons.InstanceGroup{Cluster: "big", Attributes: []string{"role=web"}}}, "api", "bench")
		require.NoError(b, err)
		env, err := models.DaemonEnvironmentByName(ctx, db, name)
		require.NoError(b, err)
		envIDs = append(envIDs, env.ID)
		_, err = db.ExecContext(ctx, `
			WITH d AS (INSERT INTO daemon_deployments (id, environment_id, version_id, type, state, created_by, started_at, ended_at)
				VALUES (gen_random_uuid(), ?, ?, 'user-created', 'complete', 'bench', now(), now()) RETURNING id)
			INSERT INTO daemon_tasks (id, environment_id, instance_id, version_id, deployment_id, state, running_at)
			SELECT gen_random_uuid(), ?, i.id, ?, d.id, 'running', now() FROM daemon_instances AS i, d`, env.ID, v.ID, env.ID, v.ID)
		require.NoError(b, err)
		_, err = db.ExecContext(ctx, `UPDATE daemon_environments SET active = true, deployed_version_id = ? WHERE id = ?`, v.ID, env.ID)
		require.NoError(b, err)
	}
	_, err = db.ExecContext(ctx, "ANALYZE")
	require.NoError(b, err)

	floor := func() {
		_, err := models.DaemonClusterInstances(ctx, db, "big")
		require.NoError(b, err)
		for _, id := range envIDs {
			ts, err := models.LiveDaemonTasks(ctx, db, id)
			require.NoError(b, err)
			require.Len(b, ts, instances)
		}
	}
	var sweep, base time.Duration
	b.ResetTimer()
	for range b.N {
		began := time.Now()
		require.NoError(b, svc.Sweep(ctx))
		sweep += time.Since(began)
		began = time.Now()
		floor()
		base += time.Since(began)
	}
	b.StopTimer()
	var started int
	require.NoError(b, db.NewSelect().TableExpr("daemon_tasks").ColumnExpr("count(*)").Where("state = 'launching'").Scan(ctx, &started))
	require.Zero(b, started, "a converged cluster needs nothing")
	b.ReportMetric(float64(sweep.Milliseconds())/float64(b.N), "sweep_ms")
	b.ReportMetric(float64(base.Milliseconds())/float64(b.N), "floor_ms")
	b.ReportMetric(float64(sweep)/float64(base), "sweep/floor")
}
