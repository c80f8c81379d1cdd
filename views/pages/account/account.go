// Package account renders the pages about one's own access: signing in and
// API tokens.
package account

import "strconv"

// LoginView is the sign-in form.
type LoginView struct {
	Email string
	Next  string
	Error string
}

// Token is one API token in the list.
type Token struct {
	ID       int64
	Name     string
	Prefix   string
	Scopes   string
	Owner    string
	Created  string
	LastUsed string
	Expires  string
	Status   string // active, revoked, expired
	Tone     string
	Active   bool
}

// Scope is a checkbox on the new-token form.
type Scope struct {
	Name    string
	Help    string
	Checked bool
}

// TokensView is the tokens page.
type TokensView struct {
	Tokens    []Token
	Scopes    []Scope
	NewSecret string // shown once, right after creation
	NewName   string
	Errors    map[string]string
	FormName  string
	ShowOwner bool
	// Form offers the new-token form: on one's own tokens, not on the
	// admin's list of everyone's, where a new token would be the admin's.
	Form bool
}

func tokenRevokeURL(id int64) string { return "/tokens/" + strconv.FormatInt(id, 10) + "/revoke" }
