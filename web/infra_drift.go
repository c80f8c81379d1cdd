package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/infra"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/models"
	infraview "github.com/gantryhq/gantry/views/pages/infra"
)

// Drift detection on the web: the Drift panel of /infra, a drift check's
// page, and reconciling a drifted unit (operators) from the page or the
// API (POST /api/v1/infra/drift/{id}/reconcile).

// infraDriftSection builds /infra's Drift panel from the repositories the
// page read; operators get the reconcile buttons.
func (s *infraHandlers) infraDriftSection(ctx context.Context, all []models.RepositoryWithLock, operator bool) (infraview.DriftSection, error) {
	plain := make([]models.Repository, len(all))
	for i := range all {
		plain[i] = all[i].Repository
	}
	repos, err := models.DriftOf(ctx, s.DB.Bun, plain)
	if err != nil {
		return infraview.DriftSection{}, err
	}
	var v infraview.DriftSection
	for _, r := range repos {
		d := infraview.DriftRepo{Repository: r.Repository, Schedule: "every " + shortDuration(time.Duration(r.EverySeconds)*time.Second), LastSweep: "not yet: the first check starts within a minute"}
		if r.Sweep != nil {
			d.LastSweep = clock(r.Sweep.SweptAt) + " UTC"
			if r.Sweep.CommitSHA != "" {
				d.LastSweep += ", trunk at " + shortSHA(r.Sweep.CommitSHA)
			}
			d.SweepError = r.Sweep.Error
		}
		if r.Checking > 0 {
			d.Checking = plural(r.Checking, "unit", "units") + " being checked now."
		}
		for _, u := range r.Drifted {
			d.Drifted = append(d.Drifted, infraDriftRow(&u, operator))
		}
		for _, u := range r.Failed {
			d.Failed = append(d.Failed, infraDriftRow(&u, operator))
		}
		v.Repos = append(v.Repos, d)
	}
	return v, nil
}

func infraDriftRow(u *models.DriftUnit, operator bool) infraview.DriftRow {
	row := infraview.DriftRow{Path: u.Path, URL: pageurl.DriftCheck(u.ID), Commit: shortSHA(u.CommitSHA), Summary: u.Error}
	if u.FinishedAt != nil {
		row.Checked, row.CheckedISO = clock(*u.FinishedAt), iso(*u.FinishedAt)
	}
	if u.Drifted() {
		row.Summary = "changes"
		if u.Verdict != "" {
			row.Summary = u.Verdict
		}
	}
	row.Reconciling, row.ReconcileURL = infraReconcileControl(u.Drifted(), u.ReconcileRunID, u.ReconcileRun, u.ID, operator)
	return row
}

// infraReconcileControl is the run reconciling a drifted unit (while it
// runs), else the reconcile form's action when the viewer may use it.
func infraReconcileControl(drifted bool, runID *int64, runStatus string, checkID int64, operator bool) (infraview.Link, string) {
	if runID != nil && runStatus != models.RunSucceeded && runStatus != models.RunFailed {
		return infraview.Link{Text: fmt.Sprintf("reconciling: run %d (%s)", *runID, runStatus), URL: pageurl.Run(*runID)}, ""
	}
	if drifted && operator {
		return infraview.Link{}, pageurl.DriftCheck(checkID) + "/reconcile"
	}
	return infraview.Link{}, ""
}

// driftCheckPage is /infra/drift/{id}: one drift plan with its output.
func (s *infraHandlers) driftCheckPage(c echo.Context) error {
	ctx := c.Request().Context()
	id, err := pathID(c, "drift check")
	if err != nil {
		return err
	}
	d, err := models.DriftCheckByID(ctx, s.DB.Bun, id)
	if err != nil {
		return notFoundAs(err, "No drift check %d.", id)
	}
	run, err := models.LatestReconcileRun(ctx, s.DB.Bun, d.ID)
	if err != nil {
		return err
	}
	v := infraview.DriftCheckView{ID: d.ID, Path: d.Path, Repository: d.Repository, State: infraDriftState(d), Error: d.Error}
	var runID *int64
	var runStatus string
	if run != nil {
		runID, runStatus = &run.ID, run.Status
	}
	operator := principalOf(c).User.Role.Includes(models.RoleOperator)
	v.Reconciling, v.ReconcileURL = infraReconcileControl(d.Drifted(), runID, runStatus, d.ID, operator)
	v.Fields = []infraview.Field{
		{Label: "Repository", Value: d.Repository, TestID: "field-repository"},
		{Label: "Unit", Value: d.Path, Mono: true, TestID: "field-unit"},
		{Label: "Trunk commit", Value: d.CommitSHA, Mono: true, TestID: "field-commit"},
		{Label: "Status", Value: infraDriftState(d).Text, TestID: "field-status"},
		{Label: "Queued", Value: clock(d.CreatedAt) + " UTC", TestID: "field-queued"},
	}
	if d.FinishedAt != nil {
		v.Fields = append(v.Fields, infraview.Field{Label: "Finished", Value: clock(*d.FinishedAt) + " UTC", TestID: "field-finished"})
	}
	if run != nil {
		v.Fields = append(v.Fields, infraview.Field{Label: "Reconciled by", Links: []infraview.Link{{Text: infraRunTitle(run.ID) + " (" + run.Status + ")", URL: pageurl.Run(run.ID)}}, TestID: "field-reconcile-run"})
	}
	v.Output = infraview.Output{TestID: "drift-output", Text: d.Output, Offset: strconv.Itoa(utf8.RuneCountInString(d.Output))}
	switch d.Status {
	case models.DriftQueued:
		v.Output.Empty = "Queued: the plan starts as soon as a worker is free. Reload to see it."
	case models.DriftRunning:
		v.Output.Empty = "Planning. Reload to see the output so far."
	default:
		v.Output.Empty = "The plan wrote no output."
	}
	if summary := infra.PlanSummary(d.Output); summary != "" {
		v.Output.Note = "Result: " + summary
	}
	return s.render(c, http.StatusOK, infraview.DriftCheck(v))
}

