// Package approvals renders what waits for people's votes: the signed-in
// user's list, and the page an emailed voting link opens without a login.
// The web package builds the view models; the templates only loop and
// branch.
package approvals

import (
	"github.com/gantryhq/gantry/views/pages/infra"
)

// Row is one execution waiting for the signed-in user's vote.
type Row struct {
	ExecutionID string
	URL         string // the execution's page, at its vote form
	Repository  string
	PR          string // "#42"
	PRURL       string
	PRTitle     string
	Unit        string
	Account     string
	Summary     string // "Plan: 1 to add, 0 to change, 0 to destroy."
	Since       string
	SinceISO    string
	Tally       string // "1 of 2 approvals"
	YourVote    string // "you approved; you can change it" or ""
}

// IndexView is /approvals.
type IndexView struct {
	Voter      string // the signed-in user's email
	Rows       []Row
	VoterOf    []string // "shared in infra-live": where gantry.yaml names them
	CanVote    bool     // their role lets them vote from the dashboard
	NoAccounts bool     // no repository is configured at all
}

// LinkView is the page of an emailed voting link.
type LinkView struct {
	Voter        string
	ExecutionID  string
	Repository   string
	PR           string
	PRTitle      string
	MergeCommit  string
	Unit         string
	Account      string
	State        infra.State
	Summary      string
	Deps         []infra.Dep
	Plan         string
	Votes        infra.Votes
	Open         bool   // the vote form is shown
	Action       string // where the form posts (this page)
	ExecutionURL string // the execution in Gantry, for people who sign in
}

// LinkErrorView is a voting link that does not work: invalid, expired, or
// for an execution that is gone.
type LinkErrorView struct {
	Message     string
	Expired     bool
	ExecutionID string // known for an expired link
	Unit        string
	Account     string
	Repository  string
	PR          string
	Voter       string
	SignInURL   string
}
