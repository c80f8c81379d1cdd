package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// gateKind is a test-only second kind of subject, registered the way an
// area registers one: pipeline gates will look like this. It has no page
// of its own, so its links show what its summary says.
type gateKind struct {
	mu       sync.Mutex
	approval map[string]int64
	decided  map[string]approval.State
}

func (g *gateKind) Name() string { return "gate" }

func (g *gateKind) Lock(_ context.Context, _ jobs.Tx, id string) (approvals.Ballot, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	aid, ok := g.approval[id]
	if !ok {
		return approvals.Ballot{}, apperr.New(apperr.NotFound, "No gate %s.", id)
	}
	return approvals.Ballot{ApprovalID: aid, Log: models.LogEntry{DeploymentID: "release", TargetID: "gate:" + id, Revision: "r1"}}, nil
}

func (g *gateKind) Decided(_ context.Context, _ jobs.Tx, id string, res approval.Result, _ string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.decided[id] = res.State
	return nil
}

func (g *gateKind) Describe(_ context.Context, _ bun.IDB, ids []string) (map[string]approvals.Summary, error) {
	out := map[string]approvals.Summary{}
	for _, id := range ids {
		out[id] = approvals.Summary{Label: "Pipeline gate", Title: "prod gate " + id, URL: "/pipelines", Detail: "release r1",
			Context: approvals.Context{Text: "pipeline web"}, Text: "Promote r1 to prod.",
			Approved: "r1 goes on to prod.", Rejected: "r1 stops here."}
	}
	return out, nil
}

func TestAnotherKindIsVotedThroughALinkAndListed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const ada, grace = "ada@example.com", "grace@example.com"
	adaUser := b.user(t, ada, models.RoleApprover)
	gates := &gateKind{approval: map[string]int64{}, decided: map[string]approval.State{}}
	svc := b.Infra.Approvals
	svc.Register(gates)
	gate := approvals.Subject{Kind: "gate", ID: "12"}
	err := b.queue.InTx(t.Context(), func(ctx context.Context, tx jobs.Tx) error {
		a, err := svc.Open(ctx, tx, gate, approval.Policy{Voters: []string{ada, grace}, MinApprovals: 1, MinRejections: 1})
		if err == nil {
			gates.approval[gate.ID] = a.ID
		}
		return err
	})
	require.NoError(t, err)

	asAda := b.browser(t)
	asAda.login(t, ada)
	_, page, _ := asAda.get(t, "/approvals")
	table := section(t, page, "approvals-table")
	require.Contains(t, table, `data-kind="gate" data-gate="12"`)
	require.Contains(t, table, "prod gate 12")
	require.Contains(t, table, "Promote r1 to prod.")
	require.Contains(t, table, "0 of 1 approvals")
	_, page, _ = asAda.get(t, "/approvals?kind=execution")
	require.Contains(t, page, `data-testid="empty-approvals"`)

	res, body := b.call(t, http.MethodGet, "/api/v1/approvals", b.token(t, adaUser, "read"), "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	list := body["approvals"].([]any)
	require.Len(t, list, 1)
	require.Equal(t, "gate:12", list[0].(map[string]any)["subject"])
	require.Empty(t, body["executions"], "the infrastructure field lists executions only")

	link, err := svc.Link(gate, grace)
	require.NoError(t, err)
	path := strings.TrimPrefix(link, servertest.BaseURL)
	require.True(t, strings.HasPrefix(path, pageurl.VotingLinkPrefix))
	anon := b.browser(t)
	status, page, csrf := anon.get(t, path)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, "Pipeline gate")
	require.Contains(t, page, `data-testid="link-voter">You are voting as <strong>grace@example.com</strong>`)
	require.Contains(t, page, `data-testid="link-vote-form"`)
	res, _ = anon.post(t, path, url.Values{"_csrf": {csrf}, "decision": {"approve"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, page, _ = anon.get(t, path)
	require.Contains(t, page, "Recorded your approval: 1 of 1 approvals, 0 of 1 rejections. That was enough: r1 goes on to prod.")
	require.NotContains(t, page, `data-testid="link-vote-form"`)
	gates.mu.Lock()
	require.Equal(t, approval.Approved, gates.decided[gate.ID], "the area heard of the decision")
	gates.mu.Unlock()

	_, page, _ = asAda.get(t, "/approvals")
	require.Contains(t, page, `data-testid="empty-approvals"`, "decided: it waits for nobody")
}

// TestADisabledVotersLinkShowsNothing: someone whose account was disabled
// (who left) sees neither the subject nor a vote form through links mailed
// before, and cannot vote with them.
func TestADisabledVotersLinkShowsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const leaver = "leaver@example.com"
	u := b.user(t, leaver, models.RoleApprover)
	gates := &gateKind{approval: map[string]int64{}, decided: map[string]approval.State{}}
	svc := b.Infra.Approvals
	svc.Register(gates)
	gate := approvals.Subject{Kind: "gate", ID: "21"}
	require.NoError(t, b.queue.InTx(t.Context(), func(ctx context.Context, tx jobs.Tx) error {
		a, err := svc.Open(ctx, tx, gate, approval.Policy{Voters: []string{leaver}, MinApprovals: 1, MinRejections: 1})
		if err == nil {
			gates.approval[gate.ID] = a.ID
		}
		return err
	}))
	link, err := svc.Link(gate, leaver)
	require.NoError(t, err)
	path := strings.TrimPrefix(link, servertest.BaseURL)
	require.NoError(t, access.SetDisabled(t.Context(), b.db.Bun, u.ID, true, "test"))

	anon := b.browser(t)
	status, page, _ := anon.get(t, path)
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, page, "is disabled, so its voting links no longer work")
	require.NotContains(t, page, "Promote r1 to prod.", "the subject is not shown")
	require.NotContains(t, page, `data-testid="link-vote-form"`)
	_, _, csrf := anon.get(t, "/login") // a valid form token, so only the account is in the way
	res, body := anon.post(t, path, url.Values{"_csrf": {csrf}, "decision": {"approve"}})
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.Contains(t, body, "is disabled")
}
