package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/client"
	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// infraServer is a Gantry with workers and the standard Terragrunt
// repository registered as "live" (vpc → rds → ec2 in account prod), voted
// on by ada and grace with one approval or rejection deciding.
type infraServer struct {
	*servertest.Server
	repo *infratest.Repo
}

func startInfra(t *testing.T) *infraServer {
	t.Helper()
	s := servertest.New(t, "GANTRY_API_RATE=1000")
	repo, _ := infratest.Standard(t)
	repo.Apply(infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2)
	s.Sync(t, repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, []string{"ada@example.com", "grace@example.com"}, 1, 1))
	s.StartWorkers(t)
	return &infraServer{Server: s, repo: repo}
}

// env is the environment of someone at a terminal with a fresh token of
// email (a user created with role when new) holding scopes.
func (s *infraServer) env(t *testing.T, email string, role models.Role, scopes ...string) []string {
	t.Helper()
	ctx := context.Background()
	u, err := models.UserByEmail(ctx, s.DB.Bun, email)
	if err == models.ErrNotFound {
		u, err = access.CreateUser(ctx, s.DB.Bun, access.NewUser{Email: email, Role: string(role), Password: "correct-horse-battery"}, "test")
	}
	require.NoError(t, err)
	token, _, err := access.CreateToken(ctx, s.DB.Bun, u, access.NewToken{Name: "cli", Scopes: scopes}, "test")
	require.NoError(t, err)
	return []string{"GANTRY_SERVER=" + s.URL, "GANTRY_TOKEN=" + token}
}

func TestInfraHelp(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"runs", "run", "execution", "approvals", "vote"} {
		out, _, err := gantry(t, nil, "infra", sub, "--help")
		require.NoError(t, err, sub)
		require.Contains(t, out, "Usage:", sub)
		require.Contains(t, out, "Examples:", sub)
		require.Contains(t, out, "--server", sub)
		require.Contains(t, out, "-o, --output", sub)
	}
	out, _, err := gantry(t, nil, "infra", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "GANTRY_TOKEN")
	out, _, err = gantry(t, nil, "infra", "graph", "--help")
	require.NoError(t, err)
	require.NotContains(t, out, "--server", "graph needs no server")
}

func TestInfraCommandsSayWhatIsMissing(t *testing.T) {
	t.Parallel()
	_, _, err := gantry(t, []string{"GANTRY_SERVER=http://127.0.0.1:1"}, "infra", "runs")
	require.ErrorContains(t, err, "no API token: set GANTRY_TOKEN (or --token) to an API token with the read scope, and the vote scope to vote")
	_, _, err = gantry(t, []string{"GANTRY_SERVER=gantry.example.com", "GANTRY_TOKEN=x"}, "infra", "approvals")
	require.ErrorContains(t, err, `GANTRY_SERVER="gantry.example.com": must be an absolute http:// or https:// URL`)
	_, _, err = gantry(t, []string{"GANTRY_BASE_URL=localhost:8080", "GANTRY_TOKEN=x"}, "infra", "runs")
	require.EqualError(t, err, `GANTRY_BASE_URL="localhost:8080" (used as GANTRY_SERVER is not set): must be an absolute http:// or https:// URL, such as http://localhost:8080`,
		"names the variable that is wrong")
	_, _, err = gantry(t, []string{"GANTRY_BASE_URL=http://localhost:8080", "GANTRY_TOKEN=x"}, "infra", "runs", "--server", "gantry.example.com")
	require.ErrorContains(t, err, `--server="gantry.example.com": must be`)
	_, _, err = gantry(t, []string{"GANTRY_TOKEN=x"}, "infra", "runs", "-o", "yaml")
	require.ErrorContains(t, err, `--output must be text or json, not "yaml"`)
	_, _, err = gantry(t, []string{"GANTRY_TOKEN=x"}, "infra", "run", "latest")
	require.ErrorContains(t, err, `"latest" is not a run id`)
	_, _, err = gantry(t, []string{"GANTRY_TOKEN=x"}, "infra", "runs", "--limit", "0")
	require.ErrorContains(t, err, "--limit must be at least 1")
	_, _, err = gantry(t, []string{"GANTRY_TOKEN=x"}, "infra", "vote", "run-1-abcd-prod-vpc-001")
	require.ErrorContains(t, err, "accepts 2 arg(s)")
}

// A decision other than approve or reject is refused before any request,
// even before the token is looked for.
func TestInfraVoteRefusesABadDecisionWord(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	defer srv.Close()
	for _, env := range [][]string{{"GANTRY_SERVER=" + srv.URL, "GANTRY_TOKEN=gnt_x"}, {"GANTRY_SERVER=" + srv.URL}} {
		stdout, _, err := gantry(t, env, "infra", "vote", "run-1-abcd-prod-vpc-001", "approved")
		require.EqualError(t, err, `the decision must be approve or reject, not "approved" (gantry infra vote EXECUTION_ID approve|reject)`)
		require.Empty(t, stdout)
	}
	require.Zero(t, requests.Load())
}

