// Package access is people and their credentials: creating users, signing
// in and out, API tokens, roles. Every change it makes is a deployment-log
// entry written in the same transaction, so the audit trail cannot miss one.
// The web handlers and the admin CLI both call it.
package access

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/models"
)

// Log events written by this package.
const (
	EventUserCreated     = "user-created"
	EventUserRoleChanged = "user-role-changed"
	EventUserDisabled    = "user-disabled"
	EventUserEnabled     = "user-enabled"
	EventLoggedIn        = "user-logged-in"
	EventLoginFailed     = "user-login-failed"
	EventLoggedOut       = "user-logged-out"
	EventTokenCreated    = "token-created"
	EventTokenRevoked    = "token-revoked"
)

// Actor names who did something, as the log records it.
func Actor(u *models.User) string { return "user:" + u.Email }

// UserTarget is the log target for a user.
func UserTarget(id int64) string { return "user:" + strconv.FormatInt(id, 10) }

// NewUser is the input for CreateUser.
type NewUser struct {
	Email    string
	Name     string
	Role     string
	Password string
}

// CreateUser validates and stores a user.
func CreateUser(ctx context.Context, db bun.IDB, in NewUser, actor string) (*models.User, error) {
	bad := apperr.Fields{}
	addr, err := mail.ParseAddress(strings.TrimSpace(in.Email))
	if err != nil || addr.Name != "" {
		bad.Add("email", "must be an email address such as ada@example.com")
	}
	role, err := models.ParseRole(in.Role)
	if err != nil {
		bad.Add("role", err.Error())
	}
	hash, err := auth.HashPassword(in.Password)
	if err != nil {
		bad.Add("password", err.Error())
	}
	if err := bad.Err(); err != nil {
		return nil, err
	}
	name := strings.TrimSpace(in.Name)
	if name == "" {
		name, _, _ = strings.Cut(addr.Address, "@")
	}
	u := &models.User{Email: addr.Address, Name: name, Role: role, PasswordHash: hash}
	err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := models.CreateUser(ctx, tx, u); err != nil {
			return err
		}
		return models.AppendLog(ctx, tx, &models.LogEntry{
			TargetID: UserTarget(u.ID), Event: EventUserCreated, Actor: actor,
			Detail: map[string]any{"email": u.Email, "role": string(u.Role)},
		})
	})
	if errors.Is(err, models.ErrConflict) {
		return nil, apperr.Field("email", "a user with this email already exists")
	}
	if err != nil {
		return nil, err
	}
	return u, nil
}

// SetRole changes a user's role and logs from what to what.
func SetRole(ctx context.Context, db bun.IDB, userID int64, roleName, actor string) error {
	role, err := models.ParseRole(roleName)
	if err != nil {
		return apperr.Field("role", err.Error())
	}
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		u, err := models.UserByID(ctx, tx, userID)
		if err != nil {
			return notFound(err, "user", userID)
		}
		if u.Role == role {
			return nil
		}
		if err := models.SetUserRole(ctx, tx, userID, role); err != nil {
			return err
		}
		return models.AppendLog(ctx, tx, &models.LogEntry{
			TargetID: UserTarget(userID), Event: EventUserRoleChanged, Actor: actor,
			Detail: map[string]any{"email": u.Email, "from": string(u.Role), "to": string(role)},
		})
	})
}

// SetDisabled disables (ending every session) or re-enables a user.
func SetDisabled(ctx context.Context, db bun.IDB, userID int64, disabled bool, actor string) error {
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		u, err := models.UserByID(ctx, tx, userID)
		if err != nil {
			return notFound(err, "user", userID)
		}
		event := EventUserEnabled
		if disabled {
			event = EventUserDisabled
			err = models.DisableUser(ctx, tx, userID)
		} else {
			err = models.EnableUser(ctx, tx, userID)
		}
		if err != nil {
			return err
		}
		return models.AppendLog(ctx, tx, &models.LogEntry{
			TargetID: UserTarget(userID), Event: event, Actor: actor,
			Detail: map[string]any{"email": u.Email},
		})
	})
}

// LoginLimits bounds failed sign-ins per email and per address.
type LoginLimits struct {
	Attempts int
	Window   time.Duration
}

