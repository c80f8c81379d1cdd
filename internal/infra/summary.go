package infra

// PlanSummary is terraform's one-line verdict of a plan output ("Plan: 1 to
// add, 0 to change, 0 to destroy.", "No changes. …"), or "" when it has
// none; the vote mails and the approval pages show it.
func PlanSummary(output string) string { return planSummary(output) }
