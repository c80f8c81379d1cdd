package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/client"
	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// infraServer is a Gantry with the standard Terragrunt repository
// registered as "live" (vpc → rds → ec2 in account prod, dns in shared),
// voted on by ada and grace with one approval or one rejection deciding.
type infraServer struct {
	*servertest.Server
	repo *infratest.Repo
}

func setupInfra(t *testing.T, workers bool) *infraServer {
	t.Helper()
	s := servertest.New(t, "GANTRY_API_RATE=1000")
	repo, _ := infratest.Standard(t)
	if workers {
		repo.Apply(infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2)
	}
	s.Sync(t, repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{"ada@example.com", "grace@example.com"}, 1, 1))
	if workers {
		s.StartWorkers(t)
	}
	return &infraServer{Server: s, repo: repo}
}

// token is a fresh token of email (a user created with role when new)
// holding scopes.
func (s *infraServer) token(t *testing.T, email string, role models.Role, scopes ...string) string {
	t.Helper()
	ctx := context.Background()
	u, err := models.UserByEmail(ctx, s.DB.Bun, email)
	if err == models.ErrNotFound {
		u, err = access.CreateUser(ctx, s.DB.Bun, access.NewUser{Email: email, Role: string(role), Password: "correct-horse-battery"}, "test")
	}
	require.NoError(t, err)
	token, _, err := access.CreateToken(ctx, s.DB.Bun, u, access.NewToken{Name: "cli", Scopes: scopes}, "test")
	require.NoError(t, err)
	return token
}

