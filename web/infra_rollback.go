package web

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/models"
	approvalsview "github.com/gantryhq/gantry/views/pages/approvals"
	infraview "github.com/gantryhq/gantry/views/pages/infra"
)

// The rollback parts of the infrastructure pages: a run's "Rollback"
// section, a rollback execution's panel, the new provider resources an
// apply recorded, and an operator's choices for a failed rollback.

// infraRollbackChoices are an operator's choices for a failed rollback, by
// the path of their action under the execution.
var infraRollbackChoices = []struct {
	Path, Choice, Label, Hint, Class, Confirm, Done string
}{
	{"rollback-retry", infra.RollbackChoiceRetry, "Retry the rollback", "plan the destroy again; the voters are asked again", "",
		"Retry this rollback? The destroy is planned again and the voters are asked again.", "Retrying: the voters are asked again once the destroy is planned."},
	{"rollback-resolved", infra.RollbackChoiceResolved, "Mark resolved", "you dealt with what is left: the rollbacks after it and the run go on", "danger",
		"Mark this rollback resolved? Gantry will not destroy what is left; the run goes on.", "Marked resolved: the run goes on."},
}

// splitRollbacks separates a run's rollback executions from the others.
func splitRollbacks(xs []models.Execution) (forward, rollbacks []models.Execution) {
	for _, x := range xs {
		if x.RollbackOf != nil {
			rollbacks = append(rollbacks, x)
		} else {
			forward = append(forward, x)
		}
	}
	return forward, rollbacks
}

// infraRollbackView is one rollback for a page; operators get the choices
// of a failed one.
func infraRollbackView(x *models.Execution, rb models.Rollback, of string, user *models.User) infraview.Rollback {
	v := infraview.Rollback{
		Unit: x.CfgPath, ExecutionID: x.ExecutionID, URL: pageurl.Execution(x.ExecutionID), State: infraExecState(x),
		OfID: of, OfURL: pageurl.Execution(of), Commit: rb.Commit, Addresses: rb.Addresses,
		Targeted: plural(len(rb.Addresses), "address", "addresses") + " targeted",
		Failed:   x.Status == models.ExecFailed, Remaining: rb.Remaining,
		RemainingTitle: fmt.Sprintf("Still in the state (%s):", plural(len(rb.Remaining), "resource", "resources")),
	}
	v.Reason = "its run failed"
	if rb.Reason == models.RollbackUnitDeleted {
		v.Reason = "a later merge deleted the unit; the commit is the last one where it existed"
	}
	switch {
	case rb.RemainingError != "":
		v.RemainingNote = "What is left is unknown: " + rb.RemainingError
	case rb.Remaining == nil:
		v.RemainingNote = "What is left is unknown: look at the unit's state."
	}
	if rb.Resolved() {
		v.State.Text += " · resolved"
		v.Resolved = fmt.Sprintf("Marked resolved by %s at %s UTC", rb.ResolvedBy, clock(*rb.ResolvedAt))
		if rb.ResolvedReason != "" {
			v.Resolved += ": " + rb.ResolvedReason
		}
	}
	if v.Failed && !rb.Resolved() {
		v.Held, v.Explanation = true, infra.RollbackHeldExplanation
		if !user.Role.Includes(models.RoleOperator) {
			v.Note = "An operator chooses: retry it, or mark it resolved. The run waits meanwhile, with the merge lock."
			return v
		}
		for _, c := range infraRollbackChoices {
			v.Choices = append(v.Choices, infraview.Choice{Action: v.URL + "/" + c.Path, Label: c.Label, Hint: c.Hint,
				Class: c.Class, TestID: c.Path, Confirm: c.Confirm})
		}
	}
	return v
}

