package allocation_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/allocation"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	valid := func() allocation.Request {
		return allocation.Request{Pool: "release", Requester: "ci run 42", Requirements: []allocation.Requirement{req("region", "eu")}}
	}
	many := func(n int) []allocation.Requirement {
		out := make([]allocation.Requirement, n)
		for i := range out {
			out[i] = req()
		}
		return out
	}
	manyCaps := map[string]string{}
	for i := range allocation.MaxCapabilities + 1 {
		manyCaps[fmt.Sprint("k", i)] = "v"
	}
	cases := []struct {
		name   string
		edit   func(*allocation.Request)
		errors allocation.FieldErrors // nil: valid
	}{
		{name: "valid", edit: func(*allocation.Request) {}},
		{name: "no requirements means one", edit: func(r *allocation.Request) { r.Requirements = nil }},
		{name: "empty capabilities match any", edit: func(r *allocation.Request) { r.Requirements = many(3) }},
		{name: "the most requirements", edit: func(r *allocation.Request) { r.Requirements = many(allocation.MaxRequirements) }},
		{name: "a 1024-character requester", edit: func(r *allocation.Request) { r.Requester = strings.Repeat("é", 1024) }},
		{
			name:   "pool missing",
			edit:   func(r *allocation.Request) { r.Pool = "" },
			errors: allocation.FieldErrors{{Field: "pool", Reason: "is required"}},
		},
		{
			name: "pool and requester blank",
			edit: func(r *allocation.Request) { r.Pool, r.Requester = " ", "\t" },
			errors: allocation.FieldErrors{
				{Field: "pool", Reason: "is required"},
				{Field: "requester", Reason: "is required"},
			},
		},
		{
			name:   "requester too long",
			edit:   func(r *allocation.Request) { r.Requester = strings.Repeat("x", 1025) },
			errors: allocation.FieldErrors{{Field: "requester", Reason: "must be at most 1024 characters"}},
		},
		{
			name:   "requester with a NUL",
			edit:   func(r *allocation.Request) { r.Requester = "a\x00b" },
			errors: allocation.FieldErrors{{Field: "requester", Reason: "must not contain NUL characters"}},
		},
		{
			name:   "requester not UTF-8",
			edit:   func(r *allocation.Request) { r.Requester = "a\xffb" },
			errors: allocation.FieldErrors{{Field: "requester", Reason: "must be valid UTF-8"}},
		},
		{
			name:   "pool with a newline",
			edit:   func(r *allocation.Request) { r.Pool = "re\nlease" },
			errors: allocation.FieldErrors{{Field: "pool", Reason: "must not contain control characters"}},
		},
		{
			name:   "too many requirements",
			edit:   func(r *allocation.Request) { r.Requirements = many(allocation.MaxRequirements + 1) },
			errors: allocation.FieldErrors{{Field: "requirements", Reason: "at most 32 environments per request, got 33"}},
		},
		{
			name: "too many capabilities",
			edit: func(r *allocation.Request) {
				r.Requirements = []allocation.Requirement{req(), {Capabilities: manyCaps}}
			},
			errors: allocation.FieldErrors{{Field: "requirements[1].capabilities", Reason: "at most 32 capabilities per requirement, got 33"}},
		},
		{
			name: "empty capability names and values",
			edit: func(r *allocation.Request) {
				r.Requirements = []allocation.Requirement{req("", "x"), req("region", "", "gpu", "t4")}
			},
			errors: allocation.FieldErrors{
				{Field: "requirements[0].capabilities", Reason: `capability name "": is required`},
				{Field: "requirements[1].capabilities.region", Reason: "must not be empty"},
			},
		},
		{
			name: "capability value too long",
			edit: func(r *allocation.Request) {
				r.Requirements = []allocation.Requirement{req("zone", strings.Repeat("z", 1025))}
			},
			errors: allocation.FieldErrors{{Field: "requirements[0].capabilities.zone", Reason: "must be at most 1024 characters"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := valid()
			tc.edit(&r)
			err := r.Validate()
			if tc.errors == nil {
				require.NoError(t, err)
				return
			}
			var got allocation.FieldErrors
			require.True(t, errors.As(err, &got), "%T is not FieldErrors", err)
			require.Equal(t, tc.errors, got)
		})
	}
}

func TestFieldErrorsMessage(t *testing.T) {
	t.Parallel()
	err := allocation.Request{}.Validate()
	require.EqualError(t, err, "allocation: invalid request: pool: is required; requester: is required")
}

func TestWanted(t *testing.T) {
	t.Parallel()
	require.Equal(t, []allocation.Requirement{{}}, allocation.Request{}.Wanted())
	reqs := []allocation.Requirement{req("a", "b"), req()}
	require.Equal(t, reqs, allocation.Request{Requirements: reqs}.Wanted())
}