func infraDriftState(d *models.DriftCheck) infraview.State {
	switch {
	case d.Status == models.DriftQueued:
		return infraview.State{Text: "queued", Tone: "muted", Class: "waiting"}
	case d.Status == models.DriftRunning:
		return infraview.State{Text: "planning", Class: "running"}
	case d.Status == models.DriftFailed:
		return infraview.State{Text: "check failed", Tone: "bad", Class: "failed"}
	case d.Drifted():
		return infraview.State{Text: "drifted", Tone: "warn", Class: "voting"}
	}
	return infraview.State{Text: "no drift", Tone: "ok", Class: "succeeded"}
}

// reconcileDriftForm reconciles a drifted unit from its page or /infra,
// then shows the run it started.
func (s *infraHandlers) reconcileDriftForm(c echo.Context) error {
	id, err := pathID(c, "drift check")
	if err != nil {
		return err
	}
	run, err := s.Infra.ReconcileDrift(c.Request().Context(), id, principalOf(c).Actor())
	if err != nil {
		var ae *apperr.Error
		if errors.As(err, &ae) && ae.Code != apperr.Internal && ae.Code != apperr.NotFound {
			return s.redirectWithFlash(c, pageurl.DriftCheck(id), false, ae.Error())
		}
		return err
	}
	return s.redirectWithFlash(c, pageurl.Run(run.ID), true,
		fmt.Sprintf("Run %d reconciles the unit: it plans at the trunk's head once it holds the merge lock, then asks the voters.", run.ID))
}

// infraDriftJSON is a unit found drifted or failing by its latest check.
type infraDriftJSON struct {
	CheckID        int64      `json:"check_id"`
	Repository     string     `json:"repository"`
	Path           string     `json:"path"`
	Commit         string     `json:"commit"`
	Status         string     `json:"status"` // drifted or failed
	Summary        string     `json:"summary,omitempty"`
	Error          string     `json:"error,omitempty"`
	FinishedAt     *time.Time `json:"finished_at"`
	ReconcileRunID *int64     `json:"reconcile_run_id,omitempty"`
}

// apiListDrift lists the units found drifted or failing, for every
// repository with drift detection.
func (s *infraHandlers) apiListDrift(c echo.Context) error {
	repos, err := models.ListDrift(c.Request().Context(), s.DB.Bun)
	if err != nil {
		return err
	}
	out := []infraDriftJSON{}
	for _, r := range repos {
		for _, group := range [][]models.DriftUnit{r.Drifted, r.Failed} {
			for _, u := range group {
				j := infraDriftJSON{CheckID: u.ID, Repository: u.Repository, Path: u.Path, Commit: u.CommitSHA, Status: "drifted",
					Summary: u.Verdict, Error: u.Error, FinishedAt: u.FinishedAt, ReconcileRunID: u.ReconcileRunID}
				if u.Status == models.DriftFailed {
					j.Status = "failed"
				}
				out = append(out, j)
			}
		}
	}
	return c.JSON(http.StatusOK, out)
}

// apiReconcileDrift starts the run reconciling a drifted unit (operators):
// 201 with the run; 404 for no such check, 409 when it found no drift or a
// run reconciles the unit already.
func (s *infraHandlers) apiReconcileDrift(c echo.Context) error {
	id, err := pathID(c, "drift check")
	if err != nil {
		return err
	}
	run, err := s.Infra.ReconcileDrift(c.Request().Context(), id, principalOf(c).Actor())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, infraRunAnswerJSON{Run: infraRunOf(run)})
}

// infraRunPR is what a run deploys as listings name it: its pull request
// ("#42"), or "drift" for a run reconciling a drifted unit.
func infraRunPR(run *models.Run) string {
	if run.ReconcileCheckID != nil {
		return "drift"
	}
	return "#" + strconv.Itoa(run.PRNumber)
}

// infraRunPRURL is the page of what a run deploys: its pull request's, or
// the drift check it reconciles.
func infraRunPRURL(run *models.Run) string {
	if run.ReconcileCheckID != nil {
		return pageurl.DriftCheck(*run.ReconcileCheckID)
	}
	return pageurl.Pull(run.Repository, run.PRNumber)
}

// infraReconcileRunFields are a reconcile run's facts in place of a merge's.
func infraReconcileRunFields(run *models.Run) []infraview.Field {
	out := []infraview.Field{{Label: "Reconciles", TestID: "field-reconciles",
		Links: []infraview.Link{{Text: run.PRTitle, URL: pageurl.DriftCheck(*run.ReconcileCheckID)}}}}
	commit := run.MergeCommit
	if commit == "" {
		commit = "read when the run takes the merge lock"
	}
	return append(out,
		infraview.Field{Label: "Trunk", Value: run.BaseRef, Mono: true, TestID: "field-refs"},
		infraview.Field{Label: "Trunk commit", Value: commit, Mono: true, TestID: "field-merge-commit"},
		infraview.Field{Label: "Scan", Value: "reconcile: the drifted unit alone, at the trunk's head", TestID: "field-scan"})
}
