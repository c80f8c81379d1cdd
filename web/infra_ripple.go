package web

import (
	"context"
	"strings"

	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/models"
	infraview "github.com/gantryhq/gantry/views/pages/infra"
)

// infraRippleJSON says why a run gained an execution.
type infraRippleJSON struct {
	Source          string   `json:"source"`           // the unit whose outputs changed
	SourceExecution string   `json:"source_execution"` // its execution_id
	Outputs         []string `json:"outputs"`
	Reason          string   `json:"reason"`
}

// infraOutputsChangedJSON is what an apply did to its unit's outputs.
type infraOutputsChangedJSON struct {
	Outputs []string `json:"outputs"` // names, never values
	Readers []string `json:"readers"` // the units added to the run because of it
	// CompareError: the outputs could not be compared, every reader was
	// added; Error: the readers could not be worked out.
	CompareError string `json:"compare_error,omitempty"`
	Error        string `json:"error,omitempty"`
}

// infraRipples is a run's ripple reasons and output changes, by execution.
type infraRipples struct {
	ripples map[int64]models.Ripple
	changes map[int64]models.OutputChanges
	ids     map[int64]string // execution_id by id
}

func newInfraRipples(xs []models.Execution, ripples map[int64]models.Ripple, changes map[int64]models.OutputChanges) infraRipples {
	ids := make(map[int64]string, len(xs))
	for _, x := range xs {
		ids[x.ID] = x.ExecutionID
	}
	return infraRipples{ripples: ripples, changes: changes, ids: ids}
}

// decorate adds the ripple fields of x to its JSON.
func (r infraRipples) decorate(out *infraExecutionJSON, x *models.Execution) {
	if rp, ok := r.ripples[x.ID]; ok {
		out.Ripple = &infraRippleJSON{Source: rp.SourceUnit, SourceExecution: r.ids[rp.SourceID], Outputs: rp.Outputs, Reason: infra.RippleReason(&rp)}
	}
	if c, ok := r.changes[x.ID]; ok {
		out.OutputsChanged = &infraOutputsChangedJSON{Outputs: c.Outputs, Readers: c.Readers, CompareError: c.CompareError, Error: c.Error}
	}
}

// row adds the ripple reason to an execution's row, and says "checked, no
// changes" for a ripple whose plan had none.
func (r infraRipples) row(row *infraview.ExecRow, x *models.Execution) {
	rp, ok := r.ripples[x.ID]
	if !ok {
		return
	}
	row.Ripple = infra.RippleReason(&rp)
	if rippleChecked(x) {
		row.State.Text = "checked · no changes"
	}
}

// rippleChecked is a ripple execution whose plan had no changes: it
// succeeded without votes.
func rippleChecked(x *models.Execution) bool {
	return x.Status == models.ExecSucceeded && x.HasChanges != nil && !*x.HasChanges
}

// rows are the run's applies that changed outputs read outside the run,
// with what became of each reader.
func (r infraRipples) rows(xs []models.Execution) []infraview.RippleRow {
	var out []infraview.RippleRow
	for i := range xs {
		src := &xs[i]
		c, ok := r.changes[src.ID]
		if !ok || (len(c.Readers) == 0 && c.Error == "") {
			continue
		}
		row := infraview.RippleRow{Unit: src.CfgPath, URL: pageurl.Execution(src.ExecutionID), Outputs: strings.Join(c.Outputs, ", "), Error: c.Error}
		if c.CompareError != "" {
			row.Outputs = "outputs that could not be compared (" + c.CompareError + ")"
		}
		for j := range xs {
			x := &xs[j]
			if rp, ok := r.ripples[x.ID]; !ok || rp.SourceID != src.ID {
				continue
			}
			link := infraview.Link{Text: x.CfgPath, URL: pageurl.Execution(x.ExecutionID)}
			switch {
			case x.Status == models.ExecFailed || x.Status == models.ExecAborted:
				row.Failed = append(row.Failed, link)
			case rippleChecked(x):
				row.Checked = append(row.Checked, link)
			case x.HasChanges != nil && *x.HasChanges:
				row.Changed = append(row.Changed, link)
			default:
				row.Pending = append(row.Pending, link)
			}
		}
		out = append(out, row)
	}
	return out
}

// reason is why the run gained x, for its page; nil when it did not.
func (r infraRipples) reason(x *models.Execution) *infraview.RippleReason {
	rp, ok := r.ripples[x.ID]
	if !ok {
		return nil
	}
	text := infra.RippleReason(&rp)
	return &infraview.RippleReason{Text: strings.ToUpper(text[:1]) + text[1:], SourceURL: pageurl.Execution(r.ids[rp.SourceID])}
}

// ripplesOf reads a run's ripples.
func (s *infraHandlers) ripplesOf(ctx context.Context, runID int64) (infraRipples, error) {
	xs, err := models.ExecutionsOfRun(ctx, s.DB.Bun, runID)
	if err != nil {
		return infraRipples{}, err
	}
	ripples, changes, err := models.RipplesOfRun(ctx, s.DB.Bun, runID)
	if err != nil {
		return infraRipples{}, err
	}
	return newInfraRipples(xs, ripples, changes), nil
}
