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
	"slices"
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

// LoginLimits bounds sign-ins: failed (or unfinished) attempts per account
// and per address within Window, and how many passwords this process hashes
// at once.
type LoginLimits struct {
	// Attempts per account, from any address: a guesser cannot spread one
	// account's guesses over many addresses.
	Attempts int
	// AddressAttempts per address, over every account: higher than Attempts,
	// so one person's typos do not lock out everyone behind the same address
	// (an office, a proxy, everyone under gantry dev), while one address
	// trying many accounts is still stopped. 0: DefaultAddressFactor × Attempts.
	AddressAttempts int
	Window          time.Duration
	// Gate bounds concurrent password hashing; nil: unbounded.
	Gate *HashGate
}

// DefaultAddressFactor is how many times an account's limit an address gets
// when LoginLimits.AddressAttempts is not set.
const DefaultAddressFactor = 10

// Client is where a request came from.
type Client struct {
	IP        string
	UserAgent string
}

// Refusal is a sign-in refused before its password was checked, and when to
// try again (the web layer's Retry-After). It is an *apperr.Error to
// everything else.
type Refusal struct {
	Err        *apperr.Error
	RetryAfter time.Duration
}

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

// Login checks a password and opens a session, returning the cookie secret.
// Every outcome is logged. Failures say nothing about which part was wrong.
//
// Before the password is hashed, a slot of limits.Gate is taken (none free:
// 503 at once, nothing counted) and the attempt is reserved in the database
// (models.ReserveLoginAttempt), which refuses it once the account or the
// address has too many failed or unfinished attempts within the window.
// Reserving first makes concurrent attempts, in any process, count each
// other; an attempt whose request times out or whose process dies stays
// counted.
func Login(ctx context.Context, db bun.IDB, email, password string, from Client, ttl time.Duration, limits LoginLimits) (string, *models.User, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	if !limits.Gate.tryAcquire() {
		return "", nil, &Refusal{
			Err:        apperr.New(apperr.Unavailable, "Too many sign-ins are being checked right now. Try again in a second."),
			RetryAfter: time.Second,
		}
	}
	held := true
	release := func() {
		if held {
			held = false
			limits.Gate.release()
		}
	}
	defer release()

	throttle := models.LoginThrottle{Account: limits.Attempts, Address: limits.AddressAttempts, Window: limits.Window}
	if throttle.Address == 0 {
		throttle.Address = DefaultAddressFactor * limits.Attempts
	}
	attempt, block, err := models.ReserveLoginAttempt(ctx, db, email, from.IP, throttle)
	if err != nil {
		return "", nil, err
	}
	if block != nil {
		return "", nil, blocked(block, time.Now())
	}

	u, err := models.UserByEmail(ctx, db, email)
	switch {
	case errors.Is(err, models.ErrNotFound):
		u = nil
	case err != nil:
		return "", nil, err // the attempt stays pending: it counts as a failure
	}
	hash := ""
	if u != nil {
		hash = u.PasswordHash
	}
	// Unknown and disabled users are hashed too, so timing tells nothing.
	ok := limits.Gate.check(hash, password) && u != nil && !u.Disabled()
	release()

	// The outcome is recorded even if the request gave up while hashing.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	loginTarget := "login:" + email
	if !ok {
		err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			if err := models.FinishLoginAttempt(ctx, tx, attempt, models.LoginFailed); err != nil {
				return err
			}
			return models.AppendLog(ctx, tx, &models.LogEntry{
				TargetID: loginTarget, Event: EventLoginFailed, Actor: "anonymous",
				Detail: map[string]any{"ip": from.IP, "user_agent": from.UserAgent},
			})
		})
		if err != nil {
			return "", nil, err
		}
		return "", nil, apperr.New(apperr.Unauthorized, "Email or password is incorrect.")
	}

	secret, sessionHash, err := auth.NewSecret("")
	if err != nil {
		return "", nil, err
	}
	err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := models.FinishLoginAttempt(ctx, tx, attempt, models.LoginOK); err != nil {
			return err
		}
		s := &models.Session{TokenHash: sessionHash, UserID: u.ID, ExpiresAt: time.Now().Add(ttl), IP: from.IP, UserAgent: truncate(from.UserAgent, 512)}
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

