package models

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Run statuses.
const (
	RunQueued    = "queued" // waits for the repository's merge lock
	RunScanning  = "scanning"
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
)

// Execution statuses (the seed's) and the steps of a running one.
const (
	ExecWaiting   = "waiting"
	ExecRunning   = "running"
	ExecSucceeded = "succeeded"
	ExecFailed    = "failed"
	ExecAborted   = "aborted"

	StepPlanning = "planning"
	StepVoting   = "voting"
	StepApplying = "applying"
	// StepInterrupted is an apply that began and recorded no outcome (its
	// worker died): its state is unknown, and it waits for an operator.
	StepInterrupted = "interrupted"
)

// Run is the deployment of one merged pull request.
type Run struct {
	bun.BaseModel `bun:"table:runs,alias:run"`

	ID           int64 `bun:",pk,autoincrement"`
	Repository   string
	PRNumber     int    `bun:"pr_number"`
	PRTitle      string `bun:"pr_title"`
	BaseRef      string
	HeadRef      string
	HeadSHA      string `bun:"head_sha"`
	MergeCommit  string
	BaseCommit   string
	Scan         string
	Status       string
	Error        string
	DeletedUnits []string `bun:",array"`
	ScanJobID    *int64
	// ReconcileCheckID marks a run that reconciles a drifted unit (no pull
	// request): the drift check it reconciles.
	ReconcileCheckID *int64
	CreatedAt        time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	StartedAt        *time.Time
	FinishedAt       *time.Time
}

// Ended reports whether the run is over.
func (r *Run) Ended() bool { return r.Status == RunSucceeded || r.Status == RunFailed }

// InsertRun records a queued run.
func InsertRun(ctx context.Context, tx bun.IDB, r *Run) error {
	if r.DeletedUnits == nil {
		r.DeletedUnits = []string{}
	}
	if r.Status == "" {
		r.Status = RunQueued
	}
	_, err := tx.NewInsert().Model(r).Returning("id, status, created_at").Exec(ctx)
	return err
}

// RunByID finds a run.
func RunByID(ctx context.Context, db bun.IDB, id int64) (*Run, error) {
	r := new(Run)
	err := db.NewSelect().Model(r).Where("id = ?", id).Scan(ctx)
	return r, notFound(err)
}

// LockRun finds a run and locks it until the transaction ends: the one
// place that serialises the transitions of a run and its executions.
func LockRun(ctx context.Context, tx bun.IDB, id int64) (*Run, error) {
	r := new(Run)
	err := tx.NewSelect().Model(r).Where("id = ?", id).For("UPDATE").Scan(ctx)
	return r, notFound(err)
}

// UpdateRun writes the given columns of r.
func UpdateRun(ctx context.Context, tx bun.IDB, r *Run, columns ...string) error {
	_, err := tx.NewUpdate().Model(r).Column(columns...).WherePK().Exec(ctx)
	return err
}

// RunFilter narrows ListRuns.
type RunFilter struct {
	Repository string
	PRNumber   int
	Status     string
	BeforeID   int64 // page backwards: runs older than this id
	Limit      int
}

// ListRuns lists runs, newest first.
func ListRuns(ctx context.Context, db bun.IDB, f RunFilter) ([]Run, error) {
	var runs []Run
	q := runFilterQuery(db.NewSelect().Model(&runs), f)
	if f.Limit > 0 {
		q = q.Limit(int64(f.Limit))
	}
	return runs, q.Scan(ctx)
}

// runFilterQuery narrows q (over runs) to f, newest first.
func runFilterQuery(q *bun.SelectQuery, f RunFilter) *bun.SelectQuery {
	q = q.OrderExpr("run.id DESC")
	if f.Repository != "" {
		q = q.Where("run.repository = ?", f.Repository)
	}
	if f.PRNumber > 0 {
		q = q.Where("run.pr_number = ?", f.PRNumber)
	}
	if f.Status != "" {
		q = q.Where("run.status = ?", f.Status)
	}
	if f.BeforeID > 0 {
		q = q.Where("run.id < ?", f.BeforeID)
	}
	return q
}

// RunListing is a run as listings show it: with its executions counted by
// status.
type RunListing struct {
	Run             `bun:",extend"`
	ExecutionCounts map[string]int `bun:"execution_counts,scanonly"`
}

// RunPage is one page of a runs listing, newest first.
type RunPage struct {
	Runs []RunListing
	More bool // older runs match the filter too
}

