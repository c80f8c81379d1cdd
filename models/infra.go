package models

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Pull request states.
const (
	PROpen   = "open"
	PRClosed = "closed"
	PRMerged = "merged"
)

// Plan (and execution) statuses of a pull request's unit plan.
const (
	PlanQueued    = "queued"
	PlanRunning   = "running"
	PlanSucceeded = "succeeded"
	PlanFailed    = "failed"
	PlanCanceled  = "canceled"
)

// Repository is an infrastructure repository as synced from gantry.yaml.
type Repository struct {
	bun.BaseModel `bun:"table:repositories,alias:repo"`

	Name              string     `bun:",pk" json:"name"`
	URL               string     `json:"url"`
	Trunk             string     `json:"trunk"`
	Scan              string     `json:"scan"`
	WebhookSecretEnv  string     `json:"-"`
	StatusTokenEnv    string     `json:"-"`
	InitCommand       []string   `bun:",array" json:"init_command"`
	PlanCommand       []string   `bun:",array" json:"plan_command"`
	ApplyCommand      []string   `bun:",array" json:"apply_command"`
	DestroyCommand    []string   `bun:",array" json:"destroy_command"`
	PlanStatuses      bool       `json:"plan_statuses"`
	MergeLockStatuses bool       `json:"merge_lock_statuses"`
	PlanForks         bool       `json:"plan_forks"`
	GitHubFullName    string     `bun:"github_full_name" json:"github_full_name,omitempty"`
	RemovedAt         *time.Time `json:"removed_at,omitempty"`
	UpdatedAt         time.Time  `bun:",nullzero,notnull,default:current_timestamp" json:"updated_at"`

	Accounts []Account `bun:"rel:has-many,join:name=repository" json:"accounts"`
}

// Account is a path prefix of a repository with its roles and voters.
type Account struct {
	bun.BaseModel `bun:"table:accounts"`

	Repository    string   `bun:",pk" json:"-"`
	Name          string   `bun:",pk" json:"name"`
	Path          string   `json:"path"`
	DependsOn     []string `bun:",array" json:"depends_on"`
	PlanRole      string   `json:"plan_role,omitempty"`
	ApplyRole     string   `json:"apply_role,omitempty"`
	Voters        []string `bun:",array" json:"voters"`
	MinApprovals  int      `json:"min_approvals"`
	MinRejections int      `json:"min_rejections"`
}

// UpsertRepository registers or updates a repository (un-removing it) and
// replaces its accounts.
func UpsertRepository(ctx context.Context, tx bun.IDB, r *Repository) error {
	_, err := tx.NewInsert().Model(r).
		On("CONFLICT (name) DO UPDATE").
		Set("url = EXCLUDED.url, trunk = EXCLUDED.trunk, scan = EXCLUDED.scan").
		Set("webhook_secret_env = EXCLUDED.webhook_secret_env, status_token_env = EXCLUDED.status_token_env").
		Set("init_command = EXCLUDED.init_command, plan_command = EXCLUDED.plan_command").
		Set("apply_command = EXCLUDED.apply_command, destroy_command = EXCLUDED.destroy_command").
		Set("plan_statuses = EXCLUDED.plan_statuses, merge_lock_statuses = EXCLUDED.merge_lock_statuses, plan_forks = EXCLUDED.plan_forks").
		Set("removed_at = NULL, updated_at = now()").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("registering repository %s: %w", r.Name, err)
	}
	if _, err := tx.NewDelete().Model((*Account)(nil)).Where("repository = ?", r.Name).Exec(ctx); err != nil {
		return err
	}
	if len(r.Accounts) > 0 {
		for i := range r.Accounts {
			r.Accounts[i].Repository = r.Name
		}
		if _, err := tx.NewInsert().Model(&r.Accounts).Exec(ctx); err != nil {
			return fmt.Errorf("registering the accounts of %s: %w", r.Name, err)
		}
	}
	return nil
}

// RemoveRepositoriesExcept marks every repository not in keep as removed;
// its history stays.
func RemoveRepositoriesExcept(ctx context.Context, tx bun.IDB, keep []string) ([]string, error) {
	var removed []string
	q := tx.NewUpdate().Model((*Repository)(nil)).Set("removed_at = now()").Where("removed_at IS NULL")
	if len(keep) > 0 {
		q = q.Where("name NOT IN (?)", bun.In(keep))
	}
	err := q.Returning("name").Scan(ctx, &removed)
	return removed, err
}

// ListRepositories returns the registered repositories with their accounts.
func ListRepositories(ctx context.Context, db bun.IDB) ([]Repository, error) {
	var repos []Repository
	err := db.NewSelect().Model(&repos).Relation("Accounts").
		Where("removed_at IS NULL").Order("name").Scan(ctx)
	return repos, err
}

