package infra

import (
	"regexp"
	"strings"
)

// PlanSummary is terraform's one-line verdict of a plan output ("Plan: 1 to
// add, 0 to change, 0 to destroy.", "No changes. …"), or "" when it has
// none; the vote mails and the approval pages show it.
func PlanSummary(output string) string { return planSummary(output) }

// PlanChange is one resource a plan changes, as terraform's plan output
// announces it ("# module.db.aws_db_instance.main must be replaced").
type PlanChange struct {
	Address string
	Action  string // one of the PlanAction… words
}

// The actions of PlanChange, in the order a voter reads them.
const (
	PlanActionCreate  = "create"
	PlanActionUpdate  = "update"
	PlanActionReplace = "replace"
	PlanActionDestroy = "destroy"
	PlanActionRead    = "read"
)

// planChangeLine is terraform's announcement of one resource's change in
// the plan's text, after the "Terraform will perform the following
// actions:" line; the address may hold spaces inside its keys.
var planChangeLine = regexp.MustCompile(`^\s*# (.+?) (will be created|will be updated in-place|must be replaced|will be destroyed|will be read during apply)\s*$`)

var planActionOf = map[string]string{
	"will be created": PlanActionCreate, "will be updated in-place": PlanActionUpdate,
	"must be replaced": PlanActionReplace, "will be destroyed": PlanActionDestroy,
	"will be read during apply": PlanActionRead,
}

// PlanChanges lists the resources a plan output changes, in its order, so
// a voter sees what will happen before reading the whole plan.
func PlanChanges(output string) []PlanChange {
	var out []PlanChange
	for _, line := range strings.Split(output, "\n") {
		if m := planChangeLine.FindStringSubmatch(strings.TrimRight(line, "\r")); m != nil {
			out = append(out, PlanChange{Address: m[1], Action: planActionOf[m[2]]})
		}
	}
	return out
}