// Client is where a request came from.
type Client struct {
	IP        string
	UserAgent string
}

// Login checks a password and opens a session, returning the cookie secret.
// Every outcome is logged. Failures say nothing about which part was wrong,
// and are refused outright once either the email or the address has failed
// too often within the window: the count comes from the log itself, so it
// holds across every gantry process.
func Login(ctx context.Context, db bun.IDB, email, password string, from Client, ttl time.Duration, limits LoginLimits) (string, *models.User, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	loginTarget := "login:" + email
	byEmail, err := models.CountRecentEvents(ctx, db, EventLoginFailed, loginTarget, "", limits.Window)
	if err != nil {
		return "", nil, err
	}
	byIP, err := models.CountRecentEvents(ctx, db, EventLoginFailed, "", from.IP, limits.Window)
	if err != nil {
		return "", nil, err
	}
	if byEmail >= limits.Attempts || byIP >= limits.Attempts {
		return "", nil, apperr.New(apperr.RateLimited, "Too many failed sign-ins. Try again in %s.", humanDuration(limits.Window))
	}

	u, err := models.UserByEmail(ctx, db, email)
	switch {
	case errors.Is(err, models.ErrNotFound):
		auth.CheckNoUser(password)
	case err != nil:
		return "", nil, err
	}
	if u == nil || u.Disabled() || !auth.CheckPassword(u.PasswordHash, password) {
		logErr := models.AppendLog(ctx, db, &models.LogEntry{
			TargetID: loginTarget, Event: EventLoginFailed, Actor: "anonymous",
			Detail: map[string]any{"ip": from.IP, "user_agent": from.UserAgent},
		})
		if logErr != nil {
			return "", nil, logErr
		}
		return "", nil, apperr.New(apperr.Unauthorized, "Email or password is incorrect.")
	}

	secret, hash, err := auth.NewSecret("")
	if err != nil {
		return "", nil, err
	}
	err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		s := &models.Session{TokenHash: hash, UserID: u.ID, ExpiresAt: time.Now().Add(ttl), IP: from.IP, UserAgent: truncate(from.UserAgent, 512)}
		if err := models.CreateSession(ctx, tx, s); err != nil {
			return fmt.Errorf("creating session: %w", err)
		}
		return models.AppendLog(ctx, tx, &models.LogEntry{
			TargetID: UserTarget(u.ID), Event: EventLoggedIn, Actor: Actor(u),
			Detail: map[string]any{"ip": from.IP},
		})
	})
	if err != nil {
		return "", nil, err
	}
	return secret, u, nil
}

// Logout ends the session whose cookie secret is given.
func Logout(ctx context.Context, db bun.IDB, secret string, u *models.User) error {
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := models.DeleteSession(ctx, tx, auth.HashSecret(secret)); err != nil {
			return err
		}
		return models.AppendLog(ctx, tx, &models.LogEntry{TargetID: UserTarget(u.ID), Event: EventLoggedOut, Actor: Actor(u)})
	})
}

// SessionUser returns the signed-in user for a session cookie secret.
func SessionUser(ctx context.Context, db bun.IDB, secret string) (*models.User, error) {
	s, err := models.ActiveSession(ctx, db, auth.HashSecret(secret))
	if err != nil {
		return nil, err
	}
	return s.User, nil
}

// BearerToken returns the active token for a presented secret.
func BearerToken(ctx context.Context, db bun.IDB, secret string) (*models.APIToken, error) {
	if !strings.HasPrefix(secret, auth.TokenPrefix) {
		return nil, models.ErrNotFound
	}
	return models.ActiveToken(ctx, db, auth.HashSecret(secret))
}

// NewToken is the input for CreateToken.
type NewToken struct {
	Name      string
	Scopes    []string
	ExpiresIn time.Duration // 0: never expires
}

// MaxTokenNameLength bounds token names.
const MaxTokenNameLength = 100

