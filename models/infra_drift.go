package models

import (
	"context"
	"errors"
	"time"

	"github.com/uptrace/bun"
)

// Drift check statuses.
const (
	DriftQueued    = "queued"
	DriftRunning   = "running"
	DriftSucceeded = "succeeded"
	DriftFailed    = "failed"
)

// DriftSweep is a repository's latest drift sweep: the trunk commit whose
// units were queued for a check, or why the trunk could not be scanned.
type DriftSweep struct {
	bun.BaseModel `bun:"table:drift_sweeps,alias:ds"`

	Repository string   `bun:",pk"`
	CommitSHA  string   `bun:"commit_sha"`
	Units      []string `bun:",array"`
	Error      string
	SweptAt    time.Time `bun:",nullzero,notnull,default:current_timestamp"`
}

// SaveDriftSweep records a repository's latest sweep.
func SaveDriftSweep(ctx context.Context, db bun.IDB, s *DriftSweep) error {
	if s.Units == nil {
		s.Units = []string{}
	}
	_, err := db.NewInsert().Model(s).On("CONFLICT (repository) DO UPDATE").
		Set("commit_sha = EXCLUDED.commit_sha, units = EXCLUDED.units, error = EXCLUDED.error, swept_at = EXCLUDED.swept_at").Exec(ctx)
	return err
}

// DueDriftRepositories lists the registered repositories with drift
// detection whose last sweep is at least their interval old (or that were
// never swept), by name.
func DueDriftRepositories(ctx context.Context, db bun.IDB, now time.Time) ([]string, error) {
	var names []string
	err := db.NewSelect().Model((*Repository)(nil)).Column("repo.name").
		Join("LEFT JOIN drift_sweeps AS ds ON ds.repository = repo.name").
		Where("repo.removed_at IS NULL").Where("repo.drift_every_seconds > 0").
		Where("ds.swept_at IS NULL OR ds.swept_at + repo.drift_every_seconds * interval '1 second' <= ?", now).
		Order("repo.name").Scan(ctx, &names)
	return names, err
}

// DriftCheck is one plan of one unit of the trunk, looking for drift.
type DriftCheck struct {
	bun.BaseModel `bun:"table:drift_checks,alias:dc"`

	ID         int64 `bun:",pk,autoincrement"`
	Repository string
	Path       string
	CommitSHA  string `bun:"commit_sha"`
	Status     string
	HasChanges *bool
	ExitCode   *int
	Output     string
	Error      string
	Notified   bool
	CreatedAt  time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	StartedAt  *time.Time
	FinishedAt *time.Time
}

// Drifted reports whether the check found the unit's infrastructure
// different from its code.
func (c *DriftCheck) Drifted() bool {
	return c.Status == DriftSucceeded && c.HasChanges != nil && *c.HasChanges
}

// QueueDriftChecks inserts a queued check of each path at commit and
// returns those inserted: a unit whose check still waits or runs gets none.
func QueueDriftChecks(ctx context.Context, tx bun.IDB, repo, commit string, paths []string) ([]DriftCheck, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	checks := make([]DriftCheck, len(paths))
	for i, p := range paths {
		checks[i] = DriftCheck{Repository: repo, Path: p, CommitSHA: commit, Status: DriftQueued}
	}
	var inserted []DriftCheck
	err := tx.NewInsert().Model(&checks).
		On("CONFLICT (repository, path) WHERE status IN ('queued', 'running') DO NOTHING").
		Returning("*").Scan(ctx, &inserted)
	return inserted, err
}

