package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/awsenv"
	"github.com/gantryhq/gantry/internal/awsenv/awstest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/web"
)

type poolSpec = servertest.Pool

func (b *bundle) applyPools(t testing.TB, specs ...poolSpec) map[string][]string {
	return b.ApplyPools(t, specs...)
}

func (b *bundle) sync(t testing.TB, yaml string) { b.Sync(t, yaml) }

// ciToken is a token of the lease client "ci".
func (b *bundle) ciToken(t testing.TB) string {
	t.Helper()
	u, err := models.UserByEmail(context.Background(), b.db.Bun, "ci@example.com")
	if err != nil {
		u = b.user(t, "ci@example.com", models.RoleViewer)
	}
	return b.token(t, u, "read", "write")
}

func (b *bundle) startWorkers(t testing.TB) { b.StartWorkers(t) }

type allocateResponse struct {
	RequestID   string `json:"request_id"`
	Allocations []struct {
		ID           string            `json:"id"`
		Environment  string            `json:"environment"`
		Database     string            `json:"database"`
		Capabilities map[string]string `json:"capabilities"`
		ExpiresAt    time.Time         `json:"expires_at"`
		Credentials  struct {
			URL string `json:"url"`
		} `json:"credentials"`
	} `json:"allocations"`
}

func decodeAllocation(t testing.TB, body map[string]any) allocateResponse {
	t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	var out allocateResponse
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

func TestAllocationBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.applyPools(t, poolSpec{Name: "ci", Size: 2, Caps: func(i int) string { return fmt.Sprintf("{size: %s}", []string{"small", "large"}[i]) }})
	token := b.ciToken(t)
	cases := []struct {
		name, body, field string
	}{
		{"unknown pool", `{"pool":"nope","requester":"t"}`, "pool"},
		{"missing requester", `{"pool":"ci"}`, "requester"},
		{"requester over 1024 characters", `{"pool":"ci","requester":"` + strings.Repeat("r", 1025) + `"}`, "requester"},
		{"unknown field", `{"pool":"ci","requester":"t","priority":1}`, "priority"},
		{"capability no environment has", `{"pool":"ci","requester":"t","requirements":[{"capabilities":{"size":"huge"}}]}`, "requirements[0].capabilities.size"},
		{"more environments than the pool has", `{"pool":"ci","requester":"t","requirements":[{},{},{}]}`, ""},
		{"malformed JSON", `{"pool":`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, body := b.call(t, "POST", "/allocations", token, tc.body)
			require.Equal(t, http.StatusBadRequest, res.StatusCode, body)
			if tc.field != "" {
				require.Contains(t, errorFields(body), tc.field, body)
			}
		})
	}
	t.Run("no token is 401", func(t *testing.T) {
		res, body := b.call(t, "POST", "/allocations", "", `{"pool":"ci","requester":"t"}`)
		require.Equal(t, http.StatusUnauthorized, res.StatusCode)
		require.Equal(t, "unauthorized", errorCode(body))
	})
	t.Run("a token of someone not on the allow list is 403", func(t *testing.T) {
		stranger := b.token(t, b.user(t, "stranger@example.com", models.RoleAdmin), "read", "write")
		res, _ := b.call(t, "POST", "/allocations", stranger, `{"pool":"ci","requester":"t"}`)
		require.Equal(t, http.StatusForbidden, res.StatusCode)
	})
	t.Run("nothing was allocated", func(t *testing.T) {
		active, err := models.ListAllocations(context.Background(), b.db.Bun, models.AllocationFilter{ActiveOnly: true})
		require.NoError(t, err)
		require.Empty(t, active)
	})
	t.Run("a capability that exists but is taken is 423", func(t *testing.T) {
		res, _ := b.call(t, "POST", "/allocations", token, `{"pool":"ci","requester":"a","requirements":[{"capabilities":{"size":"large"}}]}`)
		require.Equal(t, http.StatusOK, res.StatusCode)
		res, body := b.call(t, "POST", "/allocations", token, `{"pool":"ci","requester":"b","requirements":[{"capabilities":{"size":"large"}}]}`)
		require.Equal(t, http.StatusLocked, res.StatusCode, body)
		require.Equal(t, "locked", errorCode(body))
		require.Equal(t, "5", res.Header.Get("Retry-After"), "waiting clients come back soon")
	})
}

func TestPostgresLeaseLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.applyPools(t, poolSpec{Name: "pg", Size: 1})
	b.startWorkers(t)
	token := b.ciToken(t)
	ctx := context.Background()

	res, body := b.call(t, "POST", "/allocations", token, `{"pool":"pg","requester":"suite-1"}`)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	lease := decodeAllocation(t, body).Allocations[0]
	require.True(t, strings.HasPrefix(lease.Credentials.URL, "postgres://gantry_env_"))
	require.WithinDuration(t, time.Now().Add(3*time.Hour), lease.ExpiresAt, time.Minute, "the default session is 3 hours")

	conn, err := pgx.Connect(ctx, lease.Credentials.URL)
	require.NoError(t, err, "the credentials connect")
	_, err = conn.Exec(ctx, "CREATE TABLE leftovers (id int)")
	require.NoError(t, err, "and may create tables")

	res, body = b.call(t, "DELETE", "/allocations/"+lease.ID, token, `{"outcome":"success"}`)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Equal(t, "success", body["outcome"])
	require.Equal(t, "client", body["ended_by"])

	_, err = conn.Exec(ctx, "SELECT 1")
	require.Error(t, err, "the open session was ended")
	conn.Close(ctx)
	_, err = pgx.Connect(ctx, lease.Credentials.URL)
	require.Error(t, err, "the credentials no longer connect")

	env := b.WaitEnvironment(t, lease.Environment, models.EnvAvailable)
	require.Contains(t, env.CleanupOutput, "recreating database")
	require.NotNil(t, env.LastReleasedAt)

	admin, err := pgx.Connect(ctx, strings.Replace(testdb.AdminURL(), "/postgres?", "/"+lease.Database+"?", 1))
	require.NoError(t, err)
	defer admin.Close(ctx)
	var tables int
	require.NoError(t, admin.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables))
	require.Zero(t, tables, "the database is empty again")

	res, _ = b.call(t, "DELETE", "/allocations/"+lease.ID, token, "")
	require.Equal(t, http.StatusOK, res.StatusCode, "releasing again is harmless")

	events, err := models.ListLog(ctx, b.db.Bun, models.LogFilter{Target: "environment:" + lease.Environment})
	require.NoError(t, err)
	var names []string
	for _, e := range events {
		names = append(names, e.Event)
	}
	require.Equal(t, []string{"environment-cleaned", "environment-released", "environment-allocated", "environment-registered"}, names)

	res, body = b.call(t, "GET", "/allocations?requester=suite-1", token, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Len(t, body["allocations"], 1, "the history answers which environments requester T held")

	metrics := b.metrics(t, token)
	for _, want := range []string{
		`gantry_allocation_requests_total{capabilities="",pool="pg",status="200"} 1`,
		`gantry_allocation_outcomes_total{capabilities="",outcome="success",pool="pg"} 1`,
		`gantry_environments{pool="pg",status="available"} 1`,
		`gantry_environments_dirty 0`,
		`gantry_environment_cleanup_seconds_count{pool="pg",result="clean"} 1`,
		`gantry_allocation_admission_wait_seconds_count 3`, // the allocation and the two releases
	} {
		require.Contains(t, metrics, want)
	}
}

// metrics scrapes /metrics with token.
func (b *bundle) metrics(t testing.TB, token string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", b.srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(raw)
}

func TestAllocationHistoryPagesWithoutGaps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var envs strings.Builder
	for i := 0; i < 5; i++ {
		fmt.Fprintf(&envs, "  - {pool: seats, name: seat-%d}\n", i)
	}
	b.sync(t, "clients:\n  - name: ci\n    users: [ci@example.com]\npools:\n  - name: seats\n    kind: slot\nenvironments:\n"+envs.String())
	token := b.ciToken(t)
	res, body := b.call(t, "POST", "/allocations", token, `{"pool":"seats","requester":"t","requirements":[{},{},{},{},{}]}`)
	require.Equal(t, http.StatusOK, res.StatusCode, body)

	seen := map[string]bool{}
	next := "/api/v1/allocations?pool=seats&limit=2"
	for pages := 0; next != ""; pages++ {
		require.Less(t, pages, 5)
		res, body := b.call(t, "GET", next, token, "")
		require.Equal(t, http.StatusOK, res.StatusCode, body)
		for _, a := range body["allocations"].([]any) {
			id := a.(map[string]any)["id"].(string)
			require.False(t, seen[id], "allocation %s listed twice", id)
			seen[id] = true
		}
		next, _ = body["next"].(string)
	}
	require.Len(t, seen, 5, "the five allocations of one request share a start time; none is skipped")

	res, body = b.call(t, "GET", "/api/v1/allocations?cursor=nonsense", token, "")
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, errorFields(body), "cursor")
}

func TestAWSLeasesAndIAMAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const role = "arn:aws:iam::123456789012:role/GantryAdmin"
	b.aws.AddRole(role, 12*time.Hour)
	b.sync(t, `clients:
  - name: ci
    users: [ci@example.com]
  - name: build-account
    aws_accounts: ["111122223333"]
pools:
  - name: accounts
environments:
  - pool: accounts
    account: "123456789012"
    region: eu-west-1
    admin_role: `+role+"\n")
	ctx := context.Background()

	// A CI job in account 111122223333 signs sts:GetCallerIdentity with its
	// own credentials; Gantry asks STS who that is.
	ciCreds := b.aws.AddUser("111122223333", "ci-runner")
	identity, err := awsenv.SignCallerIdentity(ctx, b.aws.Config(ciCreds), b.aws.URL)
	require.NoError(t, err)
	call := func(method, path, body, identity string) (*http.Response, map[string]any) {
		req, _ := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(awsenv.IdentityHeader, identity)
		return b.do(t, req)
	}

	res, body := call("POST", "/allocations", `{"pool":"accounts","requester":"iam-job"}`, identity)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	alloc := body["allocations"].([]any)[0].(map[string]any)
	require.Equal(t, "123456789012", alloc["account"])
	require.Equal(t, "build-account", alloc["client"])
	creds := alloc["credentials"].(map[string]any)
	keyID := creds["access_key_id"].(string)
	require.NotEmpty(t, creds["secret_access_key"])
	require.NotEmpty(t, creds["session_token"])
	require.NoError(t, b.aws.CheckSession(keyID, time.Now()), "the session credentials work")

	res, _ = call("DELETE", "/allocations/"+alloc["id"].(string), `{"outcome":"success"}`, identity)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.ErrorIs(t, b.aws.CheckSession(keyID, time.Now()), awstest.ErrRevoked, "release revoked the session with the deny policy")
	policy, ok := b.aws.RolePolicy(role, awsenv.RevokePolicyName)
	require.True(t, ok)
	require.Contains(t, policy, "aws:TokenIssueTime")

	t.Run("an account not on the allow list is 403", func(t *testing.T) {
		other, err := awsenv.SignCallerIdentity(ctx, b.aws.Config(b.aws.AddUser("444455556666", "stranger")), b.aws.URL)
		require.NoError(t, err)
		res, _ := call("POST", "/allocations", `{"pool":"accounts","requester":"x"}`, other)
		require.Equal(t, http.StatusForbidden, res.StatusCode)
	})
	t.Run("a tampered identity is 401", func(t *testing.T) {
		res, body := call("POST", "/allocations", `{"pool":"accounts","requester":"x"}`, identity[:len(identity)-8]+"AAAAAAAA")
		require.Equal(t, http.StatusUnauthorized, res.StatusCode, body)
	})
}

func TestClientRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.sync(t, "clients:\n  - name: ci\n    users: [ci@example.com]\n    rate: 1\npools:\n  - name: seats\n    kind: slot\nenvironments:\n  - {pool: seats, name: only}\n")
	token := b.ciToken(t)
	limited := 0
	for i := 0; i < 6; i++ {
		res, body := b.call(t, "POST", "/allocations", token, `{"pool":"seats","requester":"r"}`)
		if res.StatusCode == http.StatusTooManyRequests {
			limited++
			require.Equal(t, "rate_limited", errorCode(body))
			require.NotEmpty(t, res.Header.Get("Retry-After"))
		}
	}
	require.Positive(t, limited, "a client with rate 1 (burst 2) is limited within six quick calls")
}

