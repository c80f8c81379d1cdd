package infra

import "github.com/gantryhq/gantry/models"

// withCurrentPolicy is x with the voters, thresholds and roles its unit's
// account has now. A deleted unit's rollback runs in a later run than the
// apply it undoes: today's voters decide it and today's roles run it
// (decision: someone who left the account's voters since must not be
// asked, a rotated role must not be assumed). A unit under no account any
// more keeps x's. Its commands stay x's: they match the commit it runs
// from.
func withCurrentPolicy(repo *models.Repository, x models.Execution) *models.Execution {
	acc := accountFor(repo.Accounts, x.CfgPath)
	if acc == nil {
		return &x
	}
	x.PlanRoleARN, x.ApplyRoleARN = acc.PlanRole, acc.ApplyRole
	x.Voters, x.MinApprovalCount, x.MinRejectionCount = acc.Voters, acc.MinApprovals, acc.MinRejections
	return &x
}
