package ecsfake

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFilter(t *testing.T) {
	t.Parallel()
	web := &instance{ec2ID: "i-1", agentConnected: true, attributes: map[string]string{"role": "web", "zone": "a", "gpu": ""}}
	db := &instance{ec2ID: "i-2", agentConnected: false, attributes: map[string]string{"role": "db", "zone": "b"}}
	bare := &instance{ec2ID: "i-3", agentConnected: true, attributes: map[string]string{}}
	all := []*instance{web, db, bare}

	for _, tc := range []struct {
		filter string
		want   []*instance
	}{
		{"attribute:role == web", []*instance{web}},
		{"attribute:role equals db", []*instance{db}},
		{"attribute:role != web", []*instance{db, bare}},
		{"attribute:role not_equals web", []*instance{db, bare}},
		{"attribute:role == web and attribute:zone == a", []*instance{web}},
		{"attribute:role == web && attribute:zone == b", nil},
		{"attribute:role == web or attribute:zone == b", []*instance{web, db}},
		{"attribute:role==web||attribute:role==db", []*instance{web, db}},
		{"attribute:gpu exists", []*instance{web}},
		{"attribute:gpu !exists", []*instance{db, bare}},
		{"attribute:gpu not_exists", []*instance{db, bare}},
		{"attribute:role in [web, db]", []*instance{web, db}},
		{"attribute:role !in [web]", []*instance{db, bare}},
		{"attribute:role not_in [web,db]", []*instance{bare}},
		{"not attribute:role == web", []*instance{db, bare}},
		{"!(attribute:role == web or attribute:role == db)", []*instance{bare}},
		{"(attribute:zone == a or attribute:zone == b) and agentConnected == true", []*instance{web}},
		{"ec2InstanceId in [i-2, i-3]", []*instance{db, bare}},
		// and binds tighter than or
		{"attribute:role == db or attribute:role == web and attribute:zone == b", []*instance{db}},
	} {
		pred, err := parseFilter(tc.filter)
		require.NoError(t, err, tc.filter)
		var got []*instance
		for _, in := range all {
			if pred(in) {
				got = append(got, in)
			}
		}
		require.Equal(t, tc.want, got, tc.filter)
	}
}

func TestFilterRefuses(t *testing.T) {
	t.Parallel()
	for _, f := range []string{
		"",
		"attribute:role",                  // no operator
		"attribute:role ==",               // no value
		"attribute:role == eu west",       // a value with a space reads as two tokens
		"attribute:role == web and",       // dangling and
		"(attribute:role == web",          // unbalanced
		"attribute:role in web",           // in takes a list
		"attribute:role in [web",          // unterminated list
		"attribute:role =~ w.*",           // matches: not implemented here
		"attribute:role > 3",              // ordering: not implemented here
		"registeredAt == 2020",            // subject not implemented here
		"task:group == service:x",         // subject not implemented here
		"attribute: == x",                 // no attribute name
		"attribute:role == \"web\"",       // no quoting in the language
		"attribute:role == web) or (true", // stray parenthesis
	} {
		_, err := parseFilter(f)
		require.Error(t, err, "%q", f)
	}
}
