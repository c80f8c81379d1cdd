package infra

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/models"
)

// TestPlanObject_twoAttemptsInOneSecondAreTwoObjects: a plan made again
// within the second its first attempt began (a retry right after a lost
// worker) stores its plan file at a key of its own, so the first attempt's
// task can never overwrite the second's plan.
func TestPlanObject_twoAttemptsInOneSecondAreTwoObjects(t *testing.T) {
	first := time.Date(2026, 11, 25, 1, 2, 3, 100_000_000, time.UTC)
	second := first.Add(400 * time.Millisecond)
	a := planObject(&models.Execution{ExecutionID: "run-41-abcd-prod-vpc-001", PlanStartedAt: &first})
	b := planObject(&models.Execution{ExecutionID: "run-41-abcd-prod-vpc-001", PlanStartedAt: &second})
	require.NotEqual(t, a, b)
	require.Equal(t, "run-41-abcd-prod-vpc-001/plan-1795568523100000.tfplan", a)
	// What the database gives back (microseconds) names the same object.
	stored := first.Add(999 * time.Nanosecond).Truncate(time.Microsecond)
	require.Equal(t, a, planObject(&models.Execution{ExecutionID: "run-41-abcd-prod-vpc-001", PlanStartedAt: &stored}))
}