// mergeVPCChange merges pull request number changing the vpc unit and
// waits until the vpc's plan waits for votes.
func (s *infraServer) mergeVPCChange(t *testing.T, number int) (*models.Run, *models.Execution) {
	t.Helper()
	p := s.repo.OpenPR(number, map[string]string{infratest.VPC + "/main.tf": s.repo.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
	sha := s.repo.Merge(p.Branch)
	s.Deliver(t, "pull_request", s.repo.Event(p, "closed", sha))
	run := s.WaitRunOf(t, "live", sha)
	return run, s.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
}

func requireAPIError(t *testing.T, err error, status int, message string) *client.APIError {
	t.Helper()
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, status, ae.Status, "error: %v", err)
	require.Contains(t, ae.Message, message)
	return ae
}

func TestInfraRunFollowedAndVotedOn(t *testing.T) {
	t.Parallel()
	s := setupInfra(t, true)
	ctx := context.Background()
	run, vpc := s.mergeVPCChange(t, 9)

	var slept atomic.Int32
	as := func(email string, role models.Role, scopes ...string) *client.Client {
		return client.New(s.URL, client.WithToken(s.token(t, email, role, scopes...)),
			client.WithSleep(func(context.Context, time.Duration) error { slept.Add(1); return nil }))
	}
	vera := as("vera@example.com", models.RoleViewer, auth.ScopeRead)
	ada := as("ada@example.com", models.RoleApprover, auth.ScopeRead, auth.ScopeVote)
	adaRead := as("ada@example.com", models.RoleApprover, auth.ScopeRead)
	otto := as("otto@example.com", models.RoleApprover, auth.ScopeRead, auth.ScopeVote)

	t.Run("runs are listed with their filters", func(t *testing.T) {
		runs, err := vera.Runs(ctx, client.RunsOptions{Repository: "live"})
		require.NoError(t, err)
		require.Len(t, runs, 1)
		r := runs[0]
		require.Equal(t, run.ID, r.ID)
		require.Equal(t, 9, r.PRNumber)
		require.Equal(t, "Change 9", r.PRTitle)
		require.Equal(t, run.MergeCommit, r.MergeCommit)
		require.Equal(t, client.RunRunning, r.Status)
		require.NotNil(t, r.StartedAt)
		require.False(t, r.Ended())

		for _, opts := range []client.RunsOptions{{Status: client.RunRunning}, {PR: 9}, {Repository: "live", Status: client.RunRunning, PR: 9}} {
			runs, err := vera.Runs(ctx, opts)
			require.NoError(t, err)
			require.Len(t, runs, 1, "%+v", opts)
		}
		for _, opts := range []client.RunsOptions{{Status: client.RunSucceeded}, {PR: 8}, {Repository: "dead"}, {Before: run.ID}} {
			runs, err := vera.Runs(ctx, opts)
			require.NoError(t, err)
			require.Empty(t, runs, "%+v", opts)
		}
		_, err = vera.Runs(ctx, client.RunsOptions{Status: "sleeping"})
		ae := requireAPIError(t, err, http.StatusBadRequest, "")
		require.Contains(t, ae.Fields, "status")
	})

	t.Run("a run has its executions in dependency order", func(t *testing.T) {
		d, err := vera.Run(ctx, run.ID)
		require.NoError(t, err)
		require.Equal(t, run.ID, d.Run.ID)
		require.True(t, d.HoldsMergeLock)
		require.Len(t, d.Executions, 3, "vpc and its dependents rds and ec2")
		var units []string
		for _, x := range d.Executions {
			units = append(units, x.CfgPath)
		}
		require.Equal(t, []string{infratest.VPC, infratest.RDS, infratest.EC2}, units)
		require.Equal(t, "running/voting", d.Executions[0].State())
		require.Equal(t, client.ExecWaiting, d.Executions[1].State())
		require.Equal(t, []string{infratest.VPC}, d.Executions[1].CfgDeps)
		require.Equal(t, vpc.ExecutionID, d.Executions[0].ExecutionID)
		require.Empty(t, d.Executions[0].PlanOutput, "a run's executions come without outputs")

		_, err = vera.Run(ctx, 999999)
		requireAPIError(t, err, http.StatusNotFound, "No run 999999.")
	})

	t.Run("an execution has its plan and votes", func(t *testing.T) {
		x, err := vera.Execution(ctx, vpc.ExecutionID)
		require.NoError(t, err)
		require.Equal(t, run.ID, x.RunID)
		require.Equal(t, "prod", x.AccountName)
		require.Equal(t, []string{"ada@example.com", "grace@example.com"}, x.Voters)
		require.Equal(t, 1, x.MinApprovalCount)
		require.Equal(t, client.ApprovalPending, x.ApprovalState)
		require.Contains(t, x.PlanOutput, `"vpc-v2"`)
		require.NotNil(t, x.HasChanges)
		require.True(t, *x.HasChanges)
		require.Equal(t, fmt.Sprintf("/api/v1/infra/runs/%d", run.ID), x.RunURL)

		_, err = vera.Execution(ctx, "run-0-none-x-y-000")
		requireAPIError(t, err, http.StatusNotFound, "No execution run-0-none-x-y-000.")
	})

	t.Run("approvals are what waits for the caller", func(t *testing.T) {
		xs, err := ada.Approvals(ctx)
		require.NoError(t, err)
		require.Len(t, xs, 1)
		require.Equal(t, vpc.ExecutionID, xs[0].ExecutionID)
		xs, err = vera.Approvals(ctx)
		require.NoError(t, err)
		require.Empty(t, xs, "vera is no voter")
	})

	t.Run("votes the server refuses", func(t *testing.T) {
		_, err := otto.Vote(ctx, vpc.ExecutionID, client.Approve, "")
		requireAPIError(t, err, http.StatusForbidden, "You are not a voter of this approval.")
		_, err = adaRead.Vote(ctx, vpc.ExecutionID, client.Approve, "")
		requireAPIError(t, err, http.StatusForbidden, `This token lacks the "vote" scope.`)
		_, err = ada.Vote(ctx, vpc.ExecutionID, "maybe", "")
		ae := requireAPIError(t, err, http.StatusBadRequest, "")
		require.Contains(t, ae.Fields, "decision")
		require.Zero(t, slept.Load(), "refusals are not retried")
	})

	t.Run("the server's answers decode strictly into the client's types", func(t *testing.T) {
		require.Len(t, s.requireStrictAnswers(t, run.ID, vpc.ExecutionID), 1, "the execution waiting for ada's vote")
	})

	t.Run("an approval applies the plan", func(t *testing.T) {
		res, err := ada.Vote(ctx, vpc.ExecutionID, client.Approve, "the bot agrees")
		require.NoError(t, err)
		require.Equal(t, &client.VoteResult{State: client.ApprovalApproved, Approvals: 1, Rejections: 0, Waiting: []string{"grace@example.com"}}, res)
		s.WaitExecution(t, run.ID, infratest.VPC, models.ExecSucceeded, models.StepApplying)

		x, err := vera.Execution(ctx, vpc.ExecutionID)
		require.NoError(t, err)
		require.Equal(t, client.ExecSucceeded, x.Status)
		require.True(t, x.Ended())
		require.Equal(t, client.ApprovalApproved, x.ApprovalState)
		require.Equal(t, []string{"ada@example.com"}, x.ApprovalVoters)
		require.Empty(t, x.RejectionVoters)
		require.Len(t, x.Votes, 1)
		require.Equal(t, "api", x.Votes[0].Via)
		require.Equal(t, "the bot agrees", x.Votes[0].Comment)
		require.Contains(t, x.ApplyOutput, "Apply complete!")

		_, err = ada.Vote(ctx, vpc.ExecutionID, client.Reject, "")
		requireAPIError(t, err, http.StatusConflict, "votes are closed")
		require.Zero(t, slept.Load())
	})

	t.Run("a rejection fails the execution and aborts its dependents", func(t *testing.T) {
		rds := s.WaitExecution(t, run.ID, infratest.RDS, models.ExecRunning, models.StepVoting)
		xs, err := ada.Approvals(ctx)
		require.NoError(t, err)
		require.Len(t, xs, 1)
		require.Equal(t, rds.ExecutionID, xs[0].ExecutionID)

		res, err := ada.Vote(ctx, rds.ExecutionID, client.Reject, "not today")
		require.NoError(t, err)
		require.Equal(t, client.ApprovalRejected, res.State)
		require.Equal(t, 1, res.Rejections)
		s.WaitRun(t, run.ID, models.RunFailed)

		d, err := vera.Run(ctx, run.ID)
		require.NoError(t, err)
		require.True(t, d.Run.Ended())
		require.False(t, d.HoldsMergeLock)
		states := map[string]string{}
		for _, x := range d.Executions {
			states[x.CfgPath] = x.Status
		}
		require.Equal(t, map[string]string{infratest.VPC: client.ExecSucceeded, infratest.RDS: client.ExecFailed, infratest.EC2: client.ExecAborted}, states)
		xs, err = ada.Approvals(ctx)
		require.NoError(t, err)
		require.Empty(t, xs)
		// Now with votes cast, outputs written and a run that is over.
		s.requireStrictAnswers(t, run.ID, vpc.ExecutionID)
		s.requireStrictAnswers(t, run.ID, rds.ExecutionID)
	})
}

// requireStrictAnswers decodes the server's answers about a run and an
// execution into the client's types refusing unknown fields, so that a
// field renamed or added on one side only fails here. It returns what
// waits for ada's vote.
func (s *infraServer) requireStrictAnswers(t *testing.T, runID int64, executionID string) []client.Execution {
	t.Helper()
	token := s.token(t, "ada@example.com", models.RoleApprover, auth.ScopeRead)
	get := func(path string, into any) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, s.URL+"/api/v1"+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode, path)
		dec := json.NewDecoder(res.Body)
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(into), path)
	}
	var page struct {
		Runs []client.Run `json:"runs"`
		Next string       `json:"next"`
	}
	get("/infra/runs?limit=1", &page)
	require.NotEmpty(t, page.Runs)
	require.NotEmpty(t, page.Next, "a full page links the next")
	var detail client.RunDetail
	get(fmt.Sprintf("/infra/runs/%d", runID), &detail)
	require.Equal(t, runID, detail.Run.ID)
	require.NotEmpty(t, detail.Executions)
	var x client.Execution
	get("/infra/executions/"+executionID, &x)
	require.Equal(t, executionID, x.ExecutionID)
	require.Equal(t, detail.Run.PRNumber, x.PRID)
	require.Equal(t, detail.Run.MergeCommit, x.CommitID)
	var approvals struct {
		Executions []client.Execution `json:"executions"`
		Approvals  []json.RawMessage  `json:"approvals"` // every kind's, not the client's
		Total      int                `json:"total"`
	}
	get("/approvals", &approvals)
	return approvals.Executions
}

