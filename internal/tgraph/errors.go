package tgraph

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Error is a problem found while discovering units, located at a file and
// line of the checkout. File is repository-relative with forward slashes;
// Line is 0 when the problem has no better place than the file itself.
type Error struct {
	File    string
	Line    int
	Message string
}

func (e *Error) Error() string {
	switch {
	case e.File == "":
		return e.Message
	case e.Line == 0:
		return e.File + ": " + e.Message
	default:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Message)
	}
}

// errorAt builds an Error at the start of rng.
func errorAt(rng hcl.Range, format string, args ...any) *Error {
	return &Error{File: rng.Filename, Line: rng.Start.Line, Message: fmt.Sprintf(format, args...)}
}

// diagError turns the first error diagnostic into an Error.
func diagError(diags hcl.Diagnostics) *Error {
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if x, ok := d.Extra.(hclsyntax.FunctionCallUnknownDiagExtra); ok {
			msg = "function " + x.CalledFunctionName() + " is not supported by dependency discovery"
			if why := unsupportedWhy[x.CalledFunctionName()]; why != "" {
				msg += ": " + why
			}
			d.Detail = ""
		}
		switch {
		case d.Detail == "":
		case d.Summary == "Error in function call" || d.Summary == "Invalid function argument":
			msg = d.Detail
		default:
			msg += ": " + d.Detail
		}
		e := &Error{Message: msg}
		if d.Subject != nil {
			e.File, e.Line = d.Subject.Filename, d.Subject.Start.Line
		}
		return e
	}
	return nil
}

// sortErrors sorts errs by file, line and message and drops duplicates.
func sortErrors(errs []*Error) []*Error {
	slices.SortFunc(errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Message, b.Message))
	})
	return slices.CompactFunc(errs, func(a, b *Error) bool { return *a == *b })
}

// unsupportedWhy says why some functions cannot be evaluated when the graph
// is read.
var unsupportedWhy = map[string]string{
	"get_env":               "the environment a command will run in is not known when the graph is read",
	"get_terraform_command": "which command (plan, apply...) will run is not known when the graph is read",
	"run_cmd":               "the graph is read without running commands",
}

// maxReported bounds how many errors a failed scan lists; the rest are
// counted.
const maxReported = 20

// joinErrors sorts and de-duplicates errs and joins them into one error, or
// returns nil when there are none. errors.As finds the first *Error.
func joinErrors(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	errs = sortErrors(errs)
	if len(errs) == 1 {
		return errs[0]
	}
	list := make([]error, 0, min(len(errs), maxReported)+1)
	for _, e := range errs[:min(len(errs), maxReported)] {
		list = append(list, e)
	}
	if n := len(errs) - maxReported; n > 0 {
		list = append(list, fmt.Errorf("and %d more errors", n))
	}
	return errors.Join(list...)
}
