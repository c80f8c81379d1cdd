// Package approvals renders what waits for people's votes, of every kind of
// subject: the signed-in user's list, and the page an emailed voting link
// opens without a login. What a link's page shows of its subject comes from
// the subject's area as components; this package knows no area. The web
// package builds the view models; the templates only loop and branch.
package approvals

import (
	"github.com/a-h/templ"

	"github.com/gantryhq/gantry/views/components"
)

// Row is one subject waiting for the signed-in user's vote.
type Row struct {
	Kind        string // "execution": the row carries data-<kind>="<id>"
	ID          string
	Title       string // "vpc/main"
	URL         string // where the user votes on it
	Detail      string // "account shared"
	Context     string // "live"
	ContextLink string // "#42"
	ContextURL  string
	ContextNote string // the pull request's title
	Summary     string // "Plan: 1 to add, 0 to change, 0 to destroy."
	Since       string
	SinceISO    string
	Tally       string // "1 of 2 approvals"
	YourVote    string // "you approved; you can change it" or ""
}

// IndexView is /approvals.
type IndexView struct {
	Voter   string // the signed-in user's email
	Rows    []Row
	Showing string // "51–100 of 120" when there is more than a page
	PrevURL string // the page of those waiting less long ("" on the first)
	NextURL string
	CanVote bool  // their role lets them vote from the dashboard
	Empty   Empty // what the page says when nothing waits for them
}

// Empty is what /approvals says when nothing waits for the user's vote:
// what would make votes appear for them, area by area.
type Empty struct {
	Body  string
	Steps []string // e.g. "You vote for account shared of live (…)."
}

// Votes are the votes so far on a link's subject.
type Votes struct {
	Tally       string // "1 of 2 approvals · 0 of 1 rejections"
	Outcome     string // "approved", "rejected", "" while pending
	OutcomeTone string
	Rows        []components.VoteRow
	Note        string
}

// LinkView is the page of an emailed voting link.
type LinkView struct {
	Label       string // the frame's caption: "Infrastructure vote"
	Voter       string
	Title       string          // what is voted on
	Status      templ.Component // its state, beside the title
	Lead        string
	Before      templ.Component // the area's part above the votes
	After       templ.Component // the area's part below them
	Votes       Votes
	Open        bool   // the vote form is shown
	Consequence string // what approving and rejecting do
	Action      string // where the form posts (this page)
	URL         string // the subject in Gantry, for people who sign in
	URLText     string // "See this execution in Gantry →"
}

// Fact is one labelled value of a subject.
type Fact struct {
	Label string
	Value string
	Mono  bool
}

// LinkErrorView is a voting link that does not work: invalid, expired, or
// for a subject that is gone.
type LinkErrorView struct {
	Label     string
	Message   string
	Expired   bool
	Kind      string // the subject's kind, for its test id
	IDLabel   string // "Execution"
	ID        string // known for an expired link
	Facts     []Fact // known when the subject still exists
	Voter     string
	SignInURL string
}
