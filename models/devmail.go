package models

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// DevMail is an email as the dev mailbox kept it.
type DevMail struct {
	bun.BaseModel `bun:"table:dev_mails,alias:dm"`

	ID         int64    `bun:",pk,autoincrement"`
	Recipients []string `bun:",array"`
	Subject    string
	Body       string
	HTML       string    `bun:"html"`
	SentAt     time.Time `bun:",nullzero,notnull,default:current_timestamp"`
}

// InsertDevMail keeps an email for the dev mailbox.
func InsertDevMail(ctx context.Context, db bun.IDB, m *DevMail) error {
	_, err := db.NewInsert().Model(m).Returning("id, sent_at").Exec(ctx)
	return err
}

// ListDevMails returns the newest emails first, at most limit: those sent
// to recipient (compared without case), or every one when recipient is "".
func ListDevMails(ctx context.Context, db bun.IDB, recipient string, limit int) ([]DevMail, error) {
	var mails []DevMail
	q := db.NewSelect().Model(&mails).OrderExpr("id DESC").Limit(int64(limit))
	err := devMailTo(q, recipient).Scan(ctx)
	return mails, err
}

// DevMailByID finds one kept email sent to recipient (any when "").
func DevMailByID(ctx context.Context, db bun.IDB, id int64, recipient string) (*DevMail, error) {
	m := new(DevMail)
	err := devMailTo(db.NewSelect().Model(m).Where("id = ?", id), recipient).Scan(ctx)
	return m, notFound(err)
}

func devMailTo(q *bun.SelectQuery, recipient string) *bun.SelectQuery {
	if recipient == "" {
		return q
	}
	return q.Where("EXISTS (SELECT 1 FROM unnest(recipients) AS r WHERE lower(r) = lower(?))", recipient)
}