// The allocation API remembers tokens and allow-list answers for
// web.AuthCacheTTL: changes made by another process (gantry admin, gantry
// config apply, another web process) take effect within it, changes made
// through this process at once.
func TestRevocationReachesTheAllocationAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const yaml = "clients:\n  - name: ci\n    users: [%s]\npools:\n  - name: seats\n    kind: slot\nenvironments:\n  - {pool: seats, name: a}\n  - {pool: seats, name: b}\n"
	b.sync(t, fmt.Sprintf(yaml, "ci@example.com"))
	ci, err := models.UserByEmail(context.Background(), b.db.Bun, "ci@example.com")
	if err != nil {
		ci = b.user(t, "ci@example.com", models.RoleViewer)
	}
	admin := b.token(t, b.user(t, "root@example.com", models.RoleAdmin), "read", "write", "admin")
	leaseAndReturn := func(t *testing.T, token string) int {
		t.Helper()
		res, body := b.call(t, "POST", "/allocations", token, `{"pool":"seats","requester":"r"}`)
		if res.StatusCode == http.StatusOK {
			id := body["allocations"].([]any)[0].(map[string]any)["id"].(string)
			res, _ := b.call(t, "DELETE", "/allocations/"+id, token, "")
			require.Equal(t, http.StatusOK, res.StatusCode)
		}
		return res.StatusCode
	}
	// refusedOnceTTLPassed checks that a call starting web.AuthCacheTTL
	// after a change (committed by changedAt) sees it.
	refusedOnceTTLPassed := func(t *testing.T, token string, want int, changedAt time.Time) {
		t.Helper()
		time.Sleep(time.Until(changedAt.Add(web.AuthCacheTTL)))
		require.Equal(t, want, leaseAndReturn(t, token))
	}
	tokenID := func(t *testing.T) int64 {
		tokens, err := models.ListTokens(context.Background(), b.db.Bun, ci.ID)
		require.NoError(t, err)
		return tokens[0].ID
	}

	t.Run("a token revoked by another process stops working within the TTL", func(t *testing.T) {
		token := b.token(t, ci, "read", "write")
		require.Equal(t, http.StatusOK, leaseAndReturn(t, token)) // remembered now
		require.NoError(t, access.RevokeToken(context.Background(), b.db.Bun, tokenID(t), 0, "gantry-admin"))
		refusedOnceTTLPassed(t, token, http.StatusUnauthorized, time.Now())
	})
	t.Run("a token revoked through this process stops working at once", func(t *testing.T) {
		token := b.token(t, ci, "read", "write")
		require.Equal(t, http.StatusOK, leaseAndReturn(t, token))
		res, _ := b.call(t, "DELETE", "/api/v1/tokens/"+strconv.FormatInt(tokenID(t), 10), admin, "")
		require.Equal(t, http.StatusNoContent, res.StatusCode)
		require.Equal(t, http.StatusUnauthorized, leaseAndReturn(t, token))
	})
	t.Run("an owner disabled through this process is refused at once", func(t *testing.T) {
		token := b.token(t, ci, "read", "write")
		require.Equal(t, http.StatusOK, leaseAndReturn(t, token))
		res, _ := b.call(t, "PATCH", "/api/v1/users/"+strconv.FormatInt(ci.ID, 10), admin, `{"disabled":true}`)
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Equal(t, http.StatusUnauthorized, leaseAndReturn(t, token))
		res, _ = b.call(t, "PATCH", "/api/v1/users/"+strconv.FormatInt(ci.ID, 10), admin, `{"disabled":false}`)
		require.Equal(t, http.StatusOK, res.StatusCode)
	})
	t.Run("an owner disabled by another process is refused within the TTL", func(t *testing.T) {
		token := b.token(t, ci, "read", "write")
		require.Equal(t, http.StatusOK, leaseAndReturn(t, token))
		require.NoError(t, access.SetDisabled(context.Background(), b.db.Bun, ci.ID, true, "gantry-admin"))
		t.Cleanup(func() { _ = access.SetDisabled(context.Background(), b.db.Bun, ci.ID, false, "gantry-admin") })
		refusedOnceTTLPassed(t, token, http.StatusUnauthorized, time.Now())
	})
	t.Run("a user taken off the allow list is refused within the TTL", func(t *testing.T) {
		token := b.token(t, ci, "read", "write")
		require.Equal(t, http.StatusOK, leaseAndReturn(t, token))
		b.sync(t, fmt.Sprintf(yaml, "someone-else@example.com")) // gantry config apply
		refusedOnceTTLPassed(t, token, http.StatusForbidden, time.Now())
	})
}