// blocked says what is blocked and until when, in UTC as a clock shows it,
// rounded up to the minute so that trying at that minute works.
func blocked(b *models.LoginBlock, now time.Time) *Refusal {
	until := b.Until.UTC()
	shown := until.Truncate(time.Minute)
	if shown.Before(until) {
		shown = shown.Add(time.Minute)
	}
	at := shown.Format("15:04") + " UTC"
	if y, m, d := shown.Date(); y != now.UTC().Year() || m != now.UTC().Month() || d != now.UTC().Day() {
		at = shown.Format("2006-01-02 15:04") + " UTC"
	}
	what := "for this account: it is blocked"
	if b.What == models.BlockedAddress {
		what = "from your address: it is blocked for every account"
	}
	wait := until.Sub(now)
	if wait < time.Second {
		wait = time.Second
	}
	return &Refusal{
		Err:        apperr.New(apperr.RateLimited, "Too many failed sign-ins %s until %s.", what, at),
		RetryAfter: wait,
	}
}

// HashGate bounds how many passwords one process hashes at once. Argon2 takes
// about 19 MiB per hash, so without a bound the number of concurrent sign-ins
// decides the process's memory; with it, extra sign-ins are turned away at
// once instead of queueing.
type HashGate struct {
	slots chan struct{}
	// verify checks password against hash; an empty hash (no such user) is
	// hashed all the same and fails.
	verify func(hash, password string) bool
}

// DefaultLoginConcurrency is the gate's size when none is given.
const DefaultLoginConcurrency = 4

// NewHashGate lets n passwords be hashed at once (n < 1: the default).
func NewHashGate(n int) *HashGate {
	return newHashGate(n, verifyPassword)
}

func newHashGate(n int, verify func(hash, password string) bool) *HashGate {
	if n < 1 {
		n = DefaultLoginConcurrency
	}
	return &HashGate{slots: make(chan struct{}, n), verify: verify}
}

func verifyPassword(hash, password string) bool {
	if hash == "" {
		auth.CheckNoUser(password)
		return false
	}
	return auth.CheckPassword(hash, password)
}

func (g *HashGate) tryAcquire() bool {
	if g == nil {
		return true
	}
	select {
	case g.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (g *HashGate) release() {
	if g != nil {
		<-g.slots
	}
}

func (g *HashGate) check(hash, password string) bool {
	if g == nil {
		return verifyPassword(hash, password)
	}
	return g.verify(hash, password)
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
	// By is the token making the request, whose scopes bound the new
	// token's: a token cannot mint one that may do more than itself. nil
	// for a session or the CLI, which the owner's role alone bounds.
	By *models.APIToken
}

// MaxTokenNameLength bounds token names.
const MaxTokenNameLength = 100

// CreateToken mints a token for owner and returns its secret, which is never
// stored and cannot be shown again. Its scopes are bounded by the owner's
// role (only admins hold admin) and, when a token asks (in.By), by that
// token's own scopes.
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
		// An agent's token lives on every machine of a cluster: it may do
		// nothing but be an agent.
		if s == auth.ScopeAgent && len(scopes) > 1 {
			bad.Add("scopes", "the agent scope stands alone: make a separate token for anything else")
		}
		if s == auth.ScopeAgent && !owner.Role.Includes(models.RoleOperator) {
			bad.Add("scopes", "only operators and admins can hold the agent scope")
		}
	}
	if in.ExpiresIn < 0 {
		bad.Add("expires_in", "must not be negative")
	}
	if err := bad.Err(); err != nil {
		return "", nil, err
	}
	if in.By != nil {
		var lacking []string
		for _, s := range scopes {
			if !slices.Contains(in.By.Scopes, s) {
				lacking = append(lacking, s)
			}
		}
		if len(lacking) > 0 {
			return "", nil, apperr.New(apperr.Forbidden,
				"This token cannot create a token with scopes it does not hold itself: it lacks %s.", strings.Join(lacking, ", "))
		}
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
