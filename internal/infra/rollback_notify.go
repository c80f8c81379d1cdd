package infra

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gantryhq/gantry/internal/mail"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/models"
)

// rollbackOperators are who is mailed when a rollback fails: the
// rollback's voters (the people who answer for the unit's account and
// voted on the destroy) and the repository's drift recipients (the
// platform team's address for "the infrastructure needs a human").
func rollbackOperators(x *models.Execution, repo *models.Repository) []string {
	var to []string
	for _, a := range append(slices.Clone(x.Voters), repo.DriftNotify...) {
		if a = strings.ToLower(strings.TrimSpace(a)); a != "" && !slices.Contains(to, a) {
			to = append(to, a)
		}
	}
	return to
}

// NotifyRollbackHeld mails the operators of a rollback that failed (the
// rollback execution's row id): what is left in the state, why it failed,
// and where to retry it or mark it resolved. A rollback that an operator
// already retried or resolved is not mailed about: nothing waits anymore.
func (s *Service) NotifyRollbackHeld(ctx context.Context, id int64) error {
	db := s.Queue.DB()
	x, err := models.ExecutionByID(ctx, db, id)
	if err != nil {
		return err
	}
	rb, err := models.RollbackByExecution(ctx, db, id)
	if err != nil || x.Status != models.ExecFailed || rb.Resolved() {
		return err
	}
	run, err := models.RunByID(ctx, db, x.RunID)
	if err != nil {
		return err
	}
	repo, err := models.RepositoryByName(ctx, db, run.Repository)
	if err != nil {
		return err
	}
	to := rollbackOperators(x, repo)
	if s.Mail == nil || len(to) == 0 {
		s.Logger.WarnContext(ctx, "failed rollback mail not sent: no mail configured or no one to mail", "repository", repo.Name, "execution", x.ExecutionID)
		return nil
	}
	return s.Mail.Send(ctx, mail.Message{To: to, Subject: rollbackHeldSubject(run, x), Text: s.rollbackHeldText(run, x, rb)})
}

func rollbackHeldSubject(run *models.Run, x *models.Execution) string {
	return fmt.Sprintf("[Gantry] Rollback of %s (%s) failed for %s#%d: an operator must act", x.CfgPath, x.AccountName, run.Repository, run.PRNumber)
}

// rollbackHeldText is the failed rollback mail's body.
func (s *Service) rollbackHeldText(run *models.Run, x *models.Execution, rb *models.Rollback) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The rollback of %s failed. Gantry will not try it again on its own.\n\n", x.CfgPath)
	fmt.Fprintf(&b, "Repository:  %s (pull request #%d: %s)\n", run.Repository, run.PRNumber, run.PRTitle)
	fmt.Fprintf(&b, "Unit:        %s\nAccount:     %s\nRollback:    %s\nFrom commit: %s\n", x.CfgPath, x.AccountName, x.ExecutionID, shortCommit(rb.Commit))
	fmt.Fprintf(&b, "Why:         %s\n\n", x.Error)
	switch {
	case rb.Remaining == nil:
		fmt.Fprintf(&b, "What is left is unknown: %s\n", rb.RemainingError)
	case len(rb.Remaining) == 0:
		fmt.Fprintf(&b, "Nothing it was to destroy is left in the state.\n")
	default:
		fmt.Fprintf(&b, "Left in the state (%s):\n", plural(len(rb.Remaining), "resource"))
		for _, a := range rb.Remaining {
			fmt.Fprintf(&b, "  %s\n", a)
		}
	}
	fmt.Fprintf(&b, "\nRun %d stays running and holds the merge lock of %s until an operator chooses on the rollback's page:\n%s%s\n\n",
		run.ID, run.Repository, s.BaseURL, pageurl.Execution(x.ExecutionID))
	fmt.Fprintf(&b, "%s\n\n(or POST /api/v1/infra/executions/%s/rollback-retry or /rollback-resolved, with a reason)\n", RollbackHeldExplanation, x.ExecutionID)
	return b.String()
}
