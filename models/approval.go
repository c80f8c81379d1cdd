package models

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Approval is a decision a set of voters takes by vote: the one approval
// mechanism of the product (infrastructure executions, pipeline gates).
type Approval struct {
	bun.BaseModel `bun:"table:approvals,alias:ap"`

	ID            int64      `bun:",pk,autoincrement" json:"id"`
	Subject       string     `json:"subject"`
	Voters        []string   `bun:",array" json:"voters"`
	MinApprovals  int        `json:"min_approvals"`
	MinRejections int        `json:"min_rejections"`
	State         string     `json:"state"`
	CreatedAt     time.Time  `bun:",nullzero,notnull,default:current_timestamp" json:"created_at"`
	DecidedAt     *time.Time `json:"decided_at,omitempty"`
}

// Vote is one vote as cast; a voter's latest counts.
type Vote struct {
	bun.BaseModel `bun:"table:votes,alias:v"`

	ID         int64     `bun:",pk,autoincrement" json:"id"`
	ApprovalID int64     `json:"-"`
	Voter      string    `json:"voter"`
	Decision   string    `json:"decision"`
	Comment    string    `json:"comment,omitempty"`
	Via        string    `json:"via"`
	CreatedAt  time.Time `bun:",nullzero,notnull,default:current_timestamp" json:"created_at"`
}

// Approval states, as the tally decides them.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalRejected = "rejected"
)

// InsertApproval records a pending approval.
func InsertApproval(ctx context.Context, tx bun.IDB, a *Approval) error {
	if a.State == "" {
		a.State = ApprovalPending
	}
	_, err := tx.NewInsert().Model(a).Returning("id, state, created_at").Exec(ctx)
	if err != nil {
		return fmt.Errorf("recording the approval of %s: %w", a.Subject, uniqueViolation(err))
	}
	return nil
}

// LockApproval finds an approval and locks it, so votes are tallied one at
// a time.
func LockApproval(ctx context.Context, tx bun.IDB, id int64) (*Approval, error) {
	a := new(Approval)
	err := tx.NewSelect().Model(a).Where("id = ?", id).For("UPDATE").Scan(ctx)
	return a, notFound(err)
}

// ApprovalByID finds an approval.
func ApprovalByID(ctx context.Context, db bun.IDB, id int64) (*Approval, error) {
	a := new(Approval)
	err := db.NewSelect().Model(a).Where("id = ?", id).Scan(ctx)
	return a, notFound(err)
}

// InsertVote records a vote, stamped with the database's clock at the
// moment of insert: with the approval locked, that orders votes as they
// were recorded, which the tally replays.
func InsertVote(ctx context.Context, tx bun.IDB, v *Vote) error {
	_, err := tx.NewInsert().Model(v).Value("created_at", "clock_timestamp()").Returning("id, created_at").Exec(ctx)
	return err
}

// VotesOf lists an approval's votes in the order they were cast.
func VotesOf(ctx context.Context, db bun.IDB, approvalID int64) ([]Vote, error) {
	var votes []Vote
	err := db.NewSelect().Model(&votes).Where("approval_id = ?", approvalID).OrderExpr("id").Scan(ctx)
	return votes, err
}

// DecideApproval records the tally's final state.
func DecideApproval(ctx context.Context, tx bun.IDB, id int64, state string) error {
	_, err := tx.NewUpdate().Model((*Approval)(nil)).Set("state = ?, decided_at = now()", state).
		Where("id = ?", id).Exec(ctx)
	return err
}
