// Package devmail renders the dev mailbox of `gantry dev`: every email
// Gantry sent, so a developer can follow a voting link without a mail
// server. The web package builds the view models.
package devmail

// Row is one kept email in the list.
type Row struct {
	ID         int64
	URL        string
	Recipients string
	Subject    string
	When       string
	WhenISO    string
}

// ListView is /dev/mailbox.
type ListView struct {
	Rows  []Row
	Limit int // at most this many are listed
}

// Segment is a stretch of a message body: text, or a link when URL is set.
type Segment struct {
	Text string
	URL  string
}

// MessageView is /dev/mailbox/:id.
type MessageView struct {
	ID         int64
	Subject    string
	Recipients string
	When       string
	WhenISO    string
	Body       []Segment
	Links      []string // the http(s) links in the body, in order
	HasHTML    bool     // the message also has an HTML part, not shown
}