func TestInfraCommands(t *testing.T) {
	t.Parallel()
	s := startInfra(t)
	p := s.repo.OpenPR(9, map[string]string{infratest.VPC + "/main.tf": s.repo.Resource(infratest.VPC, "vpc", `"vpc-v2"`)})
	sha := s.repo.Merge(p.Branch)
	s.Deliver(t, "pull_request", s.repo.Event(p, "closed", sha))
	run := s.WaitRunOf(t, "live", sha)
	vpc := s.WaitExecution(t, run.ID, infratest.VPC, models.ExecRunning, models.StepVoting)
	id := fmt.Sprint(run.ID)

	vera := s.env(t, "vera@example.com", models.RoleViewer, auth.ScopeRead)
	adaRead := s.env(t, "ada@example.com", models.RoleApprover, auth.ScopeRead)
	adaVote := s.env(t, "ada@example.com", models.RoleApprover, auth.ScopeVote)
	otto := s.env(t, "otto@example.com", models.RoleApprover, auth.ScopeRead, auth.ScopeVote)

	t.Run("runs", func(t *testing.T) {
		out, _, err := gantry(t, vera, "infra", "runs")
		require.NoError(t, err)
		require.Regexp(t, `^ID\s+REPOSITORY\s+PR\s+STATUS\s+MERGE\s+STARTED\s+TITLE\n`, out)
		require.Regexp(t, `(?m)^`+id+`\s+live\s+#9\s+running\s+`+sha[:8]+`\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+Change 9$`, out)

		out, _, err = gantry(t, vera, "infra", "runs", "--repository", "live", "--pr", "9", "--status", "running", "-o", "json")
		require.NoError(t, err)
		var runs []client.Run
		require.NoError(t, json.Unmarshal([]byte(out), &runs))
		require.Len(t, runs, 1)
		require.Equal(t, run.ID, runs[0].ID)
		require.Equal(t, sha, runs[0].MergeCommit)

		out, _, err = gantry(t, vera, "infra", "runs", "--status", "succeeded")
		require.NoError(t, err)
		require.Equal(t, "No runs.\n", out)
		out, _, err = gantry(t, vera, "infra", "runs", "--pr", "8", "-o", "json")
		require.NoError(t, err)
		require.JSONEq(t, "[]", out)

		_, _, err = gantry(t, vera, "infra", "runs", "--status", "sleeping")
		require.ErrorContains(t, err, "status: must be queued, scanning, running, succeeded or failed")
		require.ErrorContains(t, err, "[HTTP 400 invalid]")
	})

	t.Run("run", func(t *testing.T) {
		out, _, err := gantry(t, vera, "infra", "run", id)
		require.NoError(t, err)
		require.Regexp(t, `(?m)^run\s+`+id+`: live #9 Change 9$`, out)
		require.Regexp(t, `(?m)^status\s+running \(holds the merge lock\)$`, out)
		require.Regexp(t, `(?m)^merge\s+`+sha[:8]+` \(change-9 into main, scan graph\)$`, out)
		rows := regexp.MustCompile(`(?m)^(run-\S+)\s+(\S+)\s+prod\s+(\S+)\s+(.+)$`).FindAllStringSubmatch(out, -1)
		require.Len(t, rows, 3, out)
		require.Equal(t, []string{vpc.ExecutionID, infratest.VPC, "running/voting", "-"}, rows[0][1:])
		require.Equal(t, []string{infratest.RDS, "waiting", infratest.VPC}, rows[1][2:])
		require.Equal(t, []string{infratest.EC2, "waiting", infratest.RDS}, rows[2][2:])

		out, _, err = gantry(t, vera, "infra", "run", id, "-o", "json")
		require.NoError(t, err)
		var d client.RunDetail
		require.NoError(t, json.Unmarshal([]byte(out), &d))
		require.True(t, d.HoldsMergeLock)
		require.Len(t, d.Executions, 3)
		require.Equal(t, infratest.EC2, d.Executions[2].CfgPath)

		_, _, err = gantry(t, vera, "infra", "run", "999999")
		require.EqualError(t, err, "getting run 999999: No run 999999. [HTTP 404 not_found]")
	})

	t.Run("execution", func(t *testing.T) {
		out, _, err := gantry(t, vera, "infra", "execution", vpc.ExecutionID)
		require.NoError(t, err)
		require.Regexp(t, `(?m)^status\s+running/voting$`, out)
		require.Regexp(t, `(?m)^unit\s+live/prod/vpc\n`+`account\s+prod \(after shared\)\n`+`after\s+-\n`, out)
		require.Regexp(t, `(?m)^voters\s+ada@example.com, grace@example.com \(applied at 1 approval, failed at 1 rejection\)$`, out)
		require.Regexp(t, `(?m)^approval\s+pending: approved by -; rejected by -$`, out)
		require.Contains(t, out, "\n--- plan output ---\n")
		require.Contains(t, out, `"vpc-v2"`)
	})

	t.Run("approvals", func(t *testing.T) {
		out, _, err := gantry(t, adaRead, "infra", "approvals")
		require.NoError(t, err)
		require.Regexp(t, `^EXECUTION\s+RUN\s+UNIT\s+ACCOUNT\s+APPLIES AT\n`+regexp.QuoteMeta(vpc.ExecutionID)+`\s+`+id+`\s+live/prod/vpc\s+prod\s+1 approval\n$`, out)
		out, _, err = gantry(t, adaRead, "infra", "approvals", "-o", "json")
		require.NoError(t, err)
		var xs []client.Execution
		require.NoError(t, json.Unmarshal([]byte(out), &xs))
		require.Len(t, xs, 1)
		require.Equal(t, vpc.ExecutionID, xs[0].ExecutionID)

		out, _, err = gantry(t, vera, "infra", "approvals")
		require.NoError(t, err)
		require.Equal(t, "Nothing waits for your vote.\n", out)
	})

	t.Run("votes the server refuses", func(t *testing.T) {
		out, _, err := gantry(t, otto, "infra", "vote", vpc.ExecutionID, "approve")
		require.EqualError(t, err, "voting on execution "+vpc.ExecutionID+": You are not a voter of this approval. [HTTP 403 forbidden]")
		require.Empty(t, out)
		_, _, err = gantry(t, adaRead, "infra", "vote", vpc.ExecutionID, "approve")
		require.ErrorContains(t, err, `This token lacks the "vote" scope. [HTTP 403 forbidden]`)
		_, _, err = gantry(t, adaVote, "infra", "vote", "run-0-none-x-y-000", "approve")
		require.ErrorContains(t, err, "[HTTP 404 not_found]")
		_, _, err = gantry(t, adaVote, "infra", "vote", vpc.ExecutionID, "approve", "--comment", strings.Repeat("x", 4001))
		require.ErrorContains(t, err, "comment: is 4001 bytes; at most 4000")
	})

	t.Run("an approval applies the plan", func(t *testing.T) {
		out, _, err := gantry(t, adaVote, "infra", "vote", vpc.ExecutionID, "Approve", "--comment", "matches the change request")
		require.NoError(t, err)
		require.Equal(t, vpc.ExecutionID+": approved (1 approval, 0 rejections); the plan is being applied\n", out)
		s.WaitExecution(t, run.ID, infratest.VPC, models.ExecSucceeded, models.StepApplying)
		rds := s.WaitExecution(t, run.ID, infratest.RDS, models.ExecRunning, models.StepVoting)

		out, _, err = gantry(t, vera, "infra", "execution", vpc.ExecutionID)
		require.NoError(t, err)
		require.Regexp(t, `(?m)^approval\s+approved: approved by ada@example.com; rejected by -$`, out)
		require.Regexp(t, `(?m)^  \S+\s+ada@example.com\s+approve\s+via api\s+matches the change request$`, out)
		require.Contains(t, out, "\n--- apply output ---\n")

		out, _, err = gantry(t, adaRead, "infra", "approvals", "-o", "json")
		require.NoError(t, err)
		require.Contains(t, out, rds.ExecutionID, "the next unit waits for ada now")

		_, _, err = gantry(t, adaVote, "infra", "vote", vpc.ExecutionID, "reject")
		require.ErrorContains(t, err, ", so its votes are closed. [HTTP 409 conflict]")

		out, _, err = gantry(t, adaVote, "infra", "vote", rds.ExecutionID, "reject", "-o", "json")
		require.NoError(t, err)
		var res client.VoteResult
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		require.Equal(t, client.VoteResult{State: client.ApprovalRejected, Approvals: 0, Rejections: 1, Waiting: []string{"grace@example.com"}}, res)
		s.WaitRun(t, run.ID, models.RunFailed)

		out, _, err = gantry(t, vera, "infra", "run", id)
		require.NoError(t, err)
		require.Regexp(t, `(?m)^status\s+failed$`, out)
		require.Regexp(t, `(?m)^\S+\s+live/prod/ec2\s+prod\s+aborted\s+live/prod/rds$`, out)
		require.Contains(t, out, "\nlive/prod/rds: rejected by ada@example.com\nlive/prod/ec2: aborted: ")
	})
}

// When the answer to a vote is lost, gantry says the vote may have been
// recorded, and does not send it again; when no connection could be made,
// it says nothing of the kind.
func TestInfraVoteAfterALostAnswer(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	_, _, err := gantry(t, []string{"GANTRY_SERVER=" + srv.URL, "GANTRY_TOKEN=gnt_x"}, "infra", "vote", "run-1-abcd-prod-vpc-001", "approve")
	require.ErrorContains(t, err, "the vote may have been recorded: check with gantry infra execution run-1-abcd-prod-vpc-001 before voting again")
	require.Equal(t, int32(1), requests.Load())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, _, err = gantry(t, []string{"GANTRY_SERVER=http://" + addr, "GANTRY_TOKEN=gnt_x"}, "infra", "vote", "run-1-abcd-prod-vpc-001", "approve")
	require.ErrorContains(t, err, "connection refused")
	require.NotContains(t, err.Error(), "may have been recorded")
}
