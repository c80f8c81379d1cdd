package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The infrastructure area's API: deployment runs of merged pull requests,
// their executions (one per Terragrunt unit) and the votes on their plans.
// Reads are retried like the other idempotent calls; see Vote for why a
// vote is not.

// Run statuses.
const (
	RunQueued    = "queued" // waits for the repository's merge lock
	RunScanning  = "scanning"
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
)

// Execution statuses (seed 000's) and the steps of a running execution.
const (
	ExecWaiting   = "waiting"
	ExecRunning   = "running"
	ExecSucceeded = "succeeded"
	ExecFailed    = "failed"
	ExecAborted   = "aborted"

	StepPlanning = "planning"
	StepVoting   = "voting"
	StepApplying = "applying"
	// StepInterrupted: the apply began and recorded no outcome (its worker
	// stopped); it is not applied again until an operator chooses.
	StepInterrupted = "interrupted"
)

// Decisions a voter may take, and the states of an execution's approval.
const (
	Approve = "approve"
	Reject  = "reject"

	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalRejected = "rejected"
)

// Run is the deployment of one merged pull request.
type Run struct {
	ID           int64      `json:"id"`
	Repository   string     `json:"repository"`
	PRNumber     int        `json:"pr_number"`
	PRTitle      string     `json:"pr_title"`
	BaseRef      string     `json:"base_ref"`
	HeadRef      string     `json:"head_ref"`
	HeadSHA      string     `json:"head_sha"`
	MergeCommit  string     `json:"merge_commit"`
	BaseCommit   string     `json:"base_commit,omitempty"`
	Scan         string     `json:"scan"` // graph or plan
	Status       string     `json:"status"`
	Error        string     `json:"error,omitempty"` // why a failed run failed
	DeletedUnits []string   `json:"deleted_units"`
	CreatedAt    time.Time  `json:"created_at"`
	StartedAt    *time.Time `json:"started_at,omitempty"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
}

// Ended reports whether the run is over.
func (r Run) Ended() bool { return r.Status == RunSucceeded || r.Status == RunFailed }

// RunDetail is a run with its executions and whether it holds its
// repository's merge lock (GET /infra/runs/{id}).
type RunDetail struct {
	Run Run `json:"run"`
	// Executions are in dependency order (see DependencyOrder).
	Executions     []Execution `json:"executions"`
	HoldsMergeLock bool        `json:"holds_merge_lock"`
}

// Execution is one unit of a run: seed 000's record. Listings (a run's
// executions, Approvals) leave out the votes and outputs; Client.Execution
// fills them in.
type Execution struct {
	ExecutionID string `json:"execution_id"`
	// IsRollback marks a rollback execution: it destroys the resources of
	// new providers that an execution of the run (or of an earlier run,
	// for a deleted unit) introduced.
	IsRollback        bool       `json:"is_rollback"`
	RunID             int64      `json:"run_id"`
	CfgPath           string     `json:"cfg_path"`
	CfgDeps           []string   `json:"cfg_deps"` // the run's units this one runs after
	AccountName       string     `json:"account_name"`
	AccountPath       string     `json:"account_path"`
	AccountDeps       []string   `json:"account_deps"` // accounts whose units of the run go first
	InitCommand       []string   `json:"init_command,omitempty"`
	PlanCommand       []string   `json:"plan_command"`
	ApplyCommand      []string   `json:"apply_command"`
	PlanRoleARN       string     `json:"plan_role_arn,omitempty"`
	ApplyRoleARN      string     `json:"apply_role_arn,omitempty"`
	Voters            []string   `json:"voters"`
	MinApprovalCount  int        `json:"min_approval_count"`
	MinRejectionCount int        `json:"min_rejection_count"`
	Status            string     `json:"status"`         // waiting, running, succeeded, failed or aborted
	Step              string     `json:"step,omitempty"` // of a running one: planning, voting, applying or interrupted
	PlanExitCode      *int       `json:"plan_exit_code,omitempty"`
	HasChanges        *bool      `json:"has_changes,omitempty"`
	ApplyExitCode     *int       `json:"apply_exit_code,omitempty"`
	Error             string     `json:"error,omitempty"` // why a failed or aborted one ended
	ReadyAt           *time.Time `json:"ready_at,omitempty"`
	StartedAt         *time.Time `json:"started_at,omitempty"`
	PlanStartedAt     *time.Time `json:"plan_started_at,omitempty"`
	FinishedAt        *time.Time `json:"finished_at,omitempty"`
	// Ripple says why the run gained it (a unit it reads changed its
	// outputs); OutputsChanged is what its apply did to its unit's outputs.
	Ripple         *Ripple         `json:"ripple,omitempty"`
	OutputsChanged *OutputsChanged `json:"outputs_changed,omitempty"`

	// Only from Client.Execution:

	// The seed's record also names the pull request and the commits of
	// the run.
	PRID     int    `json:"pr_id,omitempty"`
	CommitID string `json:"commit_id,omitempty"` // the merge commit
	BaseRef  string `json:"base_ref,omitempty"`
	HeadRef  string `json:"head_ref,omitempty"`
	// ApprovalState is pending, approved or rejected once the plan went to
	// the voters, empty before.
	ApprovalState   string   `json:"approval_state,omitempty"`
	ApprovalVoters  []string `json:"approval_voters,omitempty"`  // whose latest vote approves
	RejectionVoters []string `json:"rejection_voters,omitempty"` // whose latest vote rejects
	Votes           []Vote   `json:"votes,omitempty"`            // every vote cast, changed ones included
	PlanOutput      string   `json:"plan_output,omitempty"`
	ApplyOutput     string   `json:"apply_output,omitempty"`
	RunURL          string   `json:"run_url,omitempty"`
	// NewProviders and NewResources are what the apply introduced to the
	// unit, which a rollback destroys if the run fails.
	NewProviders []string `json:"new_providers,omitempty"`
	NewResources []string `json:"new_resources,omitempty"`
	// Rollback is the record of a rollback execution.
	Rollback *Rollback `json:"rollback,omitempty"`
}

// Ripple is why a run gained an execution: the unit it reads changed
// outputs in that run.
type Ripple struct {
	Source          string   `json:"source"`           // the unit whose outputs changed
	SourceExecution string   `json:"source_execution"` // its execution_id
	Outputs         []string `json:"outputs"`
	Reason          string   `json:"reason"`
}

// OutputsChanged is what an apply did to its unit's outputs.
type OutputsChanged struct {
	Outputs []string `json:"outputs"` // names, never values
	Readers []string `json:"readers"` // the units added to the run because of it
	// CompareError: the outputs could not be compared, every reader was
	// added; Error: the readers could not be worked out.
	CompareError string `json:"compare_error,omitempty"`
	Error        string `json:"error,omitempty"`
}

// Why a rollback was made.
const (
	RollbackRunFailed   = "run-failed"   // an execution of its run failed, was rejected or aborted
	RollbackUnitDeleted = "unit-deleted" // a merge deleted the unit (the last commit where it existed is Commit)
)

// Rollback is what a rollback execution destroys and what became of it.
type Rollback struct {
	RollbackOf string   `json:"rollback_of"` // the execution id it rolls back
	Reason     string   `json:"reason"`
	Commit     string   `json:"commit"` // the commit it plans and applies
	Addresses  []string `json:"addresses"`
	// Remaining is what a failed one left in the state; nil while unknown
	// (RemainingError says why when the state could not be read).
	Remaining      []string `json:"remaining"`
	RemainingError string   `json:"remaining_error,omitempty"`
	// Held: it failed and waits for an operator to retry it or mark it
	// resolved (POST /api/v1/infra/executions/{id}/rollback-retry or
	// rollback-resolved); the run holds its merge lock meanwhile.
	Held           bool       `json:"held"`
	ResolvedBy     string     `json:"resolved_by,omitempty"`
	ResolvedReason string     `json:"resolved_reason,omitempty"`
	ResolvedAt     *time.Time `json:"resolved_at,omitempty"`
}

// Ended reports whether the execution is over.
func (x Execution) Ended() bool {
	return x.Status == ExecSucceeded || x.Status == ExecFailed || x.Status == ExecAborted
}

// State is the status with the step of a running execution:
// "running/voting", "waiting".
func (x Execution) State() string {
	if x.Status == ExecRunning && x.Step != "" {
		return x.Status + "/" + x.Step
	}
	return x.Status
}

// Vote is one vote as cast; a voter's latest counts.
type Vote struct {
	ID        int64     `json:"id"`
	Voter     string    `json:"voter"`
	Decision  string    `json:"decision"`
	Comment   string    `json:"comment,omitempty"`
	Via       string    `json:"via"` // link, page or api
	CreatedAt time.Time `json:"created_at"`
}

// VoteResult is where an approval stands after a vote.
type VoteResult struct {
	State string `json:"state"` // pending, approved or rejected
	// Approvals and Rejections count the voters whose latest vote approves
	// or rejects (at the decisive vote, once decided).
	Approvals  int      `json:"approvals"`
	Rejections int      `json:"rejections"`
	Waiting    []string `json:"waiting"` // voters who have not voted
}

// RunsOptions filters and bounds Runs.
type RunsOptions struct {
	Repository string
	Status     string // queued, scanning, running, succeeded or failed
	PR         int    // pull request number
	// Before lists runs older than this run id: to continue a listing,
	// pass the id of the last run received.
	Before int64
	// Limit is how many runs to return at most; 0 means 50 (the server's
	// page). Beyond 500 (the server's largest page), Runs follows the
	// server's next links.
	Limit int
}

const (
	defaultRunsLimit = 50
	maxRunsPage      = 500
)

// Runs lists runs, newest first: at most opts.Limit of them, following the
// server's next links across pages of up to 500 when opts.Limit asks for
// more. Fewer means there are no more.
func (c *Client) Runs(ctx context.Context, opts RunsOptions) ([]Run, error) {
	limit := opts.Limit
	if limit <= 0 {
		limit = defaultRunsLimit
	}
	q := url.Values{}
	if opts.Repository != "" {
		q.Set("repository", opts.Repository)
	}
	if opts.Status != "" {
		q.Set("status", opts.Status)
	}
	if opts.PR > 0 {
		q.Set("pr", strconv.Itoa(opts.PR))
	}
	if opts.Before > 0 {
		q.Set("before", strconv.FormatInt(opts.Before, 10))
	}
	path := "/infra/runs"
	runs := []Run{}
	for {
		q.Set("limit", strconv.Itoa(min(limit-len(runs), maxRunsPage)))
		var page struct {
			Runs []Run  `json:"runs"`
			Next string `json:"next"`
		}
		p := path + "?" + q.Encode()
		err := c.retryIdempotent(ctx, func() error { return c.call(ctx, http.MethodGet, p, nil, &page) })
		if err != nil {
			return nil, fmt.Errorf("listing runs: %w", err)
		}
		runs = append(runs, page.Runs...)
		if page.Next == "" || len(page.Runs) == 0 || len(runs) >= limit {
			return runs[:min(len(runs), limit)], nil
		}
		// The next page is the same query from where this one ended; only
		// the page size shrinks to what is still wanted.
		next, err := url.Parse(page.Next)
		if err != nil || !strings.HasPrefix(next.Path, "/api/v1/") {
			return nil, fmt.Errorf("listing runs: the server's next page %q is not an API path", page.Next)
		}
		path, q = strings.TrimPrefix(next.Path, "/api/v1"), next.Query()
	}
}

// Run returns the run id with its executions in dependency order.
func (c *Client) Run(ctx context.Context, id int64) (*RunDetail, error) {
	var out RunDetail
	err := c.retryIdempotent(ctx, func() error {
		return c.call(ctx, http.MethodGet, "/infra/runs/"+strconv.FormatInt(id, 10), nil, &out)
	})
	if err != nil {
		return nil, fmt.Errorf("getting run %d: %w", id, err)
	}
	out.Executions = DependencyOrder(out.Executions)
	return &out, nil
}

// Execution returns one execution with its votes and its plan and apply
// output so far.
func (c *Client) Execution(ctx context.Context, executionID string) (*Execution, error) {
	var out Execution
	err := c.retryIdempotent(ctx, func() error {
		return c.call(ctx, http.MethodGet, "/infra/executions/"+url.PathEscape(executionID), nil, &out)
	})
	if err != nil {
		return nil, fmt.Errorf("getting execution %s: %w", executionID, err)
	}
	return &out, nil
}

// Approvals lists the executions waiting for the caller's vote (their plan
// is ready and the caller is one of their voters who has not decided them).
func (c *Client) Approvals(ctx context.Context) ([]Execution, error) {
	var out struct {
		Executions []Execution `json:"executions"`
	}
	err := c.retryIdempotent(ctx, func() error { return c.call(ctx, http.MethodGet, "/approvals", nil, &out) })
	if err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	return out.Executions, nil
}

// Vote records the caller's vote on an execution's plan: decision is
// Approve or Reject, comment may be empty. The token needs the vote scope
// and its user must be one of the execution's voters (403 otherwise).
//
// A vote is retried only when the server certainly never handled it: a 429
// from the rate limiter (which answers before any handler) or a connection
// that could not be made. Anything else is returned as it is, because
// repeating a vote that was recorded is not harmless: while the vote is
// open it is only recorded and logged twice (the latest vote counts), but
// once the vote decided the execution, the repetition fails with 409 and
// hides the success. After an answer that got lost (a timeout, a reset
// connection, a 502 from a proxy), look at the execution before voting
// again.
func (c *Client) Vote(ctx context.Context, executionID, decision, comment string) (*VoteResult, error) {
	body := struct {
		Decision string `json:"decision"`
		Comment  string `json:"comment,omitempty"`
	}{decision, comment}
	var out VoteResult
	err := c.retry(ctx, unsent, func() error {
		return c.call(ctx, http.MethodPost, "/infra/executions/"+url.PathEscape(executionID)+"/votes", body, &out)
	})
	if err != nil {
		return nil, fmt.Errorf("voting on execution %s: %w", executionID, err)
	}
	return &out, nil
}

// unsent reports whether err shows that the server never handled the
// request, so that sending it again cannot do anything twice.
func unsent(err error) (bool, time.Duration) {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status == http.StatusTooManyRequests, ae.RetryAfter
	}
	var te *transportError
	var op *net.OpError
	if errors.As(err, &te) && errors.As(err, &op) && op.Op == "dial" {
		return true, 0
	}
	return false, 0
}

// DependencyOrder sorts a run's executions so that each comes after those
// it waits for: the units in its CfgDeps and every execution of the
// accounts in its AccountDeps. Executions free to go keep their order in
// xs (the server's, creation order). Dependencies outside xs are ignored;
// should the dependencies form a cycle, its executions come last in their
// order in xs.
func DependencyOrder(xs []Execution) []Execution {
	byPath := map[string][]int{}
	byAccount := map[string][]int{}
	for i, x := range xs {
		byPath[x.CfgPath] = append(byPath[x.CfgPath], i)
		byAccount[x.AccountName] = append(byAccount[x.AccountName], i)
	}
	after := make([][]int, len(xs)) // after[i]: what i waits for
	for i, x := range xs {
		for _, p := range x.CfgDeps {
			after[i] = append(after[i], byPath[p]...)
		}
		for _, a := range x.AccountDeps {
			after[i] = append(after[i], byAccount[a]...)
		}
	}
	out := make([]Execution, 0, len(xs))
	placed := make([]bool, len(xs))
	for len(out) < len(xs) {
		progress := false
		for i := range xs {
			if placed[i] || !allPlaced(after[i], placed, i) {
				continue
			}
			placed[i], progress = true, true
			out = append(out, xs[i])
			break // start over: the earliest free execution goes next
		}
		if !progress { // a cycle: the rest in their order
			for i := range xs {
				if !placed[i] {
					out = append(out, xs[i])
				}
			}
			break
		}
	}
	return out
}

func allPlaced(deps []int, placed []bool, self int) bool {
	for _, d := range deps {
		if d != self && !placed[d] {
			return false
		}
	}
	return true
}
