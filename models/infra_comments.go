package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// PlanComment is the one plan-summary comment Gantry keeps on a pull
// request: GitHub's id of it and the body last written.
type PlanComment struct {
	bun.BaseModel `bun:"table:pr_plan_comments,alias:pc"`

	Repository string `bun:",pk"`
	PRNumber   int    `bun:"pr_number,pk"`
	CommentID  int64
	Body       string
	UpdatedAt  time.Time `bun:",nullzero,notnull,default:current_timestamp"`
}

// PlanCommentOf is the pull request's plan comment, nil when none was
// written yet.
func PlanCommentOf(ctx context.Context, db bun.IDB, repo string, number int) (*PlanComment, error) {
	c := new(PlanComment)
	err := notFound(db.NewSelect().Model(c).Where("repository = ?", repo).Where("pr_number = ?", number).Scan(ctx))
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return c, nil
}

// SavePlanComment records the comment written on a pull request (a new one
// replaces the one that was deleted on GitHub).
func SavePlanComment(ctx context.Context, db bun.IDB, c *PlanComment) error {
	_, err := db.NewInsert().Model(c).On("CONFLICT (repository, pr_number) DO UPDATE").
		Set("comment_id = EXCLUDED.comment_id, body = EXCLUDED.body, updated_at = now()").Exec(ctx)
	return err
}

// CommentPlan is a pull request plan as its comment shows it: without the
// output, with terraform's verdict line ("Plan: 1 to add, 0 to change, 0 to
// destroy.") cut out of it by the database.
type CommentPlan struct {
	ID         int64  `bun:"id"`
	Path       string `bun:"path"`
	Status     string `bun:"status"`
	HasChanges *bool  `bun:"has_changes"`
	Error      string `bun:"error"`
	Verdict    string `bun:"verdict"`
}

// PlansForComment lists the plans of a pull request at headSHA by unit,
// each with its verdict line.
func PlansForComment(ctx context.Context, db bun.IDB, repo string, number int, headSHA string) ([]CommentPlan, error) {
	var out []CommentPlan
	err := db.NewSelect().Model((*PRPlan)(nil)).
		Column("pp.id", "pp.path", "pp.status", "pp.has_changes", "pp.error").
		ColumnExpr(`coalesce(substring(pp.output from 'Plan: [0-9]+ to add, [0-9]+ to change, [0-9]+ to destroy'), '') AS verdict`).
		Where("pp.repository = ?", repo).Where("pp.pr_number = ?", number).Where("pp.head_sha = ?", headSHA).
		Where("pp.status <> ?", PlanCanceled).
		Order("pp.path").Scan(ctx, &out)
	return out, err
}

// planCommentLock is the advisory-lock namespace of plan comments.
const planCommentLock = 0x70636d74 // "pcmt"

// LockPlanComment holds, until tx ends, the right to write a pull request's
// plan comment: two jobs never both create one.
func LockPlanComment(ctx context.Context, tx bun.IDB, repo string, number int) error {
	_, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(?::int, hashtext(?))", planCommentLock, fmt.Sprintf("%s#%d", repo, number))
	return err
}
