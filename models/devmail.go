package models

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// DevMail is an email as the dev mailbox kept it.
type DevMail struct {
	bun.BaseModel `bun:"table:dev_mails,alias:dm"`

	ID         int64     `bun:",pk,autoincrement" json:"id"`
	Recipients []string  `bun:",array" json:"recipients"`
	Subject    string    `json:"subject"`
	Body       string    `json:"body"`
	HTML       string    `bun:"html" json:"html,omitempty"`
	SentAt     time.Time `bun:",nullzero,notnull,default:current_timestamp" json:"sent_at"`
}

// InsertDevMail keeps an email for the dev mailbox.
func InsertDevMail(ctx context.Context, db bun.IDB, m *DevMail) error {
	_, err := db.NewInsert().Model(m).Returning("id, sent_at").Exec(ctx)
	return err
}

// ListDevMails returns the newest emails first, at most limit.
func ListDevMails(ctx context.Context, db bun.IDB, limit int) ([]DevMail, error) {
	var mails []DevMail
	err := db.NewSelect().Model(&mails).OrderExpr("id DESC").Limit(int64(limit)).Scan(ctx)
	return mails, err
}

// DevMailByID finds one kept email.
func DevMailByID(ctx context.Context, db bun.IDB, id int64) (*DevMail, error) {
	m := new(DevMail)
	err := db.NewSelect().Model(m).Where("id = ?", id).Scan(ctx)
	return m, notFound(err)
}
