// Package infra renders the infrastructure delivery area (seed 000):
// repositories with their open pull requests and runs, a run with the
// picture of its execution graph, an execution with its plan, votes and
// apply, a pull request's plans, and the live command output. The web
// package builds the view models below; the templates only loop and branch.
package infra

import (
	"strconv"

	"github.com/gantryhq/gantry/views/components"
	"github.com/gantryhq/gantry/views/pages/log"
)

// Option is one choice of a select.
type Option struct {
	Value    string
	Label    string
	Selected bool
}

// Link is a labelled URL.
type Link struct {
	Text string
	URL  string
}

// Field is one labelled fact. Links, when set, are shown instead of Value.
type Field struct {
	Label  string
	Value  string
	Mono   bool
	TestID string
	Links  []Link
	Items  []string // a list shown one per line (commands, voters)
}

// State is a status as the pages show it: words, a badge tone, and the
// CSS class of the graph and the legend.
type State struct {
	Text  string // "running · voting"
	Tone  string // ok, warn, bad, muted, "" (info)
	Class string // waiting, running, voting, succeeded, failed, aborted, …
}

// Count is how many executions of a run are in one status.
type Count struct {
	State State
	N     int
}

// Lock is a repository's merge lock as a sentence.
type Lock struct {
	Held bool
	Tone string // the badge's
	Text string // "free" or "locked by #42"
	URL  string // the run holding it
	Note string // more words, e.g. since when
	// Why lists what keeps the run holding the lock, on that run's page:
	// each execution under way and what it waits for.
	Why []LockWhy
}

// LockWhy is one execution keeping its run, and so the merge lock: its
// step ("applying", "interrupted", …) and what it is waiting for.
type LockWhy struct {
	Unit string
	URL  string // the execution's page
	Step string
	Tone string // the step badge's
	Text string // since when, the worker's last heartbeat, what to do
}

// Account is one account of a repository.
type Account struct {
	Name       string
	Path       string
	DependsOn  string // "shared, network" or ""
	Voters     []string
	Thresholds string // "at least 2 approvals apply · 1 rejection stops"
	PlanRole   string
	ApplyRole  string
}

// Repo is one repository on /infra.
type Repo struct {
	Name     string
	URL      string
	Trunk    string
	Scan     string // "graph scan" / "plan scan" with what it means
	GitHub   string // owner/name, once a delivery said
	Lock     Lock
	Accounts []Account
	RunsURL  string
}

// PlanChip is one unit's plan of a pull request, as a small badge.
type PlanChip struct {
	Path  string
	State State
	URL   string
}

// PullRow is an open pull request on /infra.
type PullRow struct {
	Repository string
	Number     string // "#45"
	Title      string
	Author     string
	URL        string // its page in Gantry
	GitHubURL  string
	HeadRef    string
	Head       string // short commit
	Plans      []PlanChip
	PlanError  string
	Summary    string // "2 units planned: 1 with changes, 1 failed"
	Updated    string
	UpdatedISO string
}

// RunRow is one run in a listing.
type RunRow struct {
	ID          int64
	Title       string // "Run 12"
	URL         string
	Repository  string
	PR          string // "#42"
	PRURL       string
	PRTitle     string
	MergeCommit string // short
	State       State
	Started     string
	StartedISO  string
	Finished    string
	FinishedISO string
	Counts      []Count
}

// Setup is how to get the first repository in: the empty state of /infra.
type Setup struct {
	Example    string // gantry.yaml to start from
	WebhookURL string
}

// IndexView is /infra.
type IndexView struct {
	Repos    []Repo
	Pulls    []PullRow
	Runs     []RunRow
	MoreRuns bool // there are older runs than those listed
	Drift    DriftSection
	Setup    Setup
}

// RunsFilter is the runs form's current values.
type RunsFilter struct {
	Repository string
	Status     string
	PR         string
}

// RunsView is /infra/runs.
type RunsView struct {
	Filter       RunsFilter
	Repositories []Option
	Statuses     []Option
	Rows         []RunRow
	Summary      string
	Filtered     bool
	NoRepository bool // nothing is configured at all
	NewerURL     string
	OlderURL     string
}

