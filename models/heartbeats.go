package models

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// JobHeartbeat says that an attempt of a job running a command is alive:
// its worker touches BeatAt every heartbeat interval (jobs.heartbeats).
type JobHeartbeat struct {
	bun.BaseModel `bun:"table:job_heartbeats,alias:hb"`

	JobID     int64 `bun:",pk"`
	Kind      string
	Attempt   int
	Worker    string // host:pid of the worker process
	StartedAt time.Time
	BeatAt    time.Time
}

// QuietJob is a heartbeat that went quiet, with what the sweeps need of its
// job: its arguments, and whether River still counts it running.
type QuietJob struct {
	JobHeartbeat
	Args    json.RawMessage `bun:"args"`
	Running bool            `bun:"running"`
}

// StartHeartbeat records that attempt of job runs on worker (again, for a
// later attempt).
func StartHeartbeat(ctx context.Context, db bun.IDB, jobID int64, kind string, attempt int, worker string) error {
	_, err := db.NewRaw(`INSERT INTO job_heartbeats (job_id, kind, attempt, worker) VALUES (?, ?, ?, ?)
		ON CONFLICT (job_id) DO UPDATE SET attempt = EXCLUDED.attempt, worker = EXCLUDED.worker, started_at = now(), beat_at = now()`,
		jobID, kind, attempt, worker).Exec(ctx)
	if err != nil {
		return fmt.Errorf("starting the heartbeat of job %d: %w", jobID, err)
	}
	return nil
}

// Beat touches the heartbeat of attempt of job; false means it is gone: a
// sweep took the attempt for dead.
func Beat(ctx context.Context, db bun.IDB, jobID int64, attempt int) (bool, error) {
	res, err := db.NewRaw(`UPDATE job_heartbeats SET beat_at = now() WHERE job_id = ? AND attempt = ?`, jobID, attempt).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("beating for job %d: %w", jobID, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// EndHeartbeat removes the heartbeat of attempt of job, which ended.
func EndHeartbeat(ctx context.Context, db bun.IDB, jobID int64, attempt int) error {
	if _, err := db.NewRaw(`DELETE FROM job_heartbeats WHERE job_id = ? AND attempt = ?`, jobID, attempt).Exec(ctx); err != nil {
		return fmt.Errorf("ending the heartbeat of job %d: %w", jobID, err)
	}
	return nil
}

// QuietJobs are the heartbeats of the given kinds that have not beaten for
// quiet, by the database's clock, oldest first. Quiet counts from
// PostgreSQL's own start at the earliest: workers cannot beat while it
// restarts, and a restart must not make every running job look dead.
func QuietJobs(ctx context.Context, db bun.IDB, kinds []string, quiet time.Duration) ([]QuietJob, error) {
	var out []QuietJob
	err := db.NewRaw(`SELECT hb.*, coalesce(j.args, '{}') AS args, coalesce(j.state::text = 'running', false) AS running
		FROM job_heartbeats AS hb LEFT JOIN river_job AS j ON j.id = hb.job_id
		WHERE hb.kind IN (?) AND greatest(hb.beat_at, pg_postmaster_start_time()) < now() - make_interval(secs => ?)
		ORDER BY hb.beat_at`, bun.In(kinds), quiet.Seconds()).Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("listing quiet heartbeats: %w", err)
	}
	return out, nil
}

// ClaimQuietJob removes a heartbeat that is still quiet for quiet, so that
// one sweep, in the caller's transaction, acts on the attempt's death; false
// means it beat since, or another sweep took it.
func ClaimQuietJob(ctx context.Context, db bun.IDB, jobID int64, attempt int, quiet time.Duration) (bool, error) {
	res, err := db.NewRaw(`DELETE FROM job_heartbeats WHERE job_id = ? AND attempt = ? AND greatest(beat_at, pg_postmaster_start_time()) < now() - make_interval(secs => ?)`,
		jobID, attempt, quiet.Seconds()).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("claiming the heartbeat of job %d: %w", jobID, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// HeartbeatsOf are the heartbeats of the running jobs of the given kinds
// whose argument field (execution_id, …) is one of ids, by that id (the
// latest when two beat).
func HeartbeatsOf(ctx context.Context, db bun.IDB, kinds []string, field string, ids []int64) (map[int64]JobHeartbeat, error) {
	out := make(map[int64]JobHeartbeat)
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct {
		JobHeartbeat
		Of int64 `bun:"of"`
	}
	err := db.NewRaw(`SELECT hb.*, (j.args->>?)::bigint AS of FROM job_heartbeats AS hb JOIN river_job AS j ON j.id = hb.job_id
		WHERE j.kind IN (?) AND (j.args->>?)::bigint IN (?) ORDER BY hb.beat_at`,
		field, bun.In(kinds), field, bun.In(ids)).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("reading heartbeats: %w", err)
	}
	for _, r := range rows {
		out[r.Of] = r.JobHeartbeat
	}
	return out, nil
}
