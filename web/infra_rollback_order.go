package web

import (
	"github.com/gantryhq/gantry/internal/infrarun"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/models"
	infraview "github.com/gantryhq/gantry/views/pages/infra"
)

// infraRollbackTurnDeps is what rollback x waits for when the run's
// rollbacks go one at a time, newest first (their runs ordered the units
// differently: infrarun.RollbacksInTurn), or nil when they do not.
func infraRollbackTurnDeps(x *models.Execution, rollbacks []models.Execution) []infraview.Dep {
	states := make([]infrarun.State, len(rollbacks))
	for i, r := range rollbacks {
		states[i] = infrarun.State{ID: r.ID, CfgPath: r.CfgPath, Account: r.AccountName, CfgDeps: r.CfgDeps, AccountDeps: r.AccountDeps, RollbackOf: *r.RollbackOf}
	}
	if !infrarun.RollbacksInTurn(states) {
		return nil
	}
	out := []infraview.Dep{}
	for i := range rollbacks {
		r := &rollbacks[i]
		if *r.RollbackOf > *x.RollbackOf || (*r.RollbackOf == *x.RollbackOf && r.ID > x.ID) {
			out = append(out, infraview.Dep{Path: r.CfgPath, URL: pageurl.Execution(r.ExecutionID), State: infraExecState(r),
				Why: "the runs these rollbacks undo ordered their units differently: they go one at a time, newest first"})
		}
	}
	return out
}
