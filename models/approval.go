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

	ID int64 `bun:",pk,autoincrement"`
	// Subject is what is decided, "<kind>:<id>" (execution:run-7-…).
	Subject string
	// Kind is the subject's kind, computed by the database from Subject.
	Kind          string   `bun:",scanonly"`
	Voters        []string `bun:",array"`
	MinApprovals  int
	MinRejections int
	State         string
	CreatedAt     time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	DecidedAt     *time.Time
	// ClosedAt is when votes closed without a decision: the subject ended
	// some other way.
	ClosedAt *time.Time
}

// Vote is one vote as cast; a voter's latest counts.
type Vote struct {
	bun.BaseModel `bun:"table:votes,alias:v"`

	ID         int64 `bun:",pk,autoincrement"`
	ApprovalID int64
	Voter      string
	Decision   string
	Comment    string
	Via        string
	CreatedAt  time.Time `bun:",nullzero,notnull,default:current_timestamp"`
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
	_, err := tx.NewInsert().Model(a).Returning("id, kind, state, created_at").Exec(ctx)
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

// ApprovalBySubject finds the approval of a subject ("<kind>:<id>").
func ApprovalBySubject(ctx context.Context, db bun.IDB, subject string) (*Approval, error) {
	a := new(Approval)
	err := db.NewSelect().Model(a).Where("subject = ?", subject).Scan(ctx)
	return a, notFound(err)
}

// CloseApproval closes the votes of a subject's pending approval, if it has
// one, when the subject ends without a decision.
func CloseApproval(ctx context.Context, tx bun.IDB, subject string) error {
	_, err := tx.NewUpdate().Model((*Approval)(nil)).Set("closed_at = now()").
		Where("subject = ?", subject).Where("state = ?", ApprovalPending).Where("closed_at IS NULL").Exec(ctx)
	if err != nil {
		return fmt.Errorf("closing the votes on %s: %w", subject, err)
	}
	return nil
}

// SupersedeApproval sets a subject's approval aside when its subject is
// voted on again (an interrupted apply planned again): the approval keeps
// its votes under the subject "<subject>~<approval id>", closed, and the
// subject is free for a new approval.
func SupersedeApproval(ctx context.Context, tx bun.IDB, subject string) error {
	_, err := tx.NewUpdate().Model((*Approval)(nil)).
		Set("subject = subject || '~' || id::text").Set("closed_at = coalesce(closed_at, now())").
		Where("subject = ?", subject).Exec(ctx)
	if err != nil {
		return fmt.Errorf("setting the votes on %s aside: %w", subject, err)
	}
	return nil
}

// ApprovalFilter picks the approvals that wait for one voter.
type ApprovalFilter struct {
	Voter  string // lower-case email address
	Kind   string // "" for every kind
	Limit  int    // at most this many (0: all)
	Offset int
}

// ApprovalsWaitingFor lists the pending approvals with open votes that name
// f.Voter, the longest waiting first, and how many there are in all.
func ApprovalsWaitingFor(ctx context.Context, db bun.IDB, f ApprovalFilter) ([]Approval, int, error) {
	var as []Approval
	q := db.NewSelect().Model(&as).
		Where("ap.state = ?", ApprovalPending).Where("ap.closed_at IS NULL").
		Where("ap.voters @> ARRAY[?]::text[]", f.Voter). // the GIN index's operator
		OrderExpr("ap.created_at, ap.id")
	if f.Kind != "" {
		q = q.Where("ap.kind = ?", f.Kind)
	}
	if f.Limit > 0 {
		q = q.Limit(int64(f.Limit)).Offset(int64(f.Offset))
	}
	n, err := q.ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("listing approvals waiting for %s: %w", f.Voter, err)
	}
	return as, int(n), nil
}

// ApprovalsByIDs finds approvals by id, in any order.
func ApprovalsByIDs(ctx context.Context, db bun.IDB, ids []int64) ([]Approval, error) {
	var as []Approval
	if len(ids) == 0 {
		return as, nil
	}
	err := db.NewSelect().Model(&as).Where("id IN (?)", bun.In(ids)).Scan(ctx)
	return as, err
}

// VotesOfApprovals lists the votes of several approvals in the order they
// were cast.
func VotesOfApprovals(ctx context.Context, db bun.IDB, ids []int64) ([]Vote, error) {
	var votes []Vote
	if len(ids) == 0 {
		return votes, nil
	}
	err := db.NewSelect().Model(&votes).Where("approval_id IN (?)", bun.In(ids)).OrderExpr("id").Scan(ctx)
	return votes, err
}

// InsertVoteAt records a vote with the time it carries, for example data
// (gantry dev --demo). Live votes go through InsertVote, whose time the
// database's clock decides under the approval's lock.
func InsertVoteAt(ctx context.Context, db bun.IDB, v *Vote) error {
	_, err := db.NewInsert().Model(v).Returning("id, created_at").Exec(ctx)
	return err
}
