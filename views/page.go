// Package views renders Gantry's HTML with templ. Layouts, components and
// per-area pages live in subpackages; this package carries what every page
// needs from the request (who is signed in, the CSRF token, the current path,
// a flash message) through the context, because templ components cannot see
// the web framework's request state.
package views

import "context"

// Page is the per-request state every page may use.
type Page struct {
	User  *User
	CSRF  string
	Path  string
	Flash *Flash
	// Nav lists the areas, in the order the application lists them.
	Nav []NavItem
	// DevMailbox says the dev mailbox page exists (gantry dev only), so the
	// navigation links to it.
	DevMailbox bool
}

// NavItem is one link of the navigation.
type NavItem struct {
	Href  string
	Label string
}

// User is the signed-in person, as pages need them.
type User struct {
	Name       string
	Email      string
	Role       string
	IsAdmin    bool
	IsOperator bool
}

// Flash is a one-time message shown at the top of the next page.
type Flash struct {
	OK      bool
	Message string
}

type pageKey struct{}

// WithPage stores p in ctx for the templates.
func WithPage(ctx context.Context, p Page) context.Context {
	return context.WithValue(ctx, pageKey{}, p)
}

// PageFrom returns the request's page state (empty when none was set).
func PageFrom(ctx context.Context) Page {
	p, _ := ctx.Value(pageKey{}).(Page)
	return p
}

// Current reports whether the request path is in the section at prefix, for
// marking the navigation.
func Current(ctx context.Context, prefix string) bool {
	path := PageFrom(ctx).Path
	if prefix == "/" {
		return path == "/"
	}
	return path == prefix || len(path) > len(prefix) && path[:len(prefix)] == prefix && path[len(prefix)] == '/'
}