// RepositoryByName finds a registered repository with its accounts.
func RepositoryByName(ctx context.Context, db bun.IDB, name string) (*Repository, error) {
	r := new(Repository)
	err := db.NewSelect().Model(r).Relation("Accounts").Where("name = ?", name).Scan(ctx)
	return r, notFound(err)
}

// LockRepository locks a repository's row until the transaction ends: runs
// taking and releasing its merge lock do so one at a time, so a run that
// finds the lock held is always seen by the release that follows.
func LockRepository(ctx context.Context, tx bun.IDB, name string) error {
	var got string
	err := tx.NewSelect().Model((*Repository)(nil)).Column("name").Where("name = ?", name).For("UPDATE").Scan(ctx, &got)
	return notFound(err)
}

// SetGitHubFullName records where a repository lives on GitHub.
func SetGitHubFullName(ctx context.Context, db bun.IDB, repo, fullName string) error {
	_, err := db.NewUpdate().Model((*Repository)(nil)).Set("github_full_name = ?", fullName).
		Where("name = ?", repo).Where("github_full_name <> ?", fullName).Exec(ctx)
	return err
}

// WebhookDelivery is a GitHub delivery Gantry accepted.
type WebhookDelivery struct {
	bun.BaseModel `bun:"table:webhook_deliveries,alias:d"`

	DeliveryID string    `bun:",pk" json:"delivery_id"`
	Event      string    `json:"event"`
	Action     string    `json:"action"`
	Repository string    `json:"repository"`
	Payload    []byte    `json:"-"`
	ReceivedAt time.Time `bun:",nullzero,notnull,default:current_timestamp" json:"received_at"`
}

