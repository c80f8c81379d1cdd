// Package apperr is the error type that crosses layers: domain code says what
// went wrong (a code, a message for people, the fields at fault) and the web
// layer alone decides the HTTP status and the page or JSON it becomes.
package apperr

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Codes, stable and documented in docs/api.md.
const (
	Invalid      = "invalid"      // 400: bad input; Fields says which
	Unauthorized = "unauthorized" // 401: no or bad credentials
	Forbidden    = "forbidden"    // 403: authenticated, not allowed
	NotFound     = "not_found"    // 404
	Conflict     = "conflict"     // 409: the state does not allow it
	Locked       = "locked"       // 423: try again later
	RateLimited  = "rate_limited" // 429
	Internal     = "internal"     // 500: logged, details hidden
	Unavailable  = "unavailable"  // 503
)

// Error is an error a person can act on.
type Error struct {
	Code    string
	Message string
	Fields  map[string]string // field name → what is wrong with it
}

func (e *Error) Error() string {
	if len(e.Fields) == 0 {
		return e.Message
	}
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + e.Fields[k]
	}
	return e.Message + " (" + strings.Join(parts, "; ") + ")"
}

// New returns an Error with a formatted message.
func New(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Field returns a 400 naming one field.
func Field(field, reason string) *Error {
	return &Error{Code: Invalid, Message: "invalid " + field + ": " + reason, Fields: map[string]string{field: reason}}
}

// Fields collects problems with several fields before failing.
type Fields map[string]string

// Add records a problem with field (the first one per field wins).
func (f Fields) Add(field, reason string) {
	if _, ok := f[field]; !ok {
		f[field] = reason
	}
}

// Err is nil when nothing was added.
func (f Fields) Err() error {
	if len(f) == 0 {
		return nil
	}
	return &Error{Code: Invalid, Message: "the request has invalid fields", Fields: f}
}

// CodeOf returns err's code, Internal for errors that are not an *Error.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}
