// Package admin renders the administration pages: users and background jobs.
package admin

import (
	"net/url"
	"strconv"
)

// UserRow is one user in the list.
type UserRow struct {
	ID       int64
	Email    string
	Name     string
	Role     string
	Disabled bool
	Created  string
	IsSelf   bool
}

// UsersView is the users page.
type UsersView struct {
	Users  []UserRow
	Roles  []string
	Errors map[string]string
	Form   NewUserForm
}

// NewUserForm keeps what was typed when creation fails.
type NewUserForm struct {
	Email string
	Name  string
	Role  string
}

// StateTab is one job state with its count.
type StateTab struct {
	State   string
	Count   int
	Current bool
	URL     string
}

// JobRow is one River job.
type JobRow struct {
	ID        int64
	Kind      string
	Queue     string
	State     string
	Tone      string
	Attempt   string
	When      string
	LastError string
	CanRetry  bool
	CanCancel bool
}

// JobsView is the jobs page.
type JobsView struct {
	Tabs     []StateTab
	Jobs     []JobRow
	State    string
	OlderURL string
}

func userURL(id int64, action string) string {
	return "/admin/users/" + strconv.FormatInt(id, 10) + "/" + action
}

// jobURL is where a job's action posts; it carries the tab it was taken
// on, so the page comes back to that tab.
func jobURL(id int64, action, state string) string {
	return "/admin/jobs/" + strconv.FormatInt(id, 10) + "/" + action + "?state=" + url.QueryEscape(state)
}
