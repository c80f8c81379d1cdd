package web

import (
	"strconv"
	"time"

	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/models"
)

// The JSON of the infrastructure area, in one place: what its API answers
// and accepts, and the output tails its pages poll. Rows are mapped here
// so that the database's columns can change without changing the API;
// client/infra.go reads these shapes (its tests decode them strictly) and
// docs/api.md documents them.

// infraRepositoryJSON is a repository of GET /api/v1/infra/repositories.
type infraRepositoryJSON struct {
	Name              string              `json:"name"`
	URL               string              `json:"url"`
	Trunk             string              `json:"trunk"`
	Scan              string              `json:"scan"`
	InitCommand       []string            `json:"init_command"`
	PlanCommand       []string            `json:"plan_command"`
	ApplyCommand      []string            `json:"apply_command"`
	DestroyCommand    []string            `json:"destroy_command"`
	PlanStatuses      bool                `json:"plan_statuses"`
	MergeLockStatuses bool                `json:"merge_lock_statuses"`
	PlanForks         bool                `json:"plan_forks"`
	GitHubFullName    string              `json:"github_full_name,omitempty"`
	RemovedAt         *time.Time          `json:"removed_at,omitempty"`
	UpdatedAt         time.Time           `json:"updated_at"`
	Accounts          []infraAccountJSON  `json:"accounts"`
	MergeLock         *infraMergeLockJSON `json:"merge_lock"` // null when free
}

// infraAccountJSON is an account of a repository.
type infraAccountJSON struct {
	Name          string   `json:"name"`
	Path          string   `json:"path"`
	DependsOn     []string `json:"depends_on"`
	PlanRole      string   `json:"plan_role,omitempty"`
	ApplyRole     string   `json:"apply_role,omitempty"`
	Voters        []string `json:"voters"`
	MinApprovals  int      `json:"min_approvals"`
	MinRejections int      `json:"min_rejections"`
}

// infraMergeLockJSON is a repository's merge lock.
type infraMergeLockJSON struct {
	Repository string    `json:"repository"`
	RunID      int64     `json:"run_id"`
	PRNumber   int       `json:"pr_number"`
	LockedAt   time.Time `json:"locked_at"`
}

// infraRunJSON is a run (client.Run).
type infraRunJSON struct {
	ID          int64  `json:"id"`
	Repository  string `json:"repository"`
	PRNumber    int    `json:"pr_number"`
	PRTitle     string `json:"pr_title"`
	BaseRef     string `json:"base_ref"`
	HeadRef     string `json:"head_ref"`
	HeadSHA     string `json:"head_sha"`
	MergeCommit string `json:"merge_commit"`
	// ReconcileCheckID marks a run reconciling a drifted unit (no pull
	// request): the drift check it reconciles.
	ReconcileCheckID *int64     `json:"reconcile_check_id,omitempty"`
	BaseCommit       string     `json:"base_commit,omitempty"`
	Scan             string     `json:"scan"`
	Status           string     `json:"status"`
	Error            string     `json:"error,omitempty"`
	DeletedUnits     []string   `json:"deleted_units"`
	CreatedAt        time.Time  `json:"created_at"`
	StartedAt        *time.Time `json:"started_at,omitempty"`
	FinishedAt       *time.Time `json:"finished_at,omitempty"`
}

// infraRunsPageJSON is a page of GET /api/v1/infra/runs; next is the
// following page while the page is full.
type infraRunsPageJSON struct {
	Runs []infraRunJSON `json:"runs"`
	Next string         `json:"next,omitempty"`
}

// infraRunDetailJSON is GET /api/v1/infra/runs/{id} (client.RunDetail).
type infraRunDetailJSON struct {
	Run            infraRunJSON         `json:"run"`
	Executions     []infraExecutionJSON `json:"executions"`
	HoldsMergeLock bool                 `json:"holds_merge_lock"`
}

// infraRunAnswerJSON is a run after a change (the abort).
type infraRunAnswerJSON struct {
	Run infraRunJSON `json:"run"`
}

