package models

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/ecsrunner/ecsconfig"
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

	Name              string `bun:",pk"`
	URL               string
	Trunk             string
	Scan              string
	WebhookSecretEnv  string
	StatusTokenEnv    string
	InitCommand       []string `bun:",array"`
	PlanCommand       []string `bun:",array"`
	ApplyCommand      []string `bun:",array"`
	DestroyCommand    []string `bun:",array"`
	PlanStatuses      bool
	MergeLockStatuses bool
	PlanForks         bool
	PlanComments      bool
	// DriftEverySeconds is how often every unit of the trunk is planned
	// for drift; 0: never. DriftNotify are mailed about drifted units.
	DriftEverySeconds int
	DriftNotify       []string `bun:",array"`
	GitHubFullName    string   `bun:"github_full_name"`
	// ECS is where the commands run when set (runs_on: ecs); nil: locally.
	ECS       *ecsconfig.Config `bun:"ecs,type:jsonb"`
	RemovedAt *time.Time
	UpdatedAt time.Time `bun:",nullzero,notnull,default:current_timestamp"`

	Accounts []Account `bun:"rel:has-many,join:name=repository"`
}

// Account is a path prefix of a repository with its roles and voters.
type Account struct {
	bun.BaseModel `bun:"table:accounts"`

	Repository    string `bun:",pk"`
	Name          string `bun:",pk"`
	Path          string
	DependsOn     []string `bun:",array"`
	PlanRole      string
	ApplyRole     string
	Voters        []string `bun:",array"`
	MinApprovals  int
	MinRejections int
}