// ListRunPage lists a page of f.Limit runs with their executions counted,
// filtered and paged in one query, and says whether there are more.
func ListRunPage(ctx context.Context, db bun.IDB, f RunFilter) (RunPage, error) {
	var runs []RunListing
	q := db.NewSelect().Model(&runs).ColumnExpr("run.*").
		// The counts of each run come with it, so a page is one query.
		ColumnExpr("(SELECT coalesce(jsonb_object_agg(c.status, c.n), '{}') FROM " +
			"(SELECT x.status, count(*) AS n FROM executions AS x WHERE x.run_id = run.id GROUP BY x.status) AS c) AS execution_counts")
	q = runFilterQuery(q, f)
	if f.Limit > 0 {
		q = q.Limit(int64(f.Limit) + 1) // one more says whether there are older runs
	}
	if err := q.Scan(ctx); err != nil {
		return RunPage{}, fmt.Errorf("listing runs: %w", err)
	}
	page := RunPage{Runs: runs}
	if f.Limit > 0 && len(runs) > f.Limit {
		page.Runs, page.More = runs[:f.Limit], true
	}
	return page, nil
}

// RunOfMerge finds the run of a merge commit, if there is one.
func RunOfMerge(ctx context.Context, db bun.IDB, repo, mergeCommit string) (*Run, error) {
	r := new(Run)
	err := db.NewSelect().Model(r).Where("repository = ?", repo).Where("merge_commit = ?", mergeCommit).
		Where("reconcile_check_id IS NULL").OrderExpr("id").Limit(1).Scan(ctx)
	return r, notFound(err)
}

// OldestQueuedRun is the run that takes a released merge lock next.
func OldestQueuedRun(ctx context.Context, tx bun.IDB, repo string) (*Run, error) {
	r := new(Run)
	err := tx.NewSelect().Model(r).Where("repository = ?", repo).Where("status = ?", RunQueued).
		OrderExpr("id").Limit(1).Scan(ctx)
	return r, notFound(err)
}

// MergeLock is a repository's merge lock, held by one run.
type MergeLock struct {
	bun.BaseModel `bun:"table:merge_locks,alias:ml"`

	Repository string `bun:",pk"`
	RunID      int64
	PRNumber   int       `bun:"pr_number"`
	LockedAt   time.Time `bun:",nullzero,notnull,default:current_timestamp"`
}

