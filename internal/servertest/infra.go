package servertest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/github/githubtest"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
	"github.com/gantryhq/gantry/models"
)

// Wait is how long the infra helpers wait for the workers to get somewhere;
// the fixture's plans and applies take a fraction of a second each.
const Wait = 90 * time.Second

var deliveryIDs atomic.Int64

// Deliver hands a delivery signed with WebhookSecret to the infra service,
// under a fresh delivery id.
func (s *Server) Deliver(t testing.TB, event string, body []byte) infra.WebhookResult {
	t.Helper()
	res, err := s.Infra.ReceiveWebhook(t.Context(), infra.Delivery{
		Event: event, ID: fmt.Sprintf("delivery-%d-%d", time.Now().UnixNano(), deliveryIDs.Add(1)),
		Signature: github.Sign([]byte(WebhookSecret), body), Body: body,
	})
	require.NoError(t, err)
	return res
}

// WaitFor polls cond until it holds, failing t with its last word after Wait.
func WaitFor(t testing.TB, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s: %s", Wait, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitRunOf waits for the run of repo's merge commit sha.
func (s *Server) WaitRunOf(t testing.TB, repo, sha string) *models.Run {
	t.Helper()
	var run *models.Run
	WaitFor(t, func() (bool, string) {
		var err error
		run, err = models.RunOfMerge(t.Context(), s.DB.Bun, repo, sha)
		return err == nil, "no run for merge " + sha
	})
	return run
}

// WaitRun waits until the run's status is one of want.
func (s *Server) WaitRun(t testing.TB, id int64, want ...string) *models.Run {
	t.Helper()
	var run *models.Run
	WaitFor(t, func() (bool, string) {
		var err error
		run, err = models.RunByID(t.Context(), s.DB.Bun, id)
		require.NoError(t, err)
		return slices.Contains(want, run.Status), fmt.Sprintf("run %d is %s (%s), want %v", id, run.Status, run.Error, want)
	})
	return run
}

// WaitExecution waits until the run's execution of unit has status (and
// step) and returns it with its outputs.
func (s *Server) WaitExecution(t testing.TB, runID int64, unit, status, step string) *models.Execution {
	t.Helper()
	var id int64
	WaitFor(t, func() (bool, string) {
		xs, err := models.ExecutionsOfRun(t.Context(), s.DB.Bun, runID)
		require.NoError(t, err)
		for _, x := range xs {
			if x.CfgPath == unit {
				id = x.ID
				return x.Status == status && x.Step == step, fmt.Sprintf("%s is %s/%s (%s), want %s/%s", unit, x.Status, x.Step, x.Error, status, step)
			}
		}
		return false, fmt.Sprintf("run %d has no execution of %s", runID, unit)
	})
	x, err := models.ExecutionByID(t.Context(), s.DB.Bun, id)
	require.NoError(t, err)
	return x
}

// WaitStatus waits until sha's latest commit status under context has state.
func (s *Server) WaitStatus(t testing.TB, sha, context, state string) githubtest.Status {
	t.Helper()
	var st githubtest.Status
	WaitFor(t, func() (bool, string) {
		var ok bool
		st, ok = s.GitHub.Latest(sha, context)
		return ok && st.State == state, fmt.Sprintf("%s on %s is %+v, want %s", context, sha, st, state)
	})
	return st
}

var votingLink = regexp.MustCompile(regexp.QuoteMeta(BaseURL) + `/approvals/link/(\S+)`)

// VoteMail waits for the vote request about unit sent to voter and returns
// the token of its link.
func (s *Server) VoteMail(t testing.TB, voter, unit string) string {
	t.Helper()
	m := s.Mail.Wait(t, Wait, func(m mailtest.Message) bool {
		return slices.Contains(m.To, voter) && strings.Contains(m.Subject, "Vote on "+unit+" ")
	})
	match := votingLink.FindStringSubmatch(m.Text)
	require.NotNil(t, match, "no voting link in:\n%s", m.Text)
	return match[1]
}
