package client_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/client"
)

// rawCall makes an API request and returns the answer's bytes.
func (s *server) rawCall(t *testing.T, method, path, body string) []byte {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s %s: %s", method, path, raw)
	return raw
}

// requireSameShape decodes a server answer into the client's type refusing
// fields the client lacks, then checks that every field the client writes
// is one the server sent: the client misses nothing, and expects nothing
// the server does not send.
func requireSameShape(t *testing.T, raw []byte, into any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(into), "%s", raw)
	again, err := json.Marshal(into)
	require.NoError(t, err)
	var server, mine any
	require.NoError(t, json.Unmarshal(raw, &server))
	require.NoError(t, json.Unmarshal(again, &mine))
	requireKeysIn(t, "", mine, server)
}

func requireKeysIn(t *testing.T, at string, mine, server any) {
	t.Helper()
	switch m := mine.(type) {
	case map[string]any:
		s, ok := server.(map[string]any)
		require.True(t, ok, "%s: the server sent %T", at, server)
		for k, v := range m {
			sv, ok := s[k]
			require.True(t, ok, "%s.%s: the client has a field the server does not send", at, k)
			requireKeysIn(t, at+"."+k, v, sv)
		}
	case []any:
		s, ok := server.([]any)
		require.True(t, ok, "%s: the server sent %T", at, server)
		require.Len(t, m, len(s), at)
		for i := range m {
			requireKeysIn(t, at+"[]", m[i], s[i])
		}
	}
}

// TestTypesMatchTheServersJSON: the client restates the allocation API's
// answers (the server's are in web/environments_api.go); real answers of
// every endpoint decode into its types field for field.
func TestTypesMatchTheServersJSON(t *testing.T) {
	t.Parallel()
	s := setup(t, pool{Name: "pg", Size: 1, Caps: func(int) string { return "{size: small}" }})

	var a client.Allocation
	requireSameShape(t, s.rawCall(t, "POST", "/allocations", `{"pool":"pg","requester":"types","requirements":[{"capabilities":{"size":"small"}}]}`), &a)
	require.Len(t, a.Leases, 1)
	require.NotNil(t, a.Leases[0].Credentials)
	id := a.Leases[0].ID

	var got client.Lease
	requireSameShape(t, s.rawCall(t, "GET", "/api/v1/allocations/"+id, ""), &got)
	require.Equal(t, id, got.ID)

	var extended client.Lease
	requireSameShape(t, s.rawCall(t, "POST", "/allocations/"+id+"/extend", `{"duration":"10m"}`), &extended)
	require.True(t, extended.ExpiresAt.After(got.ExpiresAt))

	var pools struct {
		Pools []client.Pool `json:"pools"`
	}
	raw := s.rawCall(t, "GET", "/pools", "")
	// The server repeats the pool's name in its capacity; the client, whose
	// Capacity is only counts, leaves it out.
	raw = bytes.ReplaceAll(raw, []byte(`"capacity":{"pool":"pg",`), []byte(`"capacity":{`))
	requireSameShape(t, raw, &pools)
	require.Equal(t, 1, pools.Pools[0].Capacity.InUse)

	var released client.Lease
	requireSameShape(t, s.rawCall(t, "DELETE", "/allocations/"+id, `{"outcome":"success"}`), &released)
	require.False(t, released.Active())
	require.Equal(t, "client", released.EndedBy)

	// The client reads the history's allocations; next is for paging.
	var history struct {
		Allocations []client.Lease `json:"allocations"`
		Next        string         `json:"next"`
	}
	requireSameShape(t, s.rawCall(t, "GET", "/allocations?limit=1", ""), &history)
	require.Len(t, history.Allocations, 1)
	require.NotEmpty(t, history.Next)
}