// Node is one execution in the graph, in SVG coordinates.
type Node struct {
	ExecutionID string
	URL         string
	X, Y        string
	W, H        string
	TextX       string
	LabelY      string
	SubY        string
	Label       string // the unit's path, shortened from the left to fit
	Sub         string // "prod · running · voting"
	Title       string // everything, for the hover text
	Class       string // the status class
}

// Edge is one dependency, drawn from the dependency to the dependent.
type Edge struct {
	Path    string // SVG path data
	Account bool   // an account dependency (dashed), else a unit dependency
	Title   string
}

// Graph is the picture of a run's executions, laid out in layers by
// dependency depth.
type Graph struct {
	Width           string
	Height          string
	Label           string // what it shows, in words (its accessible name)
	Nodes           []Node
	Edges           []Edge
	Legend          []Count // the statuses present
	HasAccountEdges bool
}

// ExecRow is one execution in a table.
type ExecRow struct {
	ExecutionID string
	URL         string
	Unit        string
	Account     string
	State       State
	Deps        []string // what it runs after
	Started     string
	StartedISO  string
	Finished    string
	FinishedISO string
	Duration    string
	Error       string
	// Ripple says why the run gained it ("added because …"), for an
	// execution added because a unit it reads changed outputs.
	Ripple string
}

// RippleRow is one apply of a run that changed outputs other units read,
// and what became of those units.
type RippleRow struct {
	Unit    string
	URL     string // the execution whose apply changed the outputs
	Outputs string // names, never values
	// Changed are the readers added with changes to vote on and apply;
	// Checked those whose plan had none (not voted); Pending those not
	// planned yet; Failed those that failed or were aborted.
	Changed, Checked, Pending, Failed []Link
	Error                             string // why the ripple could not be worked out
}

// RunView is /infra/runs/:id.
type RunView struct {
	ID         int64
	Title      string
	Repository string
	PR         string
	PRURL      string
	PRTitle    string
	GitHubURL  string
	State      State
	Live       bool // not over: the page refreshes itself
	Fields     []Field
	Error      string
	Deleted    []string
	Lock       Lock
	Graph      Graph
	Executions []ExecRow
	Log        []log.Row
	LogURL     string
	// AbortURL is where an operator aborts the run; empty when they may
	// not (not an operator, or the run is over or scanning).
	AbortURL string
	// Interrupted are its executions whose apply was interrupted: the run
	// waits for an operator's choice on each.
	Interrupted []Interrupted
	// Rollback is set when the run rolls back resources of new providers
	// (rollback.go).
	Rollback *RollbackSection
	// Ripples are its applies whose outputs changed and reached units
	// outside the run (docs/areas/infra.md, "Outputs that ripple").
	Ripples []RippleRow
}

// Interrupted is an execution whose apply was interrupted and whose
// outcome is unknown, as its page and its run's page show it.
type Interrupted struct {
	Unit        string
	URL         string // the execution's page
	Explanation string
	// Choices are the operator's buttons (posted with the reason field);
	// empty for anyone else, who is told who chooses.
	Choices []Choice
	Note    string
}

// Choice is one operator action on an interrupted apply.
type Choice struct {
	Action  string
	Label   string
	Hint    string
	Class   string // button class ("danger", "")
	TestID  string
	Confirm string
}

// Output is a command's output, followed live while its step runs.
type Output struct {
	TestID    string
	Text      string
	Live      bool   // the step runs: the page polls TailURL
	LiveLabel string // what the live marker says while it does
	TailURL   string // JSON tail, without the offset
	Offset    string // characters already shown
	Empty     string // what to say while there is none
	Note      string // when it ran, its exit code
}

// Dep is an execution this one depends on, with where it stands.
type Dep struct {
	Path  string
	URL   string
	State State
	Why   string // "unit dependency" / "account prod depends on shared"
}