// infraExecutionJSON is an execution as the seed's record has it, without
// outputs and votes: in a run, and in the approvals listing (client.Execution).
type infraExecutionJSON struct {
	ExecutionID       string     `json:"execution_id"`
	IsRollback        bool       `json:"is_rollback"` // the seed's: it destroys new provider resources
	RunID             int64      `json:"run_id"`
	CfgPath           string     `json:"cfg_path"`
	CfgDeps           []string   `json:"cfg_deps"`
	AccountName       string     `json:"account_name"`
	AccountPath       string     `json:"account_path"`
	AccountDeps       []string   `json:"account_deps"`
	InitCommand       []string   `json:"init_command,omitempty"`
	PlanCommand       []string   `json:"plan_command"`
	ApplyCommand      []string   `json:"apply_command"`
	PlanRoleARN       string     `json:"plan_role_arn,omitempty"`
	ApplyRoleARN      string     `json:"apply_role_arn,omitempty"`
	Voters            []string   `json:"voters"`
	MinApprovalCount  int        `json:"min_approval_count"`
	MinRejectionCount int        `json:"min_rejection_count"`
	Status            string     `json:"status"`
	Step              string     `json:"step,omitempty"`
	PlanExitCode      *int       `json:"plan_exit_code,omitempty"`
	HasChanges        *bool      `json:"has_changes,omitempty"`
	ApplyExitCode     *int       `json:"apply_exit_code,omitempty"`
	Error             string     `json:"error,omitempty"`
	ReadyAt           *time.Time `json:"ready_at,omitempty"`
	StartedAt         *time.Time `json:"started_at,omitempty"`
	PlanStartedAt     *time.Time `json:"plan_started_at,omitempty"`
	FinishedAt        *time.Time `json:"finished_at,omitempty"`
	// Ripple says why the run gained it (a unit it reads changed outputs);
	// OutputsChanged is what its apply did to its unit's outputs.
	Ripple         *infraRippleJSON         `json:"ripple,omitempty"`
	OutputsChanged *infraOutputsChangedJSON `json:"outputs_changed,omitempty"`
}

// infraExecutionDetailJSON is GET /api/v1/infra/executions/{id}: the
// seed's record, which also names the pull request and the commits, with
// the votes split into approval and rejection voters, and the outputs.
type infraExecutionDetailJSON struct {
	infraExecutionJSON
	PRID     int    `json:"pr_id"`
	CommitID string `json:"commit_id"`
	BaseRef  string `json:"base_ref"`
	HeadRef  string `json:"head_ref"`

	ApprovalVoters  []string        `json:"approval_voters"`
	RejectionVoters []string        `json:"rejection_voters"`
	Votes           []infraVoteJSON `json:"votes"`
	ApprovalState   string          `json:"approval_state,omitempty"`
	PlanOutput      string          `json:"plan_output"`
	ApplyOutput     string          `json:"apply_output"`
	RunURL          string          `json:"run_url"`
	// The seed's new_providers and new_resources: what the apply
	// introduced to the unit, which a rollback destroys ([] when nothing).
	NewProviders []string `json:"new_providers"`
	NewResources []string `json:"new_resources"`
	// Rollback is what a rollback execution destroys (infra_rollback.go).
	Rollback *infraRollbackJSON `json:"rollback,omitempty"`
}

// infraVoteJSON is one vote as cast (client.Vote).
type infraVoteJSON struct {
	ID        int64     `json:"id"`
	Voter     string    `json:"voter"`
	Decision  string    `json:"decision"`
	Comment   string    `json:"comment,omitempty"`
	Via       string    `json:"via"`
	CreatedAt time.Time `json:"created_at"`
}

// infraVoteRequest is a vote sent to the API; the voter is the caller.
type infraVoteRequest struct {
	Decision string `json:"decision"`
	Comment  string `json:"comment"`
}

// infraVoteResultJSON is where the approval stands after a vote
// (client.VoteResult).
type infraVoteResultJSON struct {
	State      string   `json:"state"`
	Approvals  int      `json:"approvals"`
	Rejections int      `json:"rejections"`
	Waiting    []string `json:"waiting"`
}

// infraAbortRequest says why a run is aborted.
type infraAbortRequest struct {
	Reason string `json:"reason"`
}

// infraWebhookAnswerJSON is what GitHub reads in the webhook's answer.
type infraWebhookAnswerJSON struct {
	Message string `json:"message"`
}

// infraOutputTailJSON is what a page following an output live receives.
type infraOutputTailJSON struct {
	Text   string `json:"text"`
	Next   int    `json:"next"`
	Status string `json:"status"`
	Step   string `json:"step,omitempty"`
	Done   bool   `json:"done"` // the step is over: nothing more will come
}