// recorder is a transport that records the URLs requested.
type recorder struct {
	mu   sync.Mutex
	urls []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL.RequestURI())
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func TestRunsFollowsNextBeyondAPage(t *testing.T) {
	t.Parallel()
	s := setupInfra(t, false)
	ctx := context.Background()
	require.NoError(t, s.DB.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		for i := range 530 {
			if err := models.InsertRun(ctx, tx, &models.Run{Repository: "live", PRNumber: 1 + i%3, BaseRef: "main",
				HeadSHA: "h", MergeCommit: fmt.Sprintf("%040d", i), Scan: "graph"}); err != nil {
				return err
			}
		}
		return nil
	}))
	var rec recorder
	c := client.New(s.URL, client.WithToken(s.token(t, "vera@example.com", models.RoleViewer, auth.ScopeRead)), client.WithHTTPClient(&http.Client{Transport: &rec}))

	runs, err := c.Runs(ctx, client.RunsOptions{Repository: "live", Limit: 520})
	require.NoError(t, err)
	require.Len(t, runs, 520)
	for i := 1; i < len(runs); i++ {
		require.Less(t, runs[i].ID, runs[i-1].ID, "newest first, no run twice")
	}
	require.Len(t, rec.urls, 2)
	require.Equal(t, "/api/v1/infra/runs?limit=500&repository=live", rec.urls[0])
	require.Equal(t, fmt.Sprintf("/api/v1/infra/runs?before=%d&limit=20&repository=live", runs[499].ID), rec.urls[1],
		"the server's next page, asking only for what is still wanted")

	rest, err := c.Runs(ctx, client.RunsOptions{Repository: "live", Before: runs[519].ID, Limit: 100})
	require.NoError(t, err)
	require.Len(t, rest, 10, "continued from the last run received, to the end")
	require.Equal(t, runs[519].ID-1, rest[0].ID)

	page, err := c.Runs(ctx, client.RunsOptions{})
	require.NoError(t, err)
	require.Len(t, page, 50, "one page of the server's size by default")
	pr2, err := c.Runs(ctx, client.RunsOptions{PR: 2, Status: client.RunQueued, Limit: 1000})
	require.NoError(t, err)
	require.Len(t, pr2, 177)
}

