// Package devmail is the mailbox of `gantry dev`: a mail.Sender that keeps
// every message in the database, where the /dev/mailbox page shows it, and
// hands it on to the configured sender, if any. A developer can then follow
// an emailed voting link without running a mail server.
package devmail

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/mail"
	"github.com/gantryhq/gantry/models"
)

// Mailbox keeps messages and passes them on to Next (nil: nowhere).
type Mailbox struct {
	DB   bun.IDB
	Next mail.Sender
}

var _ mail.Sender = (*Mailbox)(nil)

// Send keeps m, then sends it through Next. A message Next refuses is kept
// anyway: the mailbox shows what Gantry tried to send.
func (b *Mailbox) Send(ctx context.Context, m mail.Message) error {
	if len(m.To) == 0 {
		return fmt.Errorf("mail: message has no recipients")
	}
	if err := models.InsertDevMail(ctx, b.DB, &models.DevMail{Recipients: m.To, Subject: m.Subject, Body: m.Text, HTML: m.HTML}); err != nil {
		return fmt.Errorf("keeping a message in the dev mailbox: %w", err)
	}
	if b.Next == nil {
		return nil
	}
	return b.Next.Send(ctx, m)
}