// UpsertRepository registers or updates a repository (un-removing it) and
// replaces its accounts.
func UpsertRepository(ctx context.Context, tx bun.IDB, r *Repository) error {
	if r.DriftNotify == nil {
		r.DriftNotify = []string{}
	}
	_, err := tx.NewInsert().Model(r).
		On("CONFLICT (name) DO UPDATE").
		Set("url = EXCLUDED.url, trunk = EXCLUDED.trunk, scan = EXCLUDED.scan").
		Set("webhook_secret_env = EXCLUDED.webhook_secret_env, status_token_env = EXCLUDED.status_token_env").
		Set("init_command = EXCLUDED.init_command, plan_command = EXCLUDED.plan_command").
		Set("apply_command = EXCLUDED.apply_command, destroy_command = EXCLUDED.destroy_command").
		Set("plan_statuses = EXCLUDED.plan_statuses, merge_lock_statuses = EXCLUDED.merge_lock_statuses, plan_forks = EXCLUDED.plan_forks").
		Set("plan_comments = EXCLUDED.plan_comments, ecs = EXCLUDED.ecs").
		Set("drift_every_seconds = EXCLUDED.drift_every_seconds, drift_notify = EXCLUDED.drift_notify").
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

// RepositoryWithLock is a registered repository with its merge lock.
type RepositoryWithLock struct {
	Repository
	MergeLock *MergeLock // nil when no run holds it
}

// RepositoriesWithLocks lists the registered repositories with their
// accounts and merge locks, in three queries whatever their number.
func RepositoriesWithLocks(ctx context.Context, db bun.IDB) ([]RepositoryWithLock, error) {
	repos, err := ListRepositories(ctx, db)
	if err != nil || len(repos) == 0 {
		return nil, err
	}
	names := make([]string, len(repos))
	for i := range repos {
		names[i] = repos[i].Name
	}
	var locks []MergeLock
	if err := db.NewSelect().Model(&locks).Where("repository IN (?)", bun.In(names)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("listing merge locks: %w", err)
	}
	byRepo := make(map[string]*MergeLock, len(locks))
	for i := range locks {
		byRepo[locks[i].Repository] = &locks[i]
	}
	out := make([]RepositoryWithLock, len(repos))
	for i := range repos {
		out[i] = RepositoryWithLock{Repository: repos[i], MergeLock: byRepo[repos[i].Name]}
	}
	return out, nil
}

// RepositoryNames lists the names a runs listing filters by: the
// registered repositories and those that have runs (removed ones
// included), sorted.
func RepositoryNames(ctx context.Context, db bun.IDB) ([]string, error) {
	var names []string
	err := db.NewRaw("SELECT name FROM repositories WHERE removed_at IS NULL UNION SELECT DISTINCT repository FROM runs ORDER BY 1").
		Scan(ctx, &names)
	if err != nil {
		return nil, fmt.Errorf("listing repository names: %w", err)
	}
	return names, nil
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

	DeliveryID string `bun:",pk"`
	Event      string
	Action     string
	Repository string
	Payload    []byte
	ReceivedAt time.Time `bun:",nullzero,notnull,default:current_timestamp"`
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

	Repository     string `bun:",pk"`
	Number         int    `bun:",pk"`
	Title          string
	Author         string
	HTMLURL        string `bun:"html_url"`
	BaseRef        string
	HeadRef        string
	HeadSHA        string `bun:"head_sha"`
	State          string
	MergeCommitSHA string `bun:"merge_commit_sha"`
	PlanError      string
	EventAt        time.Time
	DeliveryAt     time.Time
	UpdatedAt      time.Time `bun:",nullzero,notnull,default:current_timestamp"`
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

// PullRequestWithPlans is an open pull request with its plans at its head
// commit (without their output).
type PullRequestWithPlans struct {
	PullRequest
	Plans []PRPlan
}

// OpenPullRequestsWithPlans lists the open pull requests of registered
// repositories (those of removed ones are no longer planned), newest
// first, each with its plans at its head commit ordered by unit: two
// queries whatever their number.
func OpenPullRequestsWithPlans(ctx context.Context, db bun.IDB) ([]PullRequestWithPlans, error) {
	var prs []PullRequest
	err := db.NewSelect().Model(&prs).
		Where("pr.state = ?", PROpen).
		Where("EXISTS (SELECT 1 FROM repositories AS repo WHERE repo.name = pr.repository AND repo.removed_at IS NULL)").
		OrderExpr("pr.updated_at DESC").Scan(ctx)
	if err != nil || len(prs) == 0 {
		return nil, err
	}
	var plans []PRPlan
	err = db.NewSelect().Model(&plans).ExcludeColumn("output").
		Join("JOIN pull_requests AS pr ON pr.repository = pp.repository AND pr.number = pp.pr_number AND pr.head_sha = pp.head_sha").
		Where("pr.state = ?", PROpen).
		OrderExpr("pp.path").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the plans of open pull requests: %w", err)
	}
	type key struct {
		repo   string
		number int
	}
	byPR := map[key][]PRPlan{}
	for _, p := range plans {
		k := key{p.Repository, p.PRNumber}
		byPR[k] = append(byPR[k], p)
	}
	out := make([]PullRequestWithPlans, len(prs))
	for i := range prs {
		out[i] = PullRequestWithPlans{PullRequest: prs[i], Plans: byPR[key{prs[i].Repository, prs[i].Number}]}
	}
	return out, nil
}

// PRPlan is one changed unit of a pull request planned at one head commit.
type PRPlan struct {
	bun.BaseModel `bun:"table:pr_plans,alias:pp"`

	ID         int64 `bun:",pk,autoincrement"`
	Repository string
	PRNumber   int    `bun:"pr_number"`
	HeadSHA    string `bun:"head_sha"`
	Path       string
	Status     string
	ExitCode   *int
	HasChanges *bool
	Output     string
	Error      string
	JobID      *int64
	Generation int       `bun:",nullzero,notnull,default:1"`
	CreatedAt  time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	StartedAt  *time.Time
	FinishedAt *time.Time
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

// InfraOverview is what the infrastructure area's front page shows.
type InfraOverview struct {
	Repositories []RepositoryWithLock   // registered, by name
	PullRequests []PullRequestWithPlans // open, newest first
	Runs         RunPage                // the latest runs
}

// LoadInfraOverview reads the registered repositories with their merge
// locks, their open pull requests with their plans and the latest
// recentRuns runs, in a fixed number of queries whatever their number.
// Without a registered repository there is nothing else to read.
func LoadInfraOverview(ctx context.Context, db bun.IDB, recentRuns int) (*InfraOverview, error) {
	repos, err := RepositoriesWithLocks(ctx, db)
	if err != nil || len(repos) == 0 {
		return &InfraOverview{}, err
	}
	prs, err := OpenPullRequestsWithPlans(ctx, db)
	if err != nil {
		return nil, err
	}
	runs, err := ListRunPage(ctx, db, RunFilter{Limit: recentRuns})
	if err != nil {
		return nil, err
	}
	return &InfraOverview{Repositories: repos, PullRequests: prs, Runs: runs}, nil
}