func infraRepositoryOf(r *models.RepositoryWithLock) infraRepositoryJSON {
	out := infraRepositoryJSON{
		Name: r.Name, URL: r.URL, Trunk: r.Trunk, Scan: r.Scan,
		InitCommand: r.InitCommand, PlanCommand: r.PlanCommand, ApplyCommand: r.ApplyCommand, DestroyCommand: r.DestroyCommand,
		PlanStatuses: r.PlanStatuses, MergeLockStatuses: r.MergeLockStatuses, PlanForks: r.PlanForks,
		GitHubFullName: r.GitHubFullName, RemovedAt: r.RemovedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.Accounts != nil {
		out.Accounts = make([]infraAccountJSON, len(r.Accounts))
	}
	for i, a := range r.Accounts {
		out.Accounts[i] = infraAccountJSON{Name: a.Name, Path: a.Path, DependsOn: a.DependsOn, PlanRole: a.PlanRole, ApplyRole: a.ApplyRole,
			Voters: a.Voters, MinApprovals: a.MinApprovals, MinRejections: a.MinRejections}
	}
	if l := r.MergeLock; l != nil {
		out.MergeLock = &infraMergeLockJSON{Repository: l.Repository, RunID: l.RunID, PRNumber: l.PRNumber, LockedAt: l.LockedAt}
	}
	return out
}

func infraRunOf(r *models.Run) infraRunJSON {
	return infraRunJSON{
		ID: r.ID, Repository: r.Repository, PRNumber: r.PRNumber, PRTitle: r.PRTitle, BaseRef: r.BaseRef, HeadRef: r.HeadRef,
		HeadSHA: r.HeadSHA, MergeCommit: r.MergeCommit, BaseCommit: r.BaseCommit, Scan: r.Scan, Status: r.Status, Error: r.Error,
		DeletedUnits: r.DeletedUnits, CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
		ReconcileCheckID: r.ReconcileCheckID,
	}
}

func infraRunsOf(runs []models.Run) []infraRunJSON {
	out := make([]infraRunJSON, len(runs))
	for i := range runs {
		out[i] = infraRunOf(&runs[i])
	}
	return out
}

func infraExecutionOf(x *models.Execution) infraExecutionJSON {
	return infraExecutionJSON{
		ExecutionID: x.ExecutionID, IsRollback: x.RollbackOf != nil, RunID: x.RunID, CfgPath: x.CfgPath, CfgDeps: x.CfgDeps,
		AccountName: x.AccountName, AccountPath: x.AccountPath, AccountDeps: x.AccountDeps,
		InitCommand: x.InitCommand, PlanCommand: x.PlanCommand, ApplyCommand: x.ApplyCommand,
		PlanRoleARN: x.PlanRoleARN, ApplyRoleARN: x.ApplyRoleARN,
		Voters: x.Voters, MinApprovalCount: x.MinApprovalCount, MinRejectionCount: x.MinRejectionCount,
		Status: x.Status, Step: x.Step, PlanExitCode: x.PlanExitCode, HasChanges: x.HasChanges, ApplyExitCode: x.ApplyExitCode,
		Error: x.Error, ReadyAt: x.ReadyAt, StartedAt: x.StartedAt, PlanStartedAt: x.PlanStartedAt, FinishedAt: x.FinishedAt,
	}
}

// infraExecutionsOf maps executions for a listing ([] when there are none).
func infraExecutionsOf(xs []models.Execution) []infraExecutionJSON {
	out := make([]infraExecutionJSON, len(xs))
	for i := range xs {
		out[i] = infraExecutionOf(&xs[i])
	}
	return out
}

// infraExecutionDetailOf is an execution with its run's refs, its votes
// as tallied and its outputs.
func infraExecutionDetailOf(x *models.Execution, run *models.Run, v infra.ExecutionVotes) infraExecutionDetailJSON {
	out := infraExecutionDetailJSON{
		infraExecutionJSON: infraExecutionOf(x),
		PRID:               run.PRNumber, CommitID: run.MergeCommit, BaseRef: run.BaseRef, HeadRef: run.HeadRef,
		ApprovalVoters: nonNilSlice(v.Approvers), RejectionVoters: nonNilSlice(v.Rejecters), Votes: []infraVoteJSON{},
		PlanOutput: x.PlanOutput, ApplyOutput: x.ApplyOutput, RunURL: "/api/v1/infra/runs/" + strconv.FormatInt(x.RunID, 10),
		NewProviders: []string{}, NewResources: []string{},
	}
	if v.Approval != nil {
		out.ApprovalState = v.Approval.State
	}
	for _, vote := range v.Votes {
		out.Votes = append(out.Votes, infraVoteJSON{ID: vote.ID, Voter: vote.Voter, Decision: vote.Decision, Comment: vote.Comment,
			Via: vote.Via, CreatedAt: vote.CreatedAt})
	}
	return out
}