// CreateToken mints a token for owner and returns its secret, which is never
// stored and cannot be shown again.
func CreateToken(ctx context.Context, db bun.IDB, owner *models.User, in NewToken, actor string) (string, *models.APIToken, error) {
	bad := apperr.Fields{}
	name := strings.TrimSpace(in.Name)
	if name == "" {
		bad.Add("name", "is required: say what will use the token, e.g. \"ci-deploy-bot\"")
	} else if len(name) > MaxTokenNameLength {
		bad.Add("name", fmt.Sprintf("must be at most %d characters", MaxTokenNameLength))
	}
	scopes, err := auth.ParseScopes(in.Scopes)
	if err != nil {
		bad.Add("scopes", err.Error())
	}
	for _, s := range scopes {
		if s == auth.ScopeAdmin && owner.Role != models.RoleAdmin {
			bad.Add("scopes", "only admins can hold the admin scope")
		}
	}
	if in.ExpiresIn < 0 {
		bad.Add("expires_in", "must not be negative")
	}
	if err := bad.Err(); err != nil {
		return "", nil, err
	}
	secret, hash, err := auth.NewSecret(auth.TokenPrefix)
	if err != nil {
		return "", nil, err
	}
	t := &models.APIToken{UserID: owner.ID, Name: name, Prefix: secret[:len(auth.TokenPrefix)+6], TokenHash: hash, Scopes: scopes}
	if in.ExpiresIn > 0 {
		at := time.Now().Add(in.ExpiresIn)
		t.ExpiresAt = &at
	}
	err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := models.CreateToken(ctx, tx, t); err != nil {
			return err
		}
		return models.AppendLog(ctx, tx, &models.LogEntry{
			TargetID: TokenTarget(t.ID), Event: EventTokenCreated, Actor: actor,
			Detail: map[string]any{"name": t.Name, "scopes": t.Scopes, "owner": owner.Email},
		})
	})
	if err != nil {
		return "", nil, err
	}
	t.User = owner
	return secret, t, nil
}

// RevokeToken revokes a token. ownerID limits it to that user's tokens (0:
// anyone's, for admins and the CLI); another user's token reads as not
// found. Revoking a revoked token is harmless and logs nothing.
func RevokeToken(ctx context.Context, db bun.IDB, id, ownerID int64, actor string) error {
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		t, err := models.TokenByID(ctx, tx, id)
		if err != nil {
			return notFound(err, "token", id)
		}
		if ownerID != 0 && t.UserID != ownerID {
			return notFound(models.ErrNotFound, "token", id)
		}
		if t.RevokedAt != nil {
			return nil
		}
		if err := models.RevokeToken(ctx, tx, id); err != nil {
			return err
		}
		return models.AppendLog(ctx, tx, &models.LogEntry{
			TargetID: TokenTarget(id), Event: EventTokenRevoked, Actor: actor,
			Detail: map[string]any{"name": t.Name, "owner": t.User.Email},
		})
	})
}

// TokenTarget is the log target for a token.
func TokenTarget(id int64) string { return "token:" + strconv.FormatInt(id, 10) }

func notFound(err error, what string, id int64) error {
	if errors.Is(err, models.ErrNotFound) {
		return apperr.New(apperr.NotFound, "No %s with id %d.", what, id)
	}
	return err
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// EventPasswordChanged is logged when a password is replaced.
const EventPasswordChanged = "user-password-changed"

// SetPassword replaces a user's password and ends their sessions, so a reset
// also throws out whoever had the old one.
func SetPassword(ctx context.Context, db bun.IDB, userID int64, password, actor string) error {
	hash, err := auth.HashPassword(password)
	if err != nil {
		return apperr.Field("password", err.Error())
	}
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := models.SetUserPassword(ctx, tx, userID, hash); err != nil {
			return notFound(err, "user", userID)
		}
		if err := models.DeleteUserSessions(ctx, tx, userID); err != nil {
			return err
		}
		return models.AppendLog(ctx, tx, &models.LogEntry{TargetID: UserTarget(userID), Event: EventPasswordChanged, Actor: actor})
	})
}

// humanDuration says a window the way people do: "15 minutes", "1 hour".
func humanDuration(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		if d == time.Hour {
			return "1 hour"
		}
		return fmt.Sprintf("%d hours", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		if d == time.Minute {
			return "1 minute"
		}
		return fmt.Sprintf("%d minutes", d/time.Minute)
	}
	return d.String()
}
