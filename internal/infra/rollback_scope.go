package infra

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gantryhq/gantry/internal/tfstate"
	"github.com/gantryhq/gantry/models"
)

// rollbackScope checks that a rollback's saved destroy plan deletes only
// the addresses it targets. `plan -destroy -target=X` also destroys
// everything that depends on X (a resource of an old provider that reads
// one of the new provider's), and the voters are asked to approve the
// destroy of the targets only: such a plan is refused, naming what else
// it would destroy, and the rollback is held for an operator. It reads
// `show -json PLANFILE` in a checkout of the rollback's commit, through
// the unit's init and plan role.
func (s *Service) rollbackScope(ctx context.Context, ws string, x *models.Execution, repo *models.Repository, commit, planFile string) error {
	shown, err := s.showAt(ctx, ws, "scope", x, x.PlanRoleARN, repo, commit, planFile)
	var deletes []string
	if err == nil {
		deletes, err = tfstate.PlannedDeletes(shown)
	}
	if err != nil {
		return fmt.Errorf("the destroy plan could not be checked against the rollback's addresses: %w", err)
	}
	targeted := targets(x.PlanCommand)
	var beyond []string
	for _, a := range deletes {
		if !slices.Contains(targeted, a) {
			beyond = append(beyond, a)
		}
	}
	if len(beyond) > 0 {
		return fmt.Errorf("the destroy plan would also destroy %s, which depend on the resources of new providers: "+
			"Gantry destroys only the recorded addresses. Remove the dependency or destroy them by hand, then retry or mark resolved",
			strings.Join(beyond, ", "))
	}
	return nil
}
