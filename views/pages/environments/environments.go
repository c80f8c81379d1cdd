// Package environments renders the environment pools area: every pool's
// capacity and utilisation, the dirty queue, one environment with its
// cleanup output and history, and the allocation history. The web package
// builds the view models below; the templates only loop and branch.
package environments

import (
	"context"
	"strconv"

	"github.com/gantryhq/gantry/views"
	"github.com/gantryhq/gantry/views/pages/log"
)

// Option is one choice of a select.
type Option struct {
	Value    string
	Label    string
	Selected bool
}

// Capability is one key=value an environment offers.
type Capability struct {
	Key   string
	Value string
}

// Segment is one state's share of a pool, as a stretch of the capacity bar
// (X and Width in the bar's 0..1000 coordinates) and a legend entry.
type Segment struct {
	State string // available, in_use, cleaning, dirty, deregistering: the CSS class
	Label string
	Count int
	X     string
	Width string
}

// Capacity is the picture of a pool's environments by state.
type Capacity struct {
	Segments []Segment // every state in order, zero counts included (the legend)
	Bars     []Segment // the non-empty ones (the bar)
	Total    int
	Summary  string // "1 of 3 in use · 2 available", also the bar's accessible name
}

// Sparkline is a pool's utilisation over the last day as SVG coordinates.
type Sparkline struct {
	Width  int
	Height int
	Line   string // polyline points
	Area   string // polygon points: the line closed along the bottom
	Label  string // what it shows, in words
	From   string // the first bucket, e.g. "14:00"
	Until  string
	Points []SparkPoint
}

// SparkPoint is one hourly bucket, with a hover title.
type SparkPoint struct {
	X, Y  string
	Title string
}

// EnvRow is one environment in a pool's table.
type EnvRow struct {
	ID            int64
	URL           string
	Name          string
	Key           string
	Capabilities  []Capability
	Status        string
	Tone          string
	Requester     string
	RequesterURL  string // history of that requester
	Expires       string
	ExpiresISO    string
	ExpiresIn     string // "in 2h 59m"
	LastReleased  string
	Deregistering bool
}

// Pool is one pool's section of the index.
type Pool struct {
	Name     string
	Kind     string
	Settings string // "session 3h · at most 12h · cleanup timeout 1h"
	// Removed says the pool left gantry.yaml; its environments still held
	// are listed until their allocations end.
	Removed      string
	Clients      string
	URL          string // the index filtered to this pool
	HistoryURL   string
	Capacity     Capacity
	Utilization  Sparkline
	Environments []EnvRow
	Matching     int    // environments matching the filters
	MoreURL      string // every matching environment, when the table shows only some
	NewerURL     string
	OlderURL     string
}

// DirtyRow is one environment waiting for a human.
type DirtyRow struct {
	ID           int64
	URL          string
	Name         string
	Pool         string
	Since        string
	SinceISO     string
	Reason       string
	OutputTail   string // the last lines of the cleanup output
	RetryURL     string
	MarkCleanURL string
}

// IndexFilter is the index form's current values.
type IndexFilter struct {
	Pool   string
	Status string
	Query  string
}

// IndexView is /environments.
type IndexView struct {
	Pools       []Pool
	Dirty       []DirtyRow
	Filter      IndexFilter
	PoolOptions []Option
	Statuses    []Option
	Filtered    bool
	Example     string // gantry.yaml to start from, for the empty state
}

// AllocRow is one allocation of the history.
type AllocRow struct {
	ID             string
	Environment    string
	EnvironmentURL string
	Pool           string
	Requester      string
	RequesterURL   string
	Client         string
	Started        string
	StartedISO     string
	Ended          string
	EndedISO       string
	Duration       string
	Active         bool
	EndedBy        string
	Outcome        string
	OutcomeTone    string
}

// HistoryFilter is the history form's current values.
type HistoryFilter struct {
	Pool        string
	Requester   string
	Environment string
	Since       string
}

// HistoryView is /environments/allocations.
type HistoryView struct {
	Filter       HistoryFilter
	Rows         []AllocRow
	Pools        []Option
	Environments []Option
	Requesters   []string
	Windows      []Option
	Summary      string // what the rows answer, in words
	Filtered     bool
	Retention    string // how long history is kept
	NewerURL     string
	OlderURL     string
}

// Field is one labelled fact about an environment.
type Field struct {
	Label  string
	Value  string
	Mono   bool
	TestID string
}

// Lease is an environment's current allocation.
type Lease struct {
	ID           string
	Requester    string
	RequesterURL string
	Client       string
	Started      string
	Expires      string
	ExpiresIn    string
}

// Cleanup is an environment's latest cleanup.
type Cleanup struct {
	Output    string
	Truncated bool   // Output holds only the end
	Times     string // "started … · finished …"
	Running   bool   // the page refreshes itself meanwhile
}

// EnvironmentView is /environments/:id.
type EnvironmentView struct {
	ID            int64
	Name          string
	Key           string
	Pool          string
	PoolURL       string
	Status        string
	Tone          string
	Fields        []Field
	Capabilities  []Capability
	Deregistering bool
	Lease         *Lease
	Cleanup       Cleanup
	Dirty         bool
	RetryURL      string
	MarkCleanURL  string
	History       []AllocRow
	Windows       []Option
	HistoryURL    string // the full history page for this environment
	NewerURL      string
	OlderURL      string
	Log           []log.Row
	LogURL        string // the whole log of this environment
}

// canOperate reports whether the signed-in person may act on environments.
func canOperate(ctx context.Context) bool {
	u := views.PageFrom(ctx).User
	return u != nil && u.IsOperator
}

// ExampleConfig is the gantry.yaml an empty installation starts from; a test
// checks that it is valid.
const ExampleConfig = `clients:
  - name: ci
    users: [ci-bot@example.com]       # Gantry users whose API tokens lease
pools:
  - name: integration
    kind: postgres
    postgres: {admin_url_env: POOL_PG_URL}
    session: 3h
  - name: release
    kind: aws
    cleanup: [aws-nuke, run, --config, nuke.yaml, --no-dry-run]
environments:
  - {pool: integration, database: it_env_1}
  - {pool: integration, database: it_env_2, capabilities: {size: large}}
  - pool: release
    account: "111111111111"
    region: us-east-1
    admin_role: arn:aws:iam::111111111111:role/GantryAdmin
    capabilities: {hosted_zone_name: test.example.com}
`

func itoa(n int) string { return strconv.Itoa(n) }
