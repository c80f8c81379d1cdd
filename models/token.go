package models

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// APIToken is a bearer token for the API. The secret is shown once at
// creation; only its SHA-256 is stored, with a short prefix to recognise it.
type APIToken struct {
	bun.BaseModel `bun:"table:api_tokens"`

	ID         int64 `bun:",pk,autoincrement"`
	UserID     int64 `bun:",notnull"`
	Name       string
	Prefix     string
	TokenHash  []byte    `json:"-"` // never shown, whatever encodes the row
	Scopes     []string  `bun:",array"`
	CreatedAt  time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	ExpiresAt  *time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time

	User *User `bun:"rel:belongs-to,join:user_id=id"`
}

// Active reports whether the token still authenticates.
func (t *APIToken) Active(now time.Time) bool {
	return t.RevokedAt == nil && (t.ExpiresAt == nil || t.ExpiresAt.After(now))
}

// HasScope reports whether the token was granted scope.
func (t *APIToken) HasScope(scope string) bool {
	for _, s := range t.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// CreateToken stores t.
func CreateToken(ctx context.Context, db bun.IDB, t *APIToken) error {
	if _, err := db.NewInsert().Model(t).Returning("*").Exec(ctx); err != nil {
		return fmt.Errorf("creating token: %w", uniqueViolation(err))
	}
	return nil
}

// ActiveToken finds an unrevoked, unexpired token of an enabled user and
// records its use, at most once a minute per token.
func ActiveToken(ctx context.Context, db bun.IDB, tokenHash []byte) (*APIToken, error) {
	t := new(APIToken)
	err := db.NewSelect().Model(t).Relation("User").
		Where("api_token.token_hash = ?", tokenHash).
		Where("api_token.revoked_at IS NULL").
		Where("api_token.expires_at IS NULL OR api_token.expires_at > now()").
		Where("? IS NULL", bun.Ident("user.disabled_at")).
		Scan(ctx)
	if err != nil {
		return nil, notFound(err)
	}
	if t.LastUsedAt == nil || time.Since(*t.LastUsedAt) > time.Minute {
		_, err = db.NewUpdate().Model((*APIToken)(nil)).Set("last_used_at = now()").
			Where("id = ?", t.ID).Exec(ctx)
	}
	return t, err
}

// TokenByID finds any token, revoked or not.
func TokenByID(ctx context.Context, db bun.IDB, id int64) (*APIToken, error) {
	t := new(APIToken)
	if err := db.NewSelect().Model(t).Relation("User").Where("api_token.id = ?", id).Scan(ctx); err != nil {
		return nil, notFound(err)
	}
	return t, nil
}

// ListTokens lists tokens, newest first; userID 0 lists everyone's.
func ListTokens(ctx context.Context, db bun.IDB, userID int64) ([]APIToken, error) {
	var tokens []APIToken
	q := db.NewSelect().Model(&tokens).Relation("User").Order("api_token.id DESC")
	if userID != 0 {
		q = q.Where("api_token.user_id = ?", userID)
	}
	err := q.Scan(ctx)
	return tokens, err
}

// RevokeToken revokes a token; revoking twice is harmless.
func RevokeToken(ctx context.Context, db bun.IDB, id int64) error {
	res, err := db.NewUpdate().Model((*APIToken)(nil)).
		Set("revoked_at = coalesce(revoked_at, now())").
		Where("id = ?", id).Exec(ctx)
	return affectedOne(res, err)
}
