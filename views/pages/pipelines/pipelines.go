// Package pipelines renders the pipelines area: the list of pipelines, a
// pipeline's picture of stages and host groups with where each revision
// stands, and a revision's steps with why each is where it is. The web
// package builds the view models below; the templates only loop and branch.
package pipelines

import "github.com/gantryhq/gantry/views/components"

// IndexView is /pipelines.
type IndexView struct {
	Pipelines []Row
	Example   string // a gantry.yaml pipelines section, for the empty page
}

// Row is one pipeline of the list.
type Row struct {
	Name           string
	URL            string
	Stages         string
	Hosts          string
	InFlight       string
	Blocked        string // "" when none
	LatestFinished string
}

// PipelineView is a pipeline's page.
type PipelineView struct {
	Name       string
	PictureURL string // the live part, refreshed in place
	LogURL     string
	Picture    PictureView
}

// PictureView is the live part of a pipeline's page.
type PictureView struct {
	Columns  []Column
	InFlight []RevisionRow
	Finished []RevisionRow
	Legend   []Chip
}

// Column is the stages at one depth of the pipeline (stages in parallel
// share a column).
type Column struct {
	Stages []Stage
}

// Stage is one stage card.
type Stage struct {
	Name   string
	Kind   string // build, gate, hosts, empty
	After  string // "after beta, canary" or ""
	Groups []Group
	Here   []Chip
	Done   []Chip
}

// Group is one host group in a stage card.
type Group struct {
	Name     string
	Hosts    string // "h1, h2, h3"
	Count    string // "3 hosts"
	Progress []Progress
}

// Progress is one revision's finished hosts in a group.
type Progress struct {
	Revision string
	Text     string // "2/3"
	Done     string // hosts finished
	Max      string // hosts in the group
}

// Chip is a revision's position: its name, a state (a CSS class) and why.
type Chip struct {
	Revision string
	URL      string
	State    string
	Title    string
}

// RevisionRow is one revision listed under the picture.
type RevisionRow struct {
	Revision string
	URL      string
	Status   string
	Tone     components.Tone
	Since    string
	Note     string
}

// RevisionView is a revision's page.
type RevisionView struct {
	Pipeline     string
	PipelineURL  string
	Revision     string
	Status       string
	Tone         components.Tone
	RegisteredBy string
	Registered   string
	LogURL       string
	Blocked      *StepRow
	CanAct       bool // an operator may retry or skip
	RetryURL     string
	SkipURL      string
	Artifacts    []Artifact
	Gates        []GateView
	Steps        []StepRow
	Log          []LogRow
}

// GateView is one gate's vote.
type GateView struct {
	Stage   string
	Tally   string
	Outcome string
	Tone    components.Tone
	Rows    []components.VoteRow
	Open    bool // the signed-in user may vote now
	Note    string
	Action  string
}

// Artifact is one architecture's artifact.
type Artifact struct {
	Arch     string
	Location string
	By       string
}

// StepRow is one step of the revision's tree.
type StepRow struct {
	Event   string
	Target  string
	Depth   string // nesting: 0 pipeline, 1 stage, 2 host group, 3 host
	State   string // CSS class and label
	Why     string
	Attempt string
	Output  string
	Reason  string
	// TailURL, for a command running now, is where its output grows from
	// TailOffset characters on (the page's script follows it).
	TailURL    string
	TailOffset string
}

// LogRow is one entry of the revision's log.
type LogRow struct {
	At     string
	Event  string
	Target string
	Actor  string
	Tone   components.Tone
}