// TakeMergeLock takes repo's merge lock for run; false when another run
// holds it. The primary key makes two takers at the same moment safe: one
// inserts, the other finds the row.
func TakeMergeLock(ctx context.Context, tx bun.IDB, r *Run) (bool, error) {
	lock := &MergeLock{Repository: r.Repository, RunID: r.ID, PRNumber: r.PRNumber}
	res, err := tx.NewInsert().Model(lock).On("CONFLICT (repository) DO NOTHING").Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("taking the merge lock of %s: %w", r.Repository, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// BackdateMergeLock sets when run's lock of its repository was taken: for
// rows written as history (the demo), whose run took it before now.
func BackdateMergeLock(ctx context.Context, tx bun.IDB, r *Run, at time.Time) error {
	_, err := tx.NewUpdate().Model((*MergeLock)(nil)).Set("locked_at = ?", at).
		Where("repository = ?", r.Repository).Where("run_id = ?", r.ID).Exec(ctx)
	return err
}

// ReleaseMergeLock releases repo's lock if run holds it.
func ReleaseMergeLock(ctx context.Context, tx bun.IDB, repo string, runID int64) error {
	_, err := tx.NewDelete().Model((*MergeLock)(nil)).Where("repository = ?", repo).Where("run_id = ?", runID).Exec(ctx)
	return err
}

// MergeLockOf returns repo's lock, or nil when it is free.
func MergeLockOf(ctx context.Context, db bun.IDB, repo string) (*MergeLock, error) {
	var locks []MergeLock
	if err := db.NewSelect().Model(&locks).Where("repository = ?", repo).Scan(ctx); err != nil {
		return nil, err
	}
	if len(locks) == 0 {
		return nil, nil
	}
	return &locks[0], nil
}

// Execution is one unit of a run: the seed's record.
type Execution struct {
	bun.BaseModel `bun:"table:executions,alias:x"`

	ID                int64 `bun:",pk,autoincrement"`
	ExecutionID       string
	RunID             int64
	CfgPath           string
	CfgDeps           []string `bun:",array"`
	AccountName       string
	AccountPath       string
	AccountDeps       []string `bun:",array"`
	InitCommand       []string `bun:",array"`
	PlanCommand       []string `bun:",array"`
	ApplyCommand      []string `bun:",array"`
	PlanRoleARN       string   `bun:"plan_role_arn"`
	ApplyRoleARN      string   `bun:"apply_role_arn"`
	Voters            []string `bun:",array"`
	MinApprovalCount  int
	MinRejectionCount int
	Status            string
	Step              string
	PlanOutput        string
	PlanExitCode      *int
	HasChanges        *bool
	PlanFile          []byte `bun:",nullzero"`
	ApplyOutput       string
	ApplyExitCode     *int
	Error             string
	ApprovalID        *int64
	ReadyAt           *time.Time
	StartedAt         *time.Time
	PlanStartedAt     *time.Time
	ApplyStartedAt    *time.Time
	FinishedAt        *time.Time
	// RollbackOf marks a rollback execution: the execution whose new
	// provider resources it destroys (models/infra_rollback_runs.go).
	RollbackOf *int64
}

// Ended reports whether the execution is over.
func (x *Execution) Ended() bool {
	return x.Status == ExecSucceeded || x.Status == ExecFailed || x.Status == ExecAborted
}

// InsertExecutions records a run's executions.
func InsertExecutions(ctx context.Context, tx bun.IDB, xs []*Execution) error {
	if len(xs) == 0 {
		return nil
	}
	_, err := tx.NewInsert().Model(&xs).Returning("id").Exec(ctx)
	return uniqueViolation(err)
}

// ExecutionsOfRun lists a run's executions without their outputs and plan files.
func ExecutionsOfRun(ctx context.Context, db bun.IDB, runID int64) ([]Execution, error) {
	var xs []Execution
	err := db.NewSelect().Model(&xs).ExcludeColumn("plan_output", "apply_output", "plan_file").
		Where("run_id = ?", runID).OrderExpr("id").Scan(ctx)
	return xs, err
}

// ExecutionByExecutionID finds an execution by its seed id, everything included.
func ExecutionByExecutionID(ctx context.Context, db bun.IDB, executionID string) (*Execution, error) {
	x := new(Execution)
	err := db.NewSelect().Model(x).Where("execution_id = ?", executionID).Scan(ctx)
	return x, notFound(err)
}

// ExecutionByID finds an execution by its row id, everything included.
func ExecutionByID(ctx context.Context, db bun.IDB, id int64) (*Execution, error) {
	x := new(Execution)
	err := db.NewSelect().Model(x).Where("id = ?", id).Scan(ctx)
	return x, notFound(err)
}

// UpdateExecution writes the given columns of x.
func UpdateExecution(ctx context.Context, tx bun.IDB, x *Execution, columns ...string) error {
	_, err := tx.NewUpdate().Model(x).Column(columns...).WherePK().Exec(ctx)
	return err
}

// ClearApplyStarted forgets that an apply began, when its command never
// started (git or STS failed first): the next attempt applies.
func ClearApplyStarted(ctx context.Context, db bun.IDB, id int64) error {
	_, err := db.NewUpdate().Model((*Execution)(nil)).Set("apply_started_at = NULL").
		Where("id = ?", id).Where("status = ?", ExecRunning).Where("step = ?", StepApplying).Exec(ctx)
	return err
}

// AppendExecutionOutput adds streamed output of the step under way
// (plan_output while planning, apply_output while applying).
func AppendExecutionOutput(ctx context.Context, db bun.IDB, id int64, step, text string) error {
	column := "plan_output"
	if step == StepApplying {
		column = "apply_output"
	}
	_, err := db.NewUpdate().Model((*Execution)(nil)).Set("? = ? || ?", bun.Ident(column), bun.Ident(column), text).
		Where("id = ?", id).Where("status = ?", ExecRunning).Where("step = ?", step).Exec(ctx)
	return err
}

// ExecutionOutput returns an execution's output of step from character
// offset on, the offset after it, and where the execution is, for a page
// following it live.
func ExecutionOutput(ctx context.Context, db bun.IDB, executionID, step string, offset int) (out OutputTail, err error) {
	column := "plan_output"
	if step == StepApplying {
		column = "apply_output"
	}
	err = db.NewSelect().Model((*Execution)(nil)).
		ColumnExpr("substr(?, ?) AS text", bun.Ident(column), offset+1).
		ColumnExpr("char_length(?) AS next", bun.Ident(column)).
		Column("status", "step").
		Where("execution_id = ?", executionID).Scan(ctx, &out)
	return out, notFound(err)
}

// OutputTail is the output a page has not shown yet.
type OutputTail struct {
	Text   string
	Next   int
	Status string
	Step   string
}

// ExecutionsAwaitingVoter lists executions whose pending approval names voter.
func ExecutionsAwaitingVoter(ctx context.Context, db bun.IDB, voter string) ([]Execution, error) {
	var xs []Execution
	err := db.NewSelect().Model(&xs).ExcludeColumn("plan_output", "apply_output", "plan_file").
		Join("JOIN approvals AS ap ON ap.id = x.approval_id").
		Where("ap.state = ?", ApprovalPending).Where("? = ANY(ap.voters)", voter).
		Where("x.status = ?", ExecRunning).Where("x.step = ?", StepVoting).
		OrderExpr("x.id").Scan(ctx)
	return xs, err
}

// RunsByIDs finds runs by id, in any order; ids not found are left out.
func RunsByIDs(ctx context.Context, db bun.IDB, ids []int64) ([]Run, error) {
	var runs []Run
	if len(ids) == 0 {
		return runs, nil
	}
	err := db.NewSelect().Model(&runs).Where("id IN (?)", bun.In(ids)).Scan(ctx)
	return runs, err
}

// liveJobStates are the states of a River job that will still run.
var liveJobStates = []string{"available", "pending", "running", "retryable", "scheduled"}

// StrandedExecutions are the running executions, planning or applying
// since before, that no live job of the given kinds (carrying
// execution_id) will ever move on: their job was cancelled, or discarded
// after its worker died in its last attempt.
func StrandedExecutions(ctx context.Context, db bun.IDB, kinds []string, before time.Time) ([]int64, error) {
	var ids []int64
	err := db.NewSelect().Model((*Execution)(nil)).Column("x.id").
		Where("x.status = ?", ExecRunning).Where("x.step IN (?)", bun.In([]string{StepPlanning, StepApplying})).
		Where("x.started_at < ?", before).
		Where("NOT EXISTS (SELECT 1 FROM river_job AS j WHERE j.kind IN (?) AND j.state::text IN (?) AND (j.args->>'execution_id')::bigint = x.id)",
			bun.In(kinds), bun.In(liveJobStates)).
		Scan(ctx, &ids)
	return ids, err
}

// StrandedRuns are the runs scanning since before with no live job of
// kind (carrying run_id).
func StrandedRuns(ctx context.Context, db bun.IDB, kind string, before time.Time) ([]int64, error) {
	var ids []int64
	err := db.NewSelect().Model((*Run)(nil)).Column("run.id").
		Where("run.status = ?", RunScanning).Where("run.started_at < ?", before).
		Where("NOT EXISTS (SELECT 1 FROM river_job AS j WHERE j.kind = ? AND j.state::text IN (?) AND (j.args->>'run_id')::bigint = run.id)",
			kind, bun.In(liveJobStates)).
		Scan(ctx, &ids)
	return ids, err
}

// WaitingRuns are, per repository whose merge lock is free, the oldest
// queued run, queued before, when no live job of kind will start it.
func WaitingRuns(ctx context.Context, db bun.IDB, kind string, before time.Time) ([]int64, error) {
	var ids []int64
	err := db.NewSelect().Model((*Run)(nil)).ColumnExpr("min(run.id)").
		Where("run.status = ?", RunQueued).Where("run.created_at < ?", before).
		Where("NOT EXISTS (SELECT 1 FROM merge_locks AS ml WHERE ml.repository = run.repository)").
		Where("NOT EXISTS (SELECT 1 FROM river_job AS j WHERE j.kind = ? AND j.state::text IN (?) AND (j.args->>'run_id')::bigint = run.id)",
			kind, bun.In(liveJobStates)).
		Group("run.repository").Scan(ctx, &ids)
	return ids, err
}

// ExecutionsByExecutionIDs finds executions by their execution ids, in any
// order, with their plan output but neither the apply output nor the plan
// file; ids not found are left out.
func ExecutionsByExecutionIDs(ctx context.Context, db bun.IDB, ids []string) ([]Execution, error) {
	var xs []Execution
	if len(ids) == 0 {
		return xs, nil
	}
	err := db.NewSelect().Model(&xs).ExcludeColumn("apply_output", "plan_file").
		Where("execution_id IN (?)", bun.In(ids)).Scan(ctx)
	return xs, err
}

// InfraActivity is what the home page says of the infrastructure area.
type InfraActivity struct {
	Repositories int
	RunsActive   int // queued, scanning or running
	Voting       int // executions waiting for votes
}

// InfraActivityNow counts it in one query.
func InfraActivityNow(ctx context.Context, db bun.IDB) (InfraActivity, error) {
	var a InfraActivity
	err := db.NewRaw(`SELECT
		(SELECT count(*) FROM repositories WHERE removed_at IS NULL),
		(SELECT count(*) FROM runs WHERE status IN (?, ?, ?)),
		(SELECT count(*) FROM executions WHERE status = ? AND step = ?)`,
		RunQueued, RunScanning, RunRunning, ExecRunning, StepVoting).Scan(ctx, &a.Repositories, &a.RunsActive, &a.Voting)
	if err != nil {
		return a, fmt.Errorf("counting the infrastructure area's activity: %w", err)
	}
	return a, nil
}