// infraRollbackSection is a run's "Rollback" section, nil when the run
// has no rollback.
func infraRollbackSection(ctx context.Context, db bun.IDB, run *models.Run, xs []models.Execution, user *models.User) (*infraview.RollbackSection, error) {
	forward, rollbacks := splitRollbacks(xs)
	if len(rollbacks) == 0 {
		return nil, nil
	}
	rbs, err := models.RollbacksOfRun(ctx, db, run.ID)
	if err != nil {
		return nil, err
	}
	idOf := make(map[int64]string, len(forward))
	for _, x := range forward {
		idOf[x.ID] = x.ExecutionID
	}
	sec := &infraview.RollbackSection{}
	held, running, resolved := 0, 0, 0
	for i := range rollbacks {
		x := &rollbacks[i]
		of := idOf[*x.RollbackOf]
		if of == "" { // a unit a later merge deleted: its execution is in an earlier run
			of = rollbackOfID(ctx, db, *x.RollbackOf)
		}
		v := infraRollbackView(x, rbs[x.ID], of, user)
		if v.Held {
			held++
		}
		if v.Resolved != "" {
			resolved++
		}
		if !x.Ended() {
			running++
		}
		sec.Rollbacks = append(sec.Rollbacks, v)
	}
	switch {
	case held > 0:
		sec.Tone = "bad"
		sec.Note = plural(held, "rollback failed and waits", "rollbacks failed and wait") +
			" for an operator: Gantry never retries a rollback on its own. The run holds the merge lock until an operator retries it or marks it resolved."
	case running > 0:
		sec.Note = "Gantry is destroying the resources of providers this run's deployments introduced, each unit after those that depended on it, through the same plan, vote and apply. The run holds the merge lock until they end."
	case resolved > 0:
		sec.Note = plural(resolved, "rollback failed and was", "rollbacks failed and were") +
			" marked resolved by an operator: what they left in the state is listed below; the other resources of new providers were destroyed."
	default:
		sec.Note = "The resources of new providers this run's deployments introduced were destroyed."
	}
	return sec, nil
}

// infraRollbackJSON is a rollback execution's record (client.Rollback).
type infraRollbackJSON struct {
	RollbackOf string   `json:"rollback_of"` // the execution id it rolls back
	Reason     string   `json:"reason"`      // run-failed or unit-deleted
	Commit     string   `json:"commit"`      // the commit it plans and applies
	Addresses  []string `json:"addresses"`
	// Remaining is what a failed one left in the state; null while
	// unknown (RemainingError says why when it could not be read).
	Remaining      []string   `json:"remaining"`
	RemainingError string     `json:"remaining_error,omitempty"`
	Held           bool       `json:"held"` // failed and waiting for an operator's retry or resolved
	ResolvedBy     string     `json:"resolved_by,omitempty"`
	ResolvedReason string     `json:"resolved_reason,omitempty"`
	ResolvedAt     *time.Time `json:"resolved_at,omitempty"`
}

// withRollback adds a rollback execution's record to its detail.
func withRollback(ctx context.Context, db bun.IDB, x *models.Execution, out *infraExecutionDetailJSON) error {
	if x.RollbackOf == nil {
		return nil
	}
	rb, err := models.RollbackByExecution(ctx, db, x.ID)
	if err != nil {
		return err
	}
	out.Rollback = &infraRollbackJSON{
		RollbackOf: rollbackOfID(ctx, db, *x.RollbackOf), Reason: rb.Reason, Commit: rb.Commit, Addresses: nonNilSlice(rb.Addresses),
		Remaining: rb.Remaining, RemainingError: rb.RemainingError, Held: x.Status == models.ExecFailed && !rb.Resolved(),
		ResolvedBy: rb.ResolvedBy, ResolvedReason: rb.ResolvedReason, ResolvedAt: rb.ResolvedAt,
	}
	return nil
}

// rollbackOfID is the execution id of the execution row id; "" when it
// cannot be read (the page still shows the rest).
func rollbackOfID(ctx context.Context, db bun.IDB, id int64) string {
	x, err := models.ExecutionByID(ctx, db, id)
	if err != nil {
		return ""
	}
	return x.ExecutionID
}

// infraExecutionRollbackParts are the rollback panels of an execution's
// page: its own when it is a rollback, and the new provider resources its
// apply recorded (with their rollback) when it is not.
func infraExecutionRollbackParts(ctx context.Context, db bun.IDB, x *models.Execution, siblings []models.Execution, user *models.User) (*infraview.Rollback, *infraview.NewResources, error) {
	if x.RollbackOf != nil {
		rb, err := models.RollbackByExecution(ctx, db, x.ID)
		if err != nil {
			return nil, nil, err
		}
		v := infraRollbackView(x, *rb, rollbackOfID(ctx, db, *x.RollbackOf), user)
		return &v, nil, nil
	}
	recs, err := models.NewResourcesOf(ctx, db, []int64{x.ID})
	if err != nil {
		return nil, nil, err
	}
	rec, ok := recs[x.ID]
	if !ok || (rec.Error == "" && len(rec.Addresses) == 0) {
		return nil, nil, nil
	}
	n := &infraview.NewResources{Providers: rec.Providers, Addresses: rec.Addresses, Error: rec.Error,
		Intro: fmt.Sprintf("This apply introduced %s to the unit (%s). If the run fails, or a later merge deletes the unit, a rollback destroys these %s:",
			plural(len(rec.Providers), "provider", "providers"), strings.Join(rec.Providers, ", "), plural(len(rec.Addresses), "resource", "resources"))}
	if i := slices.IndexFunc(siblings, func(s models.Execution) bool { return s.RollbackOf != nil && *s.RollbackOf == x.ID }); i >= 0 {
		n.RollbackURL, n.RollbackState = pageurl.Execution(siblings[i].ExecutionID), infraExecState(&siblings[i])
	}
	return nil, n, nil
}

