package models

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Role orders what a person may do; each role includes the ones below it.
type Role string

const (
	RoleViewer   Role = "viewer"   // reads every page
	RoleApprover Role = "approver" // also votes on approvals
	RoleOperator Role = "operator" // also operates: retries, cleanups, config apply
	RoleAdmin    Role = "admin"    // also manages users, tokens and jobs
)

// Roles lists the roles from least to most powerful.
var Roles = []Role{RoleViewer, RoleApprover, RoleOperator, RoleAdmin}

// ParseRole validates a role name.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("unknown role %q: use viewer, approver, operator or admin", s)
}

// Includes reports whether r may do what other may.
func (r Role) Includes(other Role) bool { return r.rank() >= other.rank() }

func (r Role) rank() int {
	for i, x := range Roles {
		if x == r {
			return i
		}
	}
	return -1
}

// User is a person who signs in.
type User struct {
	bun.BaseModel `bun:"table:users"`

	ID           int64 `bun:",pk,autoincrement"`
	Email        string
	Name         string
	Role         Role
	PasswordHash string `json:"-"` // never shown, whatever encodes the row
	DisabledAt   *time.Time
	CreatedAt    time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	UpdatedAt    time.Time `bun:",nullzero,notnull,default:current_timestamp"`
}

// Disabled reports whether the user may no longer sign in.
func (u *User) Disabled() bool { return u.DisabledAt != nil }

// CreateUser inserts u; ErrConflict when the email is taken.
func CreateUser(ctx context.Context, db bun.IDB, u *User) error {
	u.Email = strings.TrimSpace(u.Email)
	if _, err := db.NewInsert().Model(u).Returning("*").Exec(ctx); err != nil {
		return fmt.Errorf("creating user %s: %w", u.Email, uniqueViolation(err))
	}
	return nil
}

// UserByEmail finds a user by email, ignoring case.
func UserByEmail(ctx context.Context, db bun.IDB, email string) (*User, error) {
	u := new(User)
	err := db.NewSelect().Model(u).Where("lower(email) = lower(?)", strings.TrimSpace(email)).Scan(ctx)
	if err != nil {
		return nil, notFound(err)
	}
	return u, nil
}

// UserByID finds a user by id.
func UserByID(ctx context.Context, db bun.IDB, id int64) (*User, error) {
	u := new(User)
	if err := db.NewSelect().Model(u).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, notFound(err)
	}
	return u, nil
}

// ListUsers returns every user, by email.
func ListUsers(ctx context.Context, db bun.IDB) ([]User, error) {
	var users []User
	err := db.NewSelect().Model(&users).Order("email").Scan(ctx)
	return users, err
}

// CountUsers tells whether a first admin must be created.
func CountUsers(ctx context.Context, db bun.IDB) (int64, error) {
	return db.NewSelect().Model((*User)(nil)).Count(ctx)
}

// SetUserRole changes a user's role.
func SetUserRole(ctx context.Context, db bun.IDB, id int64, role Role) error {
	res, err := db.NewUpdate().Model((*User)(nil)).
		Set("role = ?", role).Set("updated_at = now()").
		Where("id = ?", id).Exec(ctx)
	return affectedOne(res, err)
}

// SetUserPassword replaces a user's password hash.
func SetUserPassword(ctx context.Context, db bun.IDB, id int64, hash string) error {
	res, err := db.NewUpdate().Model((*User)(nil)).
		Set("password_hash = ?", hash).Set("updated_at = now()").
		Where("id = ?", id).Exec(ctx)
	return affectedOne(res, err)
}

// DisableUser stops a user from signing in and ends their sessions; their
// tokens stop working too because token lookups check the owner.
func DisableUser(ctx context.Context, db bun.IDB, id int64) error {
	res, err := db.NewUpdate().Model((*User)(nil)).
		Set("disabled_at = coalesce(disabled_at, now())").Set("updated_at = now()").
		Where("id = ?", id).Exec(ctx)
	if err := affectedOne(res, err); err != nil {
		return err
	}
	return DeleteUserSessions(ctx, db, id)
}

// EnableUser lets a disabled user sign in again.
func EnableUser(ctx context.Context, db bun.IDB, id int64) error {
	res, err := db.NewUpdate().Model((*User)(nil)).
		Set("disabled_at = NULL").Set("updated_at = now()").
		Where("id = ?", id).Exec(ctx)
	return affectedOne(res, err)
}