// VoteForm is the dashboard's Approve/Reject for a voter.
type VoteForm struct {
	Action  string
	Voter   string
	Current string // "You approved at …; you can change your vote until it is decided."
}

// Votes is an execution's approval: the tally, the votes, and who may vote.
type Votes struct {
	Open        bool   // the approval is pending and the execution waits for it
	Tally       string // "1 of 2 approvals · 0 of 1 rejections"
	Outcome     string // "approved", "rejected", "" while pending
	OutcomeTone string
	Waiting     []string
	Rows        []components.VoteRow
	Form        *VoteForm
	Note        string // why there is no form
}

// ExecutionView is /infra/executions/:execution_id.
type ExecutionView struct {
	ExecutionID string
	Unit        string
	Account     string
	Repository  string
	RunURL      string
	RunTitle    string
	PR          string
	PRURL       string
	State       State
	Summary     string // terraform's verdict on the plan, once there is one
	Waiting     bool   // not started: the page refreshes itself
	Fields      []Field
	Error       string
	Deps        []Dep
	Plan        Output
	Apply       Output
	Votes       Votes
	Log         []log.Row
	LogURL      string
	// Interrupted is set while its apply is interrupted and waits for an
	// operator.
	Interrupted *Interrupted
	// Rollback is set on a rollback execution; NewResources on one whose
	// apply introduced providers (rollback.go).
	Rollback     *Rollback
	NewResources *NewResources
	// Ripple says why the run gained it, with the execution whose outputs
	// changed; nil when the scan collected it.
	Ripple *RippleReason
}

// RippleReason is why a run gained an execution.
type RippleReason struct {
	Text      string // "added because live/prod/vpc's outputs id changed"
	SourceURL string
}

// PlanRow is one unit's plan on a pull request's page.
type PlanRow struct {
	ID          int64
	Path        string
	URL         string
	State       State
	Changes     string
	ExitCode    string
	Started     string
	StartedISO  string
	Finished    string
	FinishedISO string
	Error       string
}

// PullView is /infra/:repo/pulls/:number.
type PullView struct {
	Repository string
	Number     string
	Title      string
	GitHubURL  string
	State      State
	Fields     []Field
	PlanError  string // why the head was not scanned; then there are no Plans
	Plans      []PlanRow
	Live       bool // a plan is queued or running: the page refreshes itself
	Runs       []RunRow
	Log        []log.Row
	LogURL     string
}

// PlanView is /infra/plans/:id.
type PlanView struct {
	ID         int64
	Path       string
	Repository string
	PR         string
	PRURL      string
	State      State
	Fields     []Field
	Error      string
	Stale      string // the pull request moved on: this plan is not of its head
	Output     Output
}

// ExampleConfig is the gantry.yaml an installation without repositories
// starts from; a test checks that it is valid.
const ExampleConfig = `repositories:
  - name: infra-live
    url: https://github.com/acme/infra-live.git
    trunk: main
    webhook_secret_env: INFRA_LIVE_WEBHOOK_SECRET
    status_token_env: GITHUB_STATUS_TOKEN
    accounts:
      - name: shared
        path: live/shared/
        voters: [platform@example.com]
        min_approvals: 1
        min_rejections: 1
      - name: prod
        path: live/prod/
        depends_on: [shared]
        voters: [ada@example.com, bob@example.com]
        min_approvals: 2
        min_rejections: 1
`

func itoa(n int) string { return strconv.Itoa(n) }

// VoteLink is what an emailed voting link's page shows of an execution around
// its votes: the run and what was applied before it, then the plan.
type VoteLink struct {
	Repository  string
	PR          string
	PRTitle     string
	MergeCommit string
	Unit        string
	Account     string
	ExecutionID string
	Deps        []Dep
	Summary     string
	// Changes are the plan's resources by action, for a first look before
	// the whole plan.
	Changes []ChangeGroup
	Plan    string
}

// ChangeGroup is the resources a plan changes the same way.
type ChangeGroup struct {
	Action    string // create, update, replace, destroy, read
	Label     string // "to add"
	Tone      string // ok, warn, bad or ""
	Addresses []string
}
