// Package log renders the deployment log: the filtered timeline and its rows.
package log

// Row is one log entry as the timeline shows it.
type Row struct {
	ID         int64
	When       string // human time, in UTC
	WhenISO    string
	Deployment string
	Target     string
	TargetURL  string // the log filtered to this target
	Revision   string
	Event      string
	Tone       string // badge tone derived from the event name
	Actor      string
	// DetailSummary is the detail on one line, "key: value · key: value",
	// each value shortened; DetailJSON is the whole detail, indented, shown
	// on demand. Both are empty when the entry has no detail.
	DetailSummary string
	DetailJSON    string
}

// Filter is the form's current values.
type Filter struct {
	Target     string
	Event      string
	Revision   string
	Actor      string
	Deployment string
	Since      string
	Until      string
}

// View is the whole page.
type View struct {
	Filter    Filter
	Rows      []Row
	NewerURL  string
	OlderURL  string
	StreamURL string // empty when the page is not the newest one (nothing to tail)
	Events    []string
	Filtered  bool
}

// PanelProps is what Panel shows: the rows, the /log address of all of
// them, what an empty panel says, and the panel's test id.
type PanelProps struct {
	TestID string
	Rows   []Row
	URL    string
	Empty  string
}