// RecordDelivery stores d; it reports false (and changes nothing) when the
// delivery id was seen before.
func RecordDelivery(ctx context.Context, tx bun.IDB, d *WebhookDelivery) (bool, error) {
	res, err := tx.NewInsert().Model(d).On("CONFLICT (delivery_id) DO NOTHING").Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("recording delivery %s: %w", d.DeliveryID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// DeliveryByID finds a recorded delivery.
func DeliveryByID(ctx context.Context, db bun.IDB, id string) (*WebhookDelivery, error) {
	d := new(WebhookDelivery)
	err := db.NewSelect().Model(d).Where("delivery_id = ?", id).Scan(ctx)
	return d, notFound(err)
}

// PullRequest is the latest Gantry knows of a pull request.
type PullRequest struct {
	bun.BaseModel `bun:"table:pull_requests,alias:pr"`

	Repository     string    `bun:",pk" json:"repository"`
	Number         int       `bun:",pk" json:"number"`
	Title          string    `json:"title"`
	Author         string    `json:"author"`
	HTMLURL        string    `bun:"html_url" json:"html_url"`
	BaseRef        string    `json:"base_ref"`
	HeadRef        string    `json:"head_ref"`
	HeadSHA        string    `bun:"head_sha" json:"head_sha"`
	State          string    `json:"state"`
	MergeCommitSHA string    `bun:"merge_commit_sha" json:"merge_commit_sha,omitempty"`
	PlanError      string    `json:"plan_error,omitempty"`
	EventAt        time.Time `json:"-"`
	DeliveryAt     time.Time `json:"-"`
	UpdatedAt      time.Time `bun:",nullzero,notnull,default:current_timestamp" json:"updated_at"`

	Plans []PRPlan `bun:"-" json:"plans,omitempty"`
}

// UpsertPullRequest records what a delivery says of a pull request unless
// a later delivery was applied already (by GitHub's updated_at, then when
// Gantry received it); false when it was, and nothing changed.
func UpsertPullRequest(ctx context.Context, tx bun.IDB, pr *PullRequest) (bool, error) {
	res, err := tx.NewInsert().Model(pr).On("CONFLICT (repository, number) DO UPDATE").
		Set("title = EXCLUDED.title, author = EXCLUDED.author, html_url = EXCLUDED.html_url").
		Set("base_ref = EXCLUDED.base_ref, head_ref = EXCLUDED.head_ref, head_sha = EXCLUDED.head_sha").
		Set("state = EXCLUDED.state, merge_commit_sha = EXCLUDED.merge_commit_sha").
		Set("plan_error = CASE WHEN pr.head_sha = EXCLUDED.head_sha THEN pr.plan_error ELSE '' END").
		Set("event_at = EXCLUDED.event_at, delivery_at = EXCLUDED.delivery_at, updated_at = now()").
		Where("(pr.event_at, pr.delivery_at) <= (EXCLUDED.event_at, EXCLUDED.delivery_at)").
		Exec(ctx)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// LockPullRequest finds a pull request and locks it until the transaction
// ends: a delivery changing it and a scan queueing plans for its head take
// turns.
func LockPullRequest(ctx context.Context, tx bun.IDB, repo string, number int) (*PullRequest, error) {
	pr := new(PullRequest)
	err := tx.NewSelect().Model(pr).Where("repository = ?", repo).Where("number = ?", number).For("UPDATE").Scan(ctx)
	return pr, notFound(err)
}

// PullRequestByNumber finds a pull request.
func PullRequestByNumber(ctx context.Context, db bun.IDB, repo string, number int) (*PullRequest, error) {
	pr := new(PullRequest)
	err := db.NewSelect().Model(pr).Where("repository = ?", repo).Where("number = ?", number).Scan(ctx)
	return pr, notFound(err)
}

// SetPlanError records why a pull request's head could not be planned
// (empty: it could).
func SetPlanError(ctx context.Context, db bun.IDB, repo string, number int, headSHA, msg string) error {
	_, err := db.NewUpdate().Model((*PullRequest)(nil)).Set("plan_error = ?", msg).
		Where("repository = ?", repo).Where("number = ?", number).Where("head_sha = ?", headSHA).Exec(ctx)
	return err
}

// OpenPullRequests lists the open pull requests of repo ("" for all),
// newest first.
func OpenPullRequests(ctx context.Context, db bun.IDB, repo string) ([]PullRequest, error) {
	var prs []PullRequest
	q := db.NewSelect().Model(&prs).Where("state = ?", PROpen).OrderExpr("updated_at DESC")
	if repo != "" {
		q = q.Where("repository = ?", repo)
	}
	return prs, q.Scan(ctx)
}

// PRPlan is one changed unit of a pull request planned at one head commit.
type PRPlan struct {
	bun.BaseModel `bun:"table:pr_plans,alias:pp"`

	ID         int64      `bun:",pk,autoincrement" json:"id"`
	Repository string     `json:"repository"`
	PRNumber   int        `bun:"pr_number" json:"pr_number"`
	HeadSHA    string     `bun:"head_sha" json:"head_sha"`
	Path       string     `json:"path"`
	Status     string     `json:"status"`
	ExitCode   *int       `json:"exit_code,omitempty"`
	HasChanges *bool      `json:"has_changes,omitempty"`
	Output     string     `json:"output,omitempty"`
	Error      string     `json:"error,omitempty"`
	JobID      *int64     `json:"-"`
	Generation int        `bun:",nullzero,notnull,default:1" json:"-"`
	CreatedAt  time.Time  `bun:",nullzero,notnull,default:current_timestamp" json:"created_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// InsertPRPlans queues plans and returns those to run: a plan of the same
// unit at the same head already there is kept (a redelivered event plans
// nothing twice) unless it was canceled (the pull request was reopened).
func InsertPRPlans(ctx context.Context, tx bun.IDB, plans []*PRPlan) ([]*PRPlan, error) {
	if len(plans) == 0 {
		return nil, nil
	}
	var queued []*PRPlan
	err := tx.NewInsert().Model(&plans).
		On("CONFLICT (repository, pr_number, head_sha, path) DO UPDATE").
		Set("status = EXCLUDED.status, output = '', error = '', exit_code = NULL, has_changes = NULL, started_at = NULL, finished_at = NULL").
		Set("generation = pp.generation + 1").
		Where("pp.status = ?", PlanCanceled).
		Returning("*").Scan(ctx, &queued)
	return queued, err
}

// CancelOlderPlans cancels the queued and running plans of a pull request
// at any head but headSHA, and returns them.
func CancelOlderPlans(ctx context.Context, tx bun.IDB, repo string, number int, headSHA string) ([]PRPlan, error) {
	var canceled []PRPlan
	err := tx.NewUpdate().Model((*PRPlan)(nil)).
		Set("status = ?, finished_at = now()", PlanCanceled).
		Where("repository = ?", repo).Where("pr_number = ?", number).Where("head_sha <> ?", headSHA).
		Where("status IN (?)", bun.In([]string{PlanQueued, PlanRunning})).
		Returning("*").Scan(ctx, &canceled)
	return canceled, err
}

// SetPRPlanJob records which job plans p.
func SetPRPlanJob(ctx context.Context, tx bun.IDB, planID, jobID int64) error {
	_, err := tx.NewUpdate().Model((*PRPlan)(nil)).Set("job_id = ?", jobID).Where("id = ?", planID).Exec(ctx)
	return err
}

// PRPlanByID finds a plan.
func PRPlanByID(ctx context.Context, db bun.IDB, id int64) (*PRPlan, error) {
	p := new(PRPlan)
	err := db.NewSelect().Model(p).Where("id = ?", id).Scan(ctx)
	return p, notFound(err)
}

// StartPRPlan moves a queued plan of generation to running; false when it
// is no longer queued (canceled by a newer push, or already taken) or was
// queued again since (a later generation has its own job).
func StartPRPlan(ctx context.Context, db bun.IDB, id int64, generation int) (bool, error) {
	res, err := db.NewUpdate().Model((*PRPlan)(nil)).Set("status = ?, started_at = now(), output = ''", PlanRunning).
		Where("id = ?", id).Where("generation = ?", generation).
		Where("status IN (?)", bun.In([]string{PlanQueued, PlanRunning})).Exec(ctx)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// AppendPRPlanOutput adds streamed output to a running plan (a plan no
// longer running takes none).
func AppendPRPlanOutput(ctx context.Context, db bun.IDB, id int64, text string) error {
	_, err := db.NewUpdate().Model((*PRPlan)(nil)).Set("output = output || ?", text).
		Where("id = ?", id).Where("status = ?", PlanRunning).Exec(ctx)
	return err
}

// FinishPRPlan records a plan's outcome unless it was canceled meanwhile;
// false when it was.
func FinishPRPlan(ctx context.Context, db bun.IDB, p *PRPlan) (bool, error) {
	res, err := db.NewUpdate().Model(p).Column("status", "exit_code", "has_changes", "error").
		Set("finished_at = now()").WherePK().Where("status = ?", PlanRunning).Exec(ctx)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ForceFinishPRPlan records the outcome of a plan of generation that is
// queued or running, whoever holds it (a plan given up on); false when it
// was not.
func ForceFinishPRPlan(ctx context.Context, db bun.IDB, p *PRPlan, generation int) (bool, error) {
	res, err := db.NewUpdate().Model(p).Column("status", "error").Set("finished_at = now()").
		WherePK().Where("generation = ?", generation).
		Where("status IN (?)", bun.In([]string{PlanQueued, PlanRunning})).Exec(ctx)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// PlansOfPullRequest lists the plans of a pull request at headSHA.
func PlansOfPullRequest(ctx context.Context, db bun.IDB, repo string, number int, headSHA string) ([]PRPlan, error) {
	var plans []PRPlan
	err := db.NewSelect().Model(&plans).ExcludeColumn("output").
		Where("repository = ?", repo).Where("pr_number = ?", number).Where("head_sha = ?", headSHA).
		Order("path").Scan(ctx)
	return plans, err
}

// PRPlanOutput returns a plan's output from character offset on, the
// offset after it, and the plan's status, for a page following it live.
func PRPlanOutput(ctx context.Context, db bun.IDB, id int64, offset int) (out OutputTail, err error) {
	err = db.NewSelect().Model((*PRPlan)(nil)).
		ColumnExpr("substr(output, ?) AS text", offset+1).
		ColumnExpr("char_length(output) AS next").
		Column("status").
		Where("id = ?", id).Scan(ctx, &out)
	return out, notFound(err)
}

// StrandedPlan is a pull request plan no job will run.
type StrandedPlan struct {
	ID         int64 `bun:"id"`
	Generation int   `bun:"generation"`
}

// StrandedPlans are the queued or running plans, created before, with no
// live job of kind for their generation (carrying plan_id and generation).
func StrandedPlans(ctx context.Context, db bun.IDB, kind string, before time.Time) ([]StrandedPlan, error) {
	var out []StrandedPlan
	err := db.NewSelect().Model((*PRPlan)(nil)).Column("pp.id", "pp.generation").
		Where("pp.status IN (?)", bun.In([]string{PlanQueued, PlanRunning})).Where("pp.created_at < ?", before).
		Where("NOT EXISTS (SELECT 1 FROM river_job AS j WHERE j.kind = ? AND j.state::text IN (?) AND (j.args->>'plan_id')::bigint = pp.id AND (j.args->>'generation')::int = pp.generation)",
			kind, bun.In(liveJobStates)).
		Scan(ctx, &out)
	return out, err
}

// LiveJobsOf lists the ids of the live jobs of kinds whose args carry key
// = value (the jobs working on one execution, say).
func LiveJobsOf(ctx context.Context, db bun.IDB, kinds []string, key string, value int64) ([]int64, error) {
	var ids []int64
	err := db.NewSelect().TableExpr("river_job AS j").Column("j.id").
		Where("j.kind IN (?)", bun.In(kinds)).Where("j.state::text IN (?)", bun.In(liveJobStates)).
		Where("(j.args->>?)::bigint = ?", key, value).Scan(ctx, &ids)
	return ids, err
}
