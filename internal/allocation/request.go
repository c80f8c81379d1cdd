package allocation

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// Limits on a request. Pool names and capability keys come from the
// operator's configuration, requesters and values from CI jobs; the bounds
// keep one request's cost and its rows small.
const (
	MaxRequirements    = 32   // environments per request
	MaxCapabilities    = 32   // capabilities per requirement
	MaxRequesterLength = 1024 // characters, as the design says
	MaxNameLength      = 128  // characters of a pool name or capability key
	MaxValueLength     = 1024 // characters of a capability value
)

// Request is an allocation request as POST /allocations carries it.
type Request struct {
	Pool         string
	Requester    string
	Requirements []Requirement // one per environment wanted; none means one of any kind
}

// Wanted returns the requirements to match: the request's, or a single
// empty one when it names none.
func (r Request) Wanted() []Requirement {
	if len(r.Requirements) == 0 {
		return []Requirement{{}}
	}
	return r.Requirements
}

// FieldError is a problem with one field of a request. Field uses the JSON
// names: "pool", "requester", "requirements", "requirements[2].capabilities",
// "requirements[2].capabilities.region".
type FieldError struct {
	Field  string
	Reason string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Reason }

// FieldErrors is every problem found with a request, in field order.
type FieldErrors []FieldError

func (es FieldErrors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return "allocation: invalid request: " + strings.Join(parts, "; ")
}

// Validate reports every problem with r as FieldErrors, or nil. It checks the
// request's shape only; whether the pool exists and can serve it is for the
// caller and Classify.
func (r Request) Validate() error {
	var errs FieldErrors
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if reason := checkText(r.Pool, MaxNameLength, true); reason != "" {
		add("pool", "%s", reason)
	}
	if reason := checkText(r.Requester, MaxRequesterLength, true); reason != "" {
		add("requester", "%s", reason)
	}
	if len(r.Requirements) > MaxRequirements {
		add("requirements", "at most %d environments per request, got %d", MaxRequirements, len(r.Requirements))
		return errs
	}
	for i, req := range r.Requirements {
		field := fmt.Sprintf("requirements[%d].capabilities", i)
		if len(req.Capabilities) > MaxCapabilities {
			add(field, "at most %d capabilities per requirement, got %d", MaxCapabilities, len(req.Capabilities))
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(req.Capabilities)) {
			if reason := checkText(k, MaxNameLength, true); reason != "" {
				add(field, "capability name %q: %s", k, reason)
				continue
			}
			if reason := checkText(req.Capabilities[k], MaxValueLength, false); reason != "" {
				add(field+"."+k, "%s", reason)
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// checkText returns why s is not acceptable, or "". Text must be valid UTF-8
// without NUL (PostgreSQL text cannot hold it) and not blank; names must also
// be free of control characters.
func checkText(s string, maxLen int, name bool) string {
	switch {
	case strings.TrimSpace(s) == "":
		if name {
			return "is required"
		}
		return "must not be empty"
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	case utf8.RuneCountInString(s) > maxLen:
		return fmt.Sprintf("must be at most %d characters", maxLen)
	case strings.ContainsRune(s, 0):
		return "must not contain NUL characters"
	case name && strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "must not contain control characters"
	}
	return ""
}
