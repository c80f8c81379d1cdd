package infra_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/infra"
)

func TestPlanChangesListsEachResourceByAction(t *testing.T) {
	t.Parallel()
	out := `Terraform used the selected providers to generate the following execution
plan. Resource actions are indicated with the following symbols:
  + create
  ~ update in-place
  - destroy
-/+ destroy and then create replacement

Terraform will perform the following actions:

  # aws_db_instance.main will be updated in-place
  ~ resource "aws_db_instance" "main" {
      ~ instance_class = "db.t3.small" -> "db.t3.large"
    }

  # aws_db_instance.replica will be created
  + resource "aws_db_instance" "replica" {}

  # module.net.aws_subnet.private["eu west 1a"] must be replaced
-/+ resource "aws_subnet" "private" {}

  # terraform_data.old[0] will be destroyed
  # (because index [0] is out of range for count)
  - resource "terraform_data" "old" {}

  # data.aws_iam_policy.x will be read during apply

Plan: 2 to add, 1 to change, 2 to destroy.
`
	require.Equal(t, []infra.PlanChange{
		{Address: "aws_db_instance.main", Action: infra.PlanActionUpdate},
		{Address: "aws_db_instance.replica", Action: infra.PlanActionCreate},
		{Address: `module.net.aws_subnet.private["eu west 1a"]`, Action: infra.PlanActionReplace},
		{Address: "terraform_data.old[0]", Action: infra.PlanActionDestroy},
		{Address: "data.aws_iam_policy.x", Action: infra.PlanActionRead},
	}, infra.PlanChanges(out))
	require.Empty(t, infra.PlanChanges("No changes. Your infrastructure matches the configuration.\n"))
}
