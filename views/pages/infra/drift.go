package infra

// DriftRow is one unit listed under drift: drifted (its plan has changes)
// or failing (its drift plan failed).
type DriftRow struct {
	Path       string
	URL        string // the check's page, with its plan
	Summary    string // "Plan: 0 to add, 1 to change, 0 to destroy." or the failure
	Commit     string // short trunk commit planned
	Checked    string
	CheckedISO string
	// Reconciling names the run reconciling it, if any.
	Reconciling Link
	// ReconcileURL is the form's action when the viewer may reconcile it.
	ReconcileURL string
}

// DriftRepo is one repository with drift detection.
type DriftRepo struct {
	Repository string
	Schedule   string // "every 6h"
	LastSweep  string // "12:00 UTC, trunk abc1234", or "not yet"
	SweepError string // the trunk could not be scanned
	Checking   string // "3 units being checked", or ""
	Drifted    []DriftRow
	Failed     []DriftRow
}

// DriftSection is the Drift panel of /infra.
type DriftSection struct {
	Repos []DriftRepo
}

// DriftCheckView is /infra/drift/{id}: one drift plan of one unit.
type DriftCheckView struct {
	ID           int64
	Path         string
	Repository   string
	State        State
	Error        string
	Fields       []Field
	Output       Output
	ReconcileURL string // set when the viewer may reconcile it
	Reconciling  Link   // the run reconciling it, if any
}
