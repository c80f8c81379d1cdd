package components

// VoteRow is one vote as cast, for VoteTable.
type VoteRow struct {
	Voter    string
	Decision string
	Tone     string
	Comment  string
	Via      string
	When     string
	WhenISO  string
	Replaced bool // a later vote of the same voter counts instead
}