// infraExecutionDeps is what an execution waits for: for a rollback, the
// rollbacks of the executions that depended on the one it rolls back
// (the order reversed); for any other, its dependencies among the run's
// other executions.
func infraExecutionDeps(x *models.Execution, siblings []models.Execution) []infraview.Dep {
	forward, rollbacks := splitRollbacks(siblings)
	if x.RollbackOf == nil {
		return infraDepsOf(x, forward)
	}
	if turn := infraRollbackTurnDeps(x, rollbacks); turn != nil { // infra_rollback_order.go
		return turn
	}
	var out []infraview.Dep
	for i := range rollbacks {
		r := &rollbacks[i]
		if r.ID == x.ID {
			continue
		}
		why := ""
		switch {
		case slices.Contains(r.CfgDeps, x.CfgPath):
			why = "its rollback goes first: it depended on this unit"
		case r.AccountName != x.AccountName && slices.Contains(r.AccountDeps, x.AccountName):
			why = fmt.Sprintf("account %s depended on %s: its rollbacks go first", r.AccountName, x.AccountName)
		case r.CfgPath == x.CfgPath && *r.RollbackOf > *x.RollbackOf:
			why = "a newer rollback of the same unit goes first"
		default:
			continue
		}
		out = append(out, infraview.Dep{Path: r.CfgPath, URL: pageurl.Execution(r.ExecutionID), State: infraExecState(r), Why: why})
	}
	return out
}

// apiResolveRollback is an operator's choice for a failed rollback: the
// execution as it is now.
func (s *infraHandlers) apiResolveRollback(choice string) echo.HandlerFunc {
	return func(c echo.Context) error {
		var in infraAbortRequest
		if c.Request().ContentLength != 0 {
			if err := bindJSON(c, &in); err != nil {
				return err
			}
		}
		if err := s.Infra.ResolveRollback(c.Request().Context(), c.Param("execution_id"), choice, principalOf(c).Actor(), in.Reason); err != nil {
			return err
		}
		return s.apiGetExecution(c)
	}
}

// markRollbackLink marks a voting link's page on a rollback execution as
// such.
func markRollbackLink(v *approvalsview.LinkView, x *models.Execution) {
	v.Label, v.Title = "Infrastructure rollback vote", "Roll back "+x.CfgPath
	v.Consequence = "Approving applies exactly the destroy plan above: the resources of new providers it lists are destroyed. " +
		"Rejecting fails this rollback, which then waits for an operator."
}

// markRollbackFields shows, on a rollback execution's page, the commit it
// runs from: a deleted unit's is older than its run's merge.
func markRollbackFields(fields []infraview.Field, r *infraview.Rollback) {
	for i := range fields {
		if fields[i].TestID == "field-commit" {
			fields[i].Value = r.Commit
		}
	}
}

// heldRollbacksWhy lists, among what holds a run's merge lock, its failed
// rollbacks waiting for an operator.
func heldRollbacksWhy(sec *infraview.RollbackSection) []infraview.LockWhy {
	if sec == nil {
		return nil
	}
	var out []infraview.LockWhy
	for _, r := range sec.Rollbacks {
		if r.Held {
			out = append(out, infraview.LockWhy{Unit: "rollback of " + r.Unit, URL: r.URL, Step: "failed", Tone: "bad",
				Text: "The rollback failed and Gantry will not retry it on its own: an operator retries it or marks it resolved on its page."})
		}
	}
	return out
}

// withNewResources adds to an execution's API record the seed's
// new_providers and new_resources its apply recorded.
func withNewResources(ctx context.Context, db bun.IDB, x *models.Execution, out *infraExecutionDetailJSON) error {
	recs, err := models.NewResourcesOf(ctx, db, []int64{x.ID})
	if err != nil {
		return err
	}
	if rec, ok := recs[x.ID]; ok {
		out.NewProviders, out.NewResources = nonNilSlice(rec.Providers), nonNilSlice(rec.Addresses)
	}
	return nil
}
