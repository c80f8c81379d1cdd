package infra

// Rollback is a rollback execution as the run and execution pages show
// it: what it destroys, from which commit, and what a failed one left.
type Rollback struct {
	Unit        string
	ExecutionID string
	URL         string // the rollback execution's page
	State       State
	OfID        string // the execution whose new provider resources it destroys
	OfURL       string
	Reason      string // why it was made, in words
	Commit      string // the commit it runs from
	Addresses   []string
	Targeted    string // "5 addresses targeted"
	// Remaining are the addresses still in the state after it failed;
	// RemainingNote says when that is unknown.
	Remaining      []string
	RemainingNote  string
	RemainingTitle string // "Still in the state (1 resource):"
	Failed         bool
	// Resolved says who marked a failed rollback resolved, when and why.
	Resolved string
	// Held is set while it failed and waits for an operator: Choices for
	// operators, Note for anyone else.
	Held        bool
	Explanation string
	Choices     []Choice
	Note        string
}

// RollbackSection is a run's rollbacks, in the order they run.
type RollbackSection struct {
	Note      string // what the rollback is and where it stands
	Tone      string // the note's: bad while a rollback waits for an operator
	Rollbacks []Rollback
}

// NewResources is what an execution's apply introduced: the resources of
// providers new to its unit, which a rollback would destroy.
type NewResources struct {
	Intro     string // the providers introduced, and what a rollback does
	Providers []string
	Addresses []string
	Error     string
	// RollbackURL is its rollback's page, once there is one.
	RollbackURL   string
	RollbackState State
}