// A vote is repeated only when the server surely did not handle it.
func TestVoteRetriesOnlyWhatWasNotHandled(t *testing.T) {
	t.Parallel()
	ok := `{"state":"pending","approvals":1,"rejections":0,"waiting":["grace@example.com"]}`
	serve := func(t *testing.T, answer func(n int32, w http.ResponseWriter)) (*httptest.Server, *atomic.Int32) {
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			require.Equal(t, "/api/v1/infra/executions/run-1-abcd-prod-vpc-001/votes", r.URL.Path)
			answer(calls.Add(1), w)
		}))
		t.Cleanup(srv.Close)
		return srv, &calls
	}
	vote := func(url string) (*client.VoteResult, *fakeClock, error) {
		clock := &fakeClock{now: time.Unix(0, 0)}
		c := client.New(url, client.WithClock(clock.Now), client.WithSleep(clock.Sleep))
		res, err := c.Vote(context.Background(), "run-1-abcd-prod-vpc-001", client.Approve, "")
		return res, clock, err
	}

	t.Run("rate limited", func(t *testing.T) {
		srv, calls := serve(t, func(n int32, w http.ResponseWriter) {
			if n < 3 {
				w.Header().Set("Retry-After", "1")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(`{"error":{"code":"rate_limited","message":"Too many requests; slow down and retry after a second."}}`))
				return
			}
			_, _ = w.Write([]byte(ok))
		})
		res, clock, err := vote(srv.URL)
		require.NoError(t, err)
		require.Equal(t, 1, res.Approvals)
		require.Equal(t, int32(3), calls.Load())
		require.Len(t, clock.sleeps, 2)
		for _, d := range clock.sleeps {
			require.GreaterOrEqual(t, d, time.Second, "never sooner than Retry-After")
		}
	})
	t.Run("a proxy's 502 may hide a recorded vote", func(t *testing.T) {
		srv, calls := serve(t, func(_ int32, w http.ResponseWriter) { http.Error(w, "bad gateway", http.StatusBadGateway) })
		_, clock, err := vote(srv.URL)
		requireAPIError(t, err, http.StatusBadGateway, "bad gateway")
		require.Equal(t, int32(1), calls.Load())
		require.Empty(t, clock.sleeps)
	})
	t.Run("a connection cut after the request was sent", func(t *testing.T) {
		srv, calls := serve(t, func(_ int32, w http.ResponseWriter) {
			conn, _, err := http.NewResponseController(w).Hijack()
			require.NoError(t, err)
			conn.Close()
		})
		_, clock, err := vote(srv.URL)
		require.Error(t, err)
		require.Equal(t, int32(1), calls.Load())
		require.Empty(t, clock.sleeps)
	})
	t.Run("no connection", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		_, clock, err := vote("http://" + addr)
		require.ErrorContains(t, err, "connection refused")
		require.Len(t, clock.sleeps, 3, "tried 4 times, as reads are")
	})
}

