package web

import (
	"time"

	"github.com/gantryhq/gantry/models"
)

// The JSON of people and credentials (/api/v1/me, /users, /tokens),
// declared for the API and mapped from the rows, so that a change to a
// table is not a change to the API.

// UserJSON is a person as the API (and gantry admin's -o json) shows them,
// never with the password hash.
type UserJSON struct {
	ID         int64      `json:"id"`
	Email      string     `json:"email"`
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

// UserJSONOf maps a row to the API.
func UserJSONOf(u *models.User) UserJSON {
	return UserJSON{ID: u.ID, Email: u.Email, Name: u.Name, Role: string(u.Role), DisabledAt: u.DisabledAt,
		CreatedAt: u.CreatedAt, UpdatedAt: u.UpdatedAt}
}

// TokenJSON is an API token as the API (and gantry admin's -o json) shows
// it, never with its hash; User is its owner when the listing loaded them.
type TokenJSON struct {
	ID         int64      `json:"id"`
	UserID     int64      `json:"user_id"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	User       *UserJSON  `json:"user,omitempty"`
}

// TokenJSONOf maps a row to the API.
func TokenJSONOf(t *models.APIToken) TokenJSON {
	out := TokenJSON{ID: t.ID, UserID: t.UserID, Name: t.Name, Prefix: t.Prefix, Scopes: t.Scopes, CreatedAt: t.CreatedAt,
		ExpiresAt: t.ExpiresAt, LastUsedAt: t.LastUsedAt, RevokedAt: t.RevokedAt}
	if t.User != nil {
		u := UserJSONOf(t.User)
		out.User = &u
	}
	return out
}

// createdTokenJSON is the one answer that carries a token's secret.
type createdTokenJSON struct {
	Token  TokenJSON `json:"token"`
	Secret string    `json:"secret"`
}

// meJSON is who the caller is, and with which token.
type meJSON struct {
	User  UserJSON     `json:"user"`
	Token *meTokenJSON `json:"token,omitempty"`
}

type meTokenJSON struct {
	ID     int64    `json:"id"`
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
}

// createTokenRequest is the API's body for a new token.
type createTokenRequest struct {
	Name      string   `json:"name"`
	Scopes    []string `json:"scopes"`
	ExpiresIn string   `json:"expires_in"` // Go duration, e.g. "720h"; empty: never
}

type createUserRequest struct {
	Email    string `json:"email"`
	Name     string `json:"name"`
	Role     string `json:"role"`
	Password string `json:"password"`
}

type updateUserRequest struct {
	Role     *string `json:"role"`
	Disabled *bool   `json:"disabled"`
}