// FailStrandedDriftChecks fails repo's checks queued or running since
// before that no live job of kind (carrying check_id) will run: a unit's
// next check would otherwise wait for them forever.
func FailStrandedDriftChecks(ctx context.Context, tx bun.IDB, repo, kind string, before time.Time) (int, error) {
	res, err := tx.NewUpdate().Model((*DriftCheck)(nil)).
		Set("status = ?, error = ?, finished_at = now()", DriftFailed, "its job ended without finishing the plan").
		Where("dc.repository = ?", repo).Where("dc.status IN (?)", bun.In([]string{DriftQueued, DriftRunning})).
		Where("dc.created_at < ?", before).
		Where("NOT EXISTS (SELECT 1 FROM river_job AS j WHERE j.kind = ? AND j.state::text IN (?) AND (j.args->>'check_id')::bigint = dc.id)",
			kind, bun.In(liveJobStates)).Exec(ctx)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// DriftCheckByID finds a check with its output.
func DriftCheckByID(ctx context.Context, db bun.IDB, id int64) (*DriftCheck, error) {
	c := new(DriftCheck)
	err := db.NewSelect().Model(c).Where("id = ?", id).Scan(ctx)
	return c, notFound(err)
}

// StartDriftCheck moves a queued check to running (a running one stays
// running, its output cleared: its job runs again after a crash); false
// when it has ended.
func StartDriftCheck(ctx context.Context, db bun.IDB, id int64) (bool, error) {
	res, err := db.NewUpdate().Model((*DriftCheck)(nil)).Set("status = ?, started_at = now(), output = ''", DriftRunning).
		Where("id = ?", id).Where("status IN (?)", bun.In([]string{DriftQueued, DriftRunning})).Exec(ctx)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// AppendDriftOutput adds streamed output to a running check.
func AppendDriftOutput(ctx context.Context, db bun.IDB, id int64, text string) error {
	_, err := db.NewUpdate().Model((*DriftCheck)(nil)).Set("output = output || ?", text).
		Where("id = ?", id).Where("status = ?", DriftRunning).Exec(ctx)
	return err
}

// FinishDriftCheck records a check's outcome unless it ended already;
// false when it had.
func FinishDriftCheck(ctx context.Context, db bun.IDB, c *DriftCheck) (bool, error) {
	res, err := db.NewUpdate().Model(c).Column("status", "has_changes", "exit_code", "error").
		Set("finished_at = now()").WherePK().Where("status IN (?)", bun.In([]string{DriftQueued, DriftRunning})).Exec(ctx)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// PreviousDriftCheck is the latest finished check of the unit before id,
// nil when there is none.
func PreviousDriftCheck(ctx context.Context, db bun.IDB, repo, path string, id int64) (*DriftCheck, error) {
	c := new(DriftCheck)
	err := notFound(db.NewSelect().Model(c).ExcludeColumn("output").
		Where("repository = ?", repo).Where("path = ?", path).Where("id < ?", id).
		Where("status IN (?)", bun.In([]string{DriftSucceeded, DriftFailed})).
		OrderExpr("id DESC").Limit(1).Scan(ctx))
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return c, nil
}

// MarkDriftNotified records that a check's drift mail was queued.
func MarkDriftNotified(ctx context.Context, db bun.IDB, id int64) error {
	_, err := db.NewUpdate().Model((*DriftCheck)(nil)).Set("notified = true").Where("id = ?", id).Exec(ctx)
	return err
}

// DriftUnit is the latest finished check of a unit of the last sweep,
// with the latest run reconciling it.
type DriftUnit struct {
	DriftCheck     `bun:",extend"`
	ReconcileRunID *int64 `bun:"reconcile_run_id,scanonly"`
	ReconcileRun   string `bun:"reconcile_run_status,scanonly"`
	// Verdict is terraform's line "Plan: 0 to add, 1 to change, 0 to
	// destroy", cut out of the output by the database.
	Verdict string `bun:"verdict,scanonly"`
}

// DriftRepository is a repository with drift detection as /infra lists it.
type DriftRepository struct {
	Repository   string
	EverySeconds int
	Sweep        *DriftSweep // nil: not swept yet
	// Drifted and Failed are the units of the last sweep whose latest
	// finished check found changes, or failed, by path.
	Drifted, Failed []DriftUnit
	Checking        int // checks queued or running
}

// ListDrift reads, for each registered repository with drift detection,
// its last sweep and the units found drifted or failing, in four queries
// whatever their number.
func ListDrift(ctx context.Context, db bun.IDB) ([]DriftRepository, error) {
	var repos []Repository
	err := db.NewSelect().Model(&repos).Column("name", "drift_every_seconds").
		Where("removed_at IS NULL").Where("drift_every_seconds > 0").Order("name").Scan(ctx)
	if err != nil {
		return nil, err
	}
	return DriftOf(ctx, db, repos)
}

// DriftOf is ListDrift for repositories already read (/infra has them):
// those of repos with drift detection, in three queries whatever their
// number, none when no repository has it.
func DriftOf(ctx context.Context, db bun.IDB, all []Repository) ([]DriftRepository, error) {
	var repos []Repository
	var names []string
	for _, r := range all {
		if r.DriftEverySeconds > 0 && r.RemovedAt == nil {
			repos = append(repos, r)
			names = append(names, r.Name)
		}
	}
	if len(repos) == 0 {
		return nil, nil
	}
	var sweeps []DriftSweep
	if err := db.NewSelect().Model(&sweeps).Where("repository IN (?)", bun.In(names)).Scan(ctx); err != nil {
		return nil, err
	}
	// Per unit of the last sweep, its latest finished check through the
	// index (repository, path, id DESC): the time grows with the units,
	// not with the checks kept (docs/performance.md).
	var units []DriftUnit
	err := db.NewRaw(`SELECT dc.id, dc.repository, dc.path, dc.commit_sha, dc.status, dc.has_changes, dc.exit_code, dc.error,
			dc.notified, dc.created_at, dc.started_at, dc.finished_at,
			r.id AS reconcile_run_id, r.status AS reconcile_run_status,
			coalesce(substring(dc.output from 'Plan: [0-9]+ to add, [0-9]+ to change, [0-9]+ to destroy'), '') AS verdict
		FROM drift_sweeps AS ds
		CROSS JOIN LATERAL unnest(ds.units) AS u(path)
		JOIN LATERAL (SELECT c.* FROM drift_checks AS c
			WHERE c.repository = ds.repository AND c.path = u.path AND c.status IN (?)
			ORDER BY c.id DESC LIMIT 1) AS dc ON true
		LEFT JOIN LATERAL (SELECT run.id, run.status FROM runs AS run WHERE run.reconcile_check_id = dc.id
			ORDER BY run.id DESC LIMIT 1) AS r ON true
		WHERE ds.repository IN (?) AND (dc.status = ? OR dc.has_changes)
		ORDER BY dc.repository, dc.path`,
		bun.In([]string{DriftSucceeded, DriftFailed}), bun.In(names), DriftFailed).Scan(ctx, &units)
	if err != nil {
		return nil, err
	}
	var live []struct {
		Repository string `bun:"repository"`
		Count      int    `bun:"count"`
	}
	err = db.NewSelect().Model((*DriftCheck)(nil)).ColumnExpr("repository, count(*) AS count").
		Where("repository IN (?)", bun.In(names)).Where("status IN (?)", bun.In([]string{DriftQueued, DriftRunning})).
		GroupExpr("repository").Scan(ctx, &live)
	if err != nil {
		return nil, err
	}
	out := make([]DriftRepository, len(repos))
	index := map[string]int{}
	for i, r := range repos {
		out[i] = DriftRepository{Repository: r.Name, EverySeconds: r.DriftEverySeconds}
		index[r.Name] = i
	}
	for i := range sweeps {
		out[index[sweeps[i].Repository]].Sweep = &sweeps[i]
	}
	for _, u := range units {
		d := &out[index[u.Repository]]
		if u.Status == DriftFailed {
			d.Failed = append(d.Failed, u)
		} else {
			d.Drifted = append(d.Drifted, u)
		}
	}
	for _, l := range live {
		out[index[l.Repository]].Checking = l.Count
	}
	return out, nil
}

// LiveReconcileRun is the run not yet ended that reconciles the unit at
// path, nil when there is none.
func LiveReconcileRun(ctx context.Context, db bun.IDB, repo, path string) (*Run, error) {
	r := new(Run)
	err := notFound(db.NewSelect().Model(r).
		Join("JOIN drift_checks AS dc ON dc.id = run.reconcile_check_id").
		Where("run.repository = ?", repo).Where("dc.path = ?", path).
		Where("run.status NOT IN (?)", bun.In([]string{RunSucceeded, RunFailed})).
		OrderExpr("run.id DESC").Limit(1).Scan(ctx))
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return r, nil
}

// LatestReconcileRun is the latest run reconciling check id, nil when
// there is none.
func LatestReconcileRun(ctx context.Context, db bun.IDB, checkID int64) (*Run, error) {
	r := new(Run)
	err := notFound(db.NewSelect().Model(r).Where("reconcile_check_id = ?", checkID).OrderExpr("id DESC").Limit(1).Scan(ctx))
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return r, nil
}

// PruneDriftChecks deletes repo's checks that finished before before,
// except each unit's latest finished check (what /infra lists) and checks
// a run reconciled; it returns how many it deleted.
func PruneDriftChecks(ctx context.Context, db bun.IDB, repo string, before time.Time) (int, error) {
	res, err := db.NewDelete().Model((*DriftCheck)(nil)).
		Where("dc.repository = ?", repo).Where("dc.status IN (?)", bun.In([]string{DriftSucceeded, DriftFailed})).
		Where("dc.finished_at < ?", before).
		Where("EXISTS (SELECT 1 FROM drift_checks AS newer WHERE newer.repository = dc.repository AND newer.path = dc.path AND newer.id > dc.id AND newer.status IN (?))",
			bun.In([]string{DriftSucceeded, DriftFailed})).
		Where("NOT EXISTS (SELECT 1 FROM runs AS run WHERE run.reconcile_check_id = dc.id)").Exec(ctx)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}