func TestDependencyOrder(t *testing.T) {
	t.Parallel()
	x := func(path, account string, deps []string, accountDeps ...string) client.Execution {
		return client.Execution{ExecutionID: path, CfgPath: path, AccountName: account, CfgDeps: deps, AccountDeps: accountDeps}
	}
	ids := func(xs []client.Execution) []string {
		var out []string
		for _, x := range xs {
			out = append(out, x.ExecutionID)
		}
		return out
	}
	cases := []struct {
		name string
		in   []client.Execution
		want []string
	}{
		{"already in order", []client.Execution{x("vpc", "prod", nil), x("rds", "prod", []string{"vpc"})}, []string{"vpc", "rds"}},
		{"dependents first", []client.Execution{x("ec2", "prod", []string{"rds"}), x("rds", "prod", []string{"vpc"}), x("vpc", "prod", nil)},
			[]string{"vpc", "rds", "ec2"}},
		{"independent ones keep their order", []client.Execution{x("b", "a", nil), x("c", "a", []string{"d"}), x("a", "a", nil), x("d", "a", nil)},
			[]string{"b", "a", "d", "c"}},
		{"accounts go after the accounts they depend on",
			[]client.Execution{x("vpc", "prod", nil, "shared"), x("rds", "prod", []string{"vpc"}, "shared"), x("dns", "shared", nil), x("iam", "shared", nil)},
			[]string{"dns", "iam", "vpc", "rds"}},
		{"dependencies outside the run are ignored", []client.Execution{x("rds", "prod", []string{"vpc"}, "shared")}, []string{"rds"}},
		{"a cycle comes last", []client.Execution{x("a", "p", []string{"b"}), x("b", "p", []string{"a"}), x("c", "p", nil)}, []string{"c", "a", "b"}},
		{"nothing", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ids(client.DependencyOrder(tc.in)))
		})
	}
}

// TestStatusesAreTheServers: the client restates the API's status, step and
// decision words so that CI code needs no server packages; they must stay
// the server's.
func TestStatusesAreTheServers(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{
		{client.RunQueued, models.RunQueued}, {client.RunScanning, models.RunScanning}, {client.RunRunning, models.RunRunning},
		{client.RunSucceeded, models.RunSucceeded}, {client.RunFailed, models.RunFailed},
		{client.ExecWaiting, models.ExecWaiting}, {client.ExecRunning, models.ExecRunning}, {client.ExecSucceeded, models.ExecSucceeded},
		{client.ExecFailed, models.ExecFailed}, {client.ExecAborted, models.ExecAborted},
		{client.StepPlanning, models.StepPlanning}, {client.StepVoting, models.StepVoting}, {client.StepApplying, models.StepApplying},
		{client.StepInterrupted, models.StepInterrupted},
		{client.Approve, string(approval.Approve)}, {client.Reject, string(approval.Reject)},
		{client.ApprovalPending, string(approval.Pending)}, {client.ApprovalApproved, string(approval.Approved)},
		{client.ApprovalRejected, string(approval.Rejected)},
	} {
		require.Equal(t, pair[1], pair[0])
	}
}
