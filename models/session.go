package models

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// Session is the server half of a browser session. Only the SHA-256 of the
// cookie's token is stored.
type Session struct {
	bun.BaseModel `bun:"table:sessions"`

	TokenHash  []byte    `bun:",pk"`
	UserID     int64     `bun:",notnull"`
	CreatedAt  time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	ExpiresAt  time.Time `bun:",notnull"`
	LastSeenAt time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	IP         string
	UserAgent  string

	User *User `bun:"rel:belongs-to,join:user_id=id"`
}

// CreateSession stores a new session.
func CreateSession(ctx context.Context, db bun.IDB, s *Session) error {
	_, err := db.NewInsert().Model(s).Exec(ctx)
	return err
}

// ActiveSession finds an unexpired session of an enabled user, and moves its
// last-seen time at most once a minute so that page views do not all write.
func ActiveSession(ctx context.Context, db bun.IDB, tokenHash []byte) (*Session, error) {
	s := new(Session)
	err := db.NewSelect().Model(s).Relation("User").
		Where("session.token_hash = ?", tokenHash).
		Where("session.expires_at > now()").
		Where("? IS NULL", bun.Ident("user.disabled_at")).
		Scan(ctx)
	if err != nil {
		return nil, notFound(err)
	}
	if time.Since(s.LastSeenAt) > time.Minute {
		_, err = db.NewUpdate().Model((*Session)(nil)).Set("last_seen_at = now()").
			Where("token_hash = ?", tokenHash).Exec(ctx)
	}
	return s, err
}

// DeleteSession ends one session (logout).
func DeleteSession(ctx context.Context, db bun.IDB, tokenHash []byte) error {
	_, err := db.NewDelete().Model((*Session)(nil)).Where("token_hash = ?", tokenHash).Exec(ctx)
	return err
}

// DeleteExpiredSessions removes sessions past their expiry and says how many.
func DeleteExpiredSessions(ctx context.Context, db bun.IDB) (int64, error) {
	res, err := db.NewDelete().Model((*Session)(nil)).Where("expires_at <= now()").Exec(ctx)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// DeleteUserSessions signs a user out everywhere.
func DeleteUserSessions(ctx context.Context, db bun.IDB, userID int64) error {
	_, err := db.NewDelete().Model((*Session)(nil)).Where("user_id = ?", userID).Exec(ctx)
	return err
}
