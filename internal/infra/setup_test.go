package infra_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/github/githubtest"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/infra/infratest"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/models"
)

// Voters of the test repository's accounts.
const (
	ada   = "ada@example.com"
	grace = "grace@example.com"
)

// wait is how long a test waits for the workers to get somewhere; plans
// and applies of the fixture take a fraction of a second each.
const wait = 90 * time.Second

// bundle is an in-test Gantry with workers, the standard repository applied
// at its first commit and registered.
type bundle struct {
	*servertest.Server
	repo *infratest.Repo
	base string // the trunk's commit before the pull request
	ctx  context.Context
}

type options struct {
	voters        []string
	minApprovals  int
	minRejections int
	noWorkers     bool
}

func setup(t *testing.T, o options) *bundle {
	t.Helper()
	if o.voters == nil {
		o.voters = []string{ada, grace}
	}
	if o.minApprovals == 0 {
		o.minApprovals = 1
	}
	if o.minRejections == 0 {
		o.minRejections = 1
	}
	s := servertest.New(t)
	repo, base := infratest.Standard(t)
	repo.Apply(infratest.DNS, infratest.VPC, infratest.RDS, infratest.EC2)
	s.Sync(t, repo.YAML("live", servertest.WebhookSecretEnv, servertest.StatusTokenEnv, o.voters, o.minApprovals, o.minRejections))
	if !o.noWorkers {
		s.StartWorkers(t)
	}
	return &bundle{Server: s, repo: repo, base: base, ctx: t.Context()}
}

// pr is a pull request of the test repository.
type pr struct {
	number       int
	branch, head string
}

// openPR commits files on a new branch and pushes it as pull request
// number.
func (b *bundle) openPR(t *testing.T, number int, files map[string]string) pr {
	t.Helper()
	branch := fmt.Sprintf("change-%d", number)
	infratest.Git(t, b.repo.Work, "checkout", "--quiet", infratest.Trunk)
	b.repo.Branch(branch)
	b.repo.Write(files)
	b.repo.Commit(fmt.Sprintf("change %d", number))
	return pr{number: number, branch: branch, head: b.repo.PullRequest(branch, number)}
}

// push adds a commit to the pull request's branch.
func (b *bundle) push(t *testing.T, p *pr, files map[string]string) {
	t.Helper()
	infratest.Git(t, b.repo.Work, "checkout", "--quiet", p.branch)
	b.repo.Write(files)
	b.repo.Commit("another push")
	p.head = b.repo.PullRequest(p.branch, p.number)
}

// event is the pull_request delivery of action on p.
func (b *bundle) event(p pr, action, mergeSHA string) []byte {
	return githubtest.PullRequest{
		Action: action, Number: p.number, Title: fmt.Sprintf("Change %d", p.number), Repo: servertest.GitHubRepo,
		CloneURL: b.repo.Remote, Base: infratest.Trunk, BaseSHA: b.base, Head: p.branch, HeadSHA: p.head,
		Merged: mergeSHA != "", MergeCommitSHA: mergeSHA, Author: "octocat",
	}.Payload()
}

var deliveries int

// deliver hands a signed delivery to the service and returns its answer.
func (b *bundle) deliver(t *testing.T, event string, body []byte) infra.WebhookResult {
	t.Helper()
	deliveries++
	res, err := b.Infra.ReceiveWebhook(b.ctx, infra.Delivery{
		Event: event, ID: fmt.Sprintf("delivery-%d-%d", time.Now().UnixNano(), deliveries),
		Signature: github.Sign([]byte(servertest.WebhookSecret), body), Body: body,
	})
	require.NoError(t, err)
	return res
}

// merge merges p and delivers the closed (merged) event; it returns the
// run it started.
func (b *bundle) merge(t *testing.T, p pr) (string, *models.Run) {
	t.Helper()
	sha := b.repo.Merge(p.branch)
	res := b.deliver(t, "pull_request", b.event(p, "closed", sha))
	require.Equal(t, http.StatusAccepted, res.Status, res.Message)
	var run *models.Run
	require.Eventually(t, func() bool {
		var err error
		run, err = models.RunOfMerge(b.ctx, b.DB.Bun, "live", sha)
		return err == nil
	}, wait, 20*time.Millisecond, "no run for the merge")
	return sha, run
}

// waitRun waits until the run's status is one of want.
func (b *bundle) waitRun(t *testing.T, id int64, want ...string) *models.Run {
	t.Helper()
	var run *models.Run
	waitFor(t, func() (bool, string) {
		var err error
		run, err = models.RunByID(b.ctx, b.DB.Bun, id)
		require.NoError(t, err)
		return contains(want, run.Status), fmt.Sprintf("run %d is %s (%s), want %v", id, run.Status, run.Error, want)
	})
	return run
}

// waitExecution waits until the run's execution of unit is in status (and
// step, for a running one).
func (b *bundle) waitExecution(t *testing.T, runID int64, unit, status, step string) *models.Execution {
	t.Helper()
	var x *models.Execution
	waitFor(t, func() (bool, string) {
		xs, err := models.ExecutionsOfRun(b.ctx, b.DB.Bun, runID)
		require.NoError(t, err)
		for i := range xs {
			if xs[i].CfgPath == unit {
				x = &xs[i]
				return x.Status == status && x.Step == step, fmt.Sprintf("%s is %s/%s (%s), want %s/%s", unit, x.Status, x.Step, x.Error, status, step)
			}
		}
		return false, fmt.Sprintf("run %d has no execution of %s", runID, unit)
	})
	full, err := models.ExecutionByID(b.ctx, b.DB.Bun, x.ID)
	require.NoError(t, err)
	return full
}

// executions maps the run's units to their statuses.
func (b *bundle) executions(t *testing.T, runID int64) map[string]string {
	t.Helper()
	xs, err := models.ExecutionsOfRun(b.ctx, b.DB.Bun, runID)
	require.NoError(t, err)
	out := map[string]string{}
	for _, x := range xs {
		out[x.CfgPath] = x.Status
	}
	return out
}

var linkPattern = regexp.MustCompile(`http://gantry\.test/approvals/link/(\S+)`)

// voteMail waits for the vote request about unit sent to voter and returns
// the link's token.
func (b *bundle) voteMail(t *testing.T, voter, unit string) string {
	t.Helper()
	m := b.Mail.Wait(t, wait, func(m mailtest.Message) bool {
		return contains(m.To, voter) && strings.Contains(m.Subject, "Vote on "+unit+" ")
	})
	match := linkPattern.FindStringSubmatch(m.Text)
	require.NotNil(t, match, "no voting link in:\n%s", m.Text)
	return match[1]
}

// waitStatus waits until sha's latest status under context has state.
func (b *bundle) waitStatus(t *testing.T, sha, context, state string) githubtest.Status {
	t.Helper()
	var st githubtest.Status
	waitFor(t, func() (bool, string) {
		var ok bool
		st, ok = b.GitHub.Latest(sha, context)
		return ok && st.State == state, fmt.Sprintf("%s on %s is %+v, want %s", context, sha[:8], st, state)
	})
	return st
}

func waitFor(t *testing.T, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s: %s", wait, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
