package access_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/testdb"
	"github.com/gantryhq/gantry/models"
)

// password is long enough for auth.MinPasswordLength.
const password = "correct horse battery staple"

// relaxed limits, for tests that are not about throttling.
var relaxed = access.LoginLimits{Attempts: 1000, Window: time.Hour}

var (
	home  = access.Client{IP: "192.0.2.10", UserAgent: "test-browser/1.0"}
	other = access.Client{IP: "198.51.100.20", UserAgent: "test-browser/1.0"}
)

// userOpts are the factory's options; zero fields get defaults.
type userOpts struct {
	Email, Name, Role, Password string
}

// createUser makes a user through access.CreateUser, failing the test on error.
func createUser(t *testing.T, db bun.IDB, o userOpts) *models.User {
	t.Helper()
	if o.Email == "" {
		o.Email = "ada@example.com"
	}
	if o.Role == "" {
		o.Role = string(models.RoleViewer)
	}
	if o.Password == "" {
		o.Password = password
	}
	u, err := access.CreateUser(t.Context(), db, access.NewUser{Email: o.Email, Name: o.Name, Role: o.Role, Password: o.Password}, "test")
	require.NoError(t, err)
	return u
}

// createToken mints a token for owner, failing the test on error.
func createToken(t *testing.T, db bun.IDB, owner *models.User, in access.NewToken) (string, *models.APIToken) {
	t.Helper()
	if in.Name == "" {
		in.Name = "ci-deploy-bot"
	}
	if in.Scopes == nil {
		in.Scopes = []string{auth.ScopeRead}
	}
	secret, tok, err := access.CreateToken(t.Context(), db, owner, in, access.Actor(owner))
	require.NoError(t, err)
	return secret, tok
}

// logged lists the deployment-log entries for target and event, oldest first.
func logged(t *testing.T, db bun.IDB, target, event string) []models.LogEntry {
	t.Helper()
	entries, err := models.ListLog(t.Context(), db, models.LogFilter{Target: target, Event: event, Limit: models.MaxLogPage})
	require.NoError(t, err)
	for i, j := 0, len(entries)-1; i < j; i, j = i+1, j-1 {
		entries[i], entries[j] = entries[j], entries[i]
	}
	return entries
}

// countEvent counts every entry of one event, whatever its target.
func countEvent(t *testing.T, db bun.IDB, event string) int {
	t.Helper()
	entries, err := models.ListLog(t.Context(), db, models.LogFilter{Event: event, Limit: models.MaxLogPage})
	require.NoError(t, err)
	return len(entries)
}

// requireAppErr requires err to be an *apperr.Error with code, and returns it.
func requireAppErr(t *testing.T, err error, code string) *apperr.Error {
	t.Helper()
	var e *apperr.Error
	require.ErrorAs(t, err, &e, "want an *apperr.Error with code %q", code)
	require.Equal(t, code, e.Code, "error: %v", err)
	return e
}

// requireIncorrect requires the one answer every failed sign-in gets.
func requireIncorrect(t *testing.T, err error) {
	t.Helper()
	e := requireAppErr(t, err, apperr.Unauthorized)
	require.Equal(t, "Email or password is incorrect.", e.Message)
	require.Empty(t, e.Fields, "a failed sign-in does not say which part was wrong")
}

func login(t *testing.T, db bun.IDB, email, pw string, from access.Client, limits access.LoginLimits) (string, *models.User, error) {
	t.Helper()
	return access.Login(t.Context(), db, email, pw, from, time.Hour, limits)
}

func TestCreateUser(t *testing.T) {
	t.Parallel()

	t.Run("stores the user with a hashed password and logs who created them", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u, err := access.CreateUser(t.Context(), db, access.NewUser{
			Email: "  ada@example.com ", Name: " Ada Lovelace ", Role: "operator", Password: password,
		}, "user:root@example.com")
		require.NoError(t, err)
		require.Positive(t, u.ID)
		require.Equal(t, "ada@example.com", u.Email, "the email is trimmed")
		require.Equal(t, "Ada Lovelace", u.Name, "the name is trimmed")
		require.Equal(t, models.RoleOperator, u.Role)
		require.False(t, u.Disabled())

		stored, err := models.UserByID(t.Context(), db, u.ID)
		require.NoError(t, err)
		require.Equal(t, u.Email, stored.Email)
		require.Equal(t, u.Name, stored.Name)
		require.Equal(t, models.RoleOperator, stored.Role)
		require.True(t, strings.HasPrefix(stored.PasswordHash, "$argon2id$"), "stored hash %q is argon2id", stored.PasswordHash)
		require.NotContains(t, stored.PasswordHash, password)
		require.True(t, auth.CheckPassword(stored.PasswordHash, password))
		require.False(t, auth.CheckPassword(stored.PasswordHash, password+"!"))

		entries := logged(t, db, access.UserTarget(u.ID), access.EventUserCreated)
		require.Len(t, entries, 1)
		require.Equal(t, "user:root@example.com", entries[0].Actor)
		require.Equal(t, map[string]any{"email": "ada@example.com", "role": "operator"}, entries[0].Detail)
	})

	t.Run("the name defaults to the email's local part", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{Email: "grace.hopper@example.com", Name: "   "})
		require.Equal(t, "grace.hopper", u.Name)
	})

	t.Run("bad input names the field and stores nothing", func(t *testing.T) {
		t.Parallel()
		const (
			badEmail    = "must be an email address such as ada@example.com"
			badPassword = "password must be at least 12 characters"
		)
		badRole := func(r string) string {
			return `unknown role "` + r + `": use viewer, approver, operator or admin`
		}
		tests := []struct {
			name string
			in   access.NewUser
			want map[string]string
		}{
			{"an email without @", access.NewUser{Email: "ada.example.com", Role: "viewer", Password: password}, map[string]string{"email": badEmail}},
			{"an empty email", access.NewUser{Email: "  ", Role: "viewer", Password: password}, map[string]string{"email": badEmail}},
			{"an email with a display name", access.NewUser{Email: "Ada <ada@example.com>", Role: "viewer", Password: password}, map[string]string{"email": badEmail}},
			{"an unknown role", access.NewUser{Email: "ada@example.com", Role: "root", Password: password}, map[string]string{"role": badRole("root")}},
			{"a role in capitals", access.NewUser{Email: "ada@example.com", Role: "Admin", Password: password}, map[string]string{"role": badRole("Admin")}},
			{"no role", access.NewUser{Email: "ada@example.com", Password: password}, map[string]string{"role": badRole("")}},
			{"a password one short", access.NewUser{Email: "ada@example.com", Role: "viewer", Password: password[:auth.MinPasswordLength-1]}, map[string]string{"password": badPassword}},
			{"everything at once", access.NewUser{Email: "nobody", Role: "god", Password: "short"}, map[string]string{"email": badEmail, "role": badRole("god"), "password": badPassword}},
		}
		db := testdb.New(t).Bun
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				u, err := access.CreateUser(t.Context(), db, tt.in, "test")
				require.Nil(t, u)
				e := requireAppErr(t, err, apperr.Invalid)
				require.Equal(t, tt.want, e.Fields)
			})
		}
		n, err := models.CountUsers(t.Context(), db)
		require.NoError(t, err)
		require.Zero(t, n, "no user was stored")
		require.Zero(t, countEvent(t, db, access.EventUserCreated), "nothing was logged")
	})

	t.Run("an email already taken, in any case, names the email", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		createUser(t, db, userOpts{Email: "ada@example.com"})
		for _, email := range []string{"ada@example.com", "ADA@Example.com"} {
			u, err := access.CreateUser(t.Context(), db, access.NewUser{Email: email, Role: "admin", Password: password}, "test")
			require.Nil(t, u)
			e := requireAppErr(t, err, apperr.Invalid)
			require.Equal(t, map[string]string{"email": "a user with this email already exists"}, e.Fields, "creating %s", email)
		}
		n, err := models.CountUsers(t.Context(), db)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		require.Equal(t, 1, countEvent(t, db, access.EventUserCreated), "the refused duplicates logged nothing")
	})
}

func TestRoleRanking(t *testing.T) {
	t.Parallel()
	require.Equal(t, []models.Role{models.RoleViewer, models.RoleApprover, models.RoleOperator, models.RoleAdmin}, models.Roles,
		"roles from least to most powerful")

	// includes[r] is every role r may act as.
	includes := map[models.Role][]models.Role{
		models.RoleViewer:   {models.RoleViewer},
		models.RoleApprover: {models.RoleViewer, models.RoleApprover},
		models.RoleOperator: {models.RoleViewer, models.RoleApprover, models.RoleOperator},
		models.RoleAdmin:    {models.RoleViewer, models.RoleApprover, models.RoleOperator, models.RoleAdmin},
	}
	for _, r := range models.Roles {
		for _, other := range models.Roles {
			want := false
			for _, inc := range includes[r] {
				want = want || inc == other
			}
			t.Run(string(r)+" includes "+string(other), func(t *testing.T) {
				require.Equal(t, want, r.Includes(other))
			})
		}
	}

	t.Run("a role that is not one includes none", func(t *testing.T) {
		for _, r := range []models.Role{"", "root", "Admin"} {
			for _, other := range models.Roles {
				require.False(t, r.Includes(other), "%q includes %q", r, other)
			}
		}
	})

	t.Run("role names parse exactly", func(t *testing.T) {
		for _, r := range models.Roles {
			got, err := models.ParseRole(string(r))
			require.NoError(t, err)
			require.Equal(t, r, got)
		}
		for _, s := range []string{"", "Admin", " admin", "superuser"} {
			_, err := models.ParseRole(s)
			require.Error(t, err, "%q", s)
		}
	})
}

func TestSetRole(t *testing.T) {
	t.Parallel()

	t.Run("changes the role and logs from what to what", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{Role: "viewer"})
		require.NoError(t, access.SetRole(t.Context(), db, u.ID, "admin", "user:root@example.com"))
		stored, err := models.UserByID(t.Context(), db, u.ID)
		require.NoError(t, err)
		require.Equal(t, models.RoleAdmin, stored.Role)
		entries := logged(t, db, access.UserTarget(u.ID), access.EventUserRoleChanged)
		require.Len(t, entries, 1)
		require.Equal(t, "user:root@example.com", entries[0].Actor)
		require.Equal(t, map[string]any{"email": u.Email, "from": "viewer", "to": "admin"}, entries[0].Detail)
	})

	t.Run("the role it already has logs nothing", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{Role: "approver"})
		require.NoError(t, access.SetRole(t.Context(), db, u.ID, "approver", "test"))
		require.Empty(t, logged(t, db, access.UserTarget(u.ID), access.EventUserRoleChanged))
	})

	t.Run("an unknown role names the field and changes nothing", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{Role: "viewer"})
		e := requireAppErr(t, access.SetRole(t.Context(), db, u.ID, "owner", "test"), apperr.Invalid)
		require.Equal(t, map[string]string{"role": `unknown role "owner": use viewer, approver, operator or admin`}, e.Fields)
		stored, err := models.UserByID(t.Context(), db, u.ID)
		require.NoError(t, err)
		require.Equal(t, models.RoleViewer, stored.Role)
	})

	t.Run("an unknown user is not found", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		e := requireAppErr(t, access.SetRole(t.Context(), db, 424242, "admin", "test"), apperr.NotFound)
		require.Equal(t, "No user with id 424242.", e.Message)
	})
}

func TestLogin(t *testing.T) {
	t.Parallel()

	t.Run("the right password opens a session, whatever the email's case and spaces", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{Email: "ada@example.com", Name: "Ada"})
		before := time.Now()
		secret, got, err := login(t, db, "  ADA@Example.COM ", password, home, relaxed)
		require.NoError(t, err)
		require.Equal(t, u.ID, got.ID)
		require.GreaterOrEqual(t, len(secret), 40, "the cookie secret is long and random")

		who, err := access.SessionUser(t.Context(), db, secret)
		require.NoError(t, err)
		require.Equal(t, u.ID, who.ID)
		require.Equal(t, "Ada", who.Name)

		// Only the secret's SHA-256 is stored.
		s, err := models.ActiveSession(t.Context(), db, auth.HashSecret(secret))
		require.NoError(t, err)
		sum := sha256.Sum256([]byte(secret))
		require.Equal(t, sum[:], s.TokenHash)
		require.Equal(t, home.IP, s.IP)
		require.Equal(t, home.UserAgent, s.UserAgent)
		require.WithinRange(t, s.ExpiresAt, before.Add(time.Hour-time.Second), time.Now().Add(time.Hour+time.Second), "the session lasts the ttl")
		_, err = models.ActiveSession(t.Context(), db, []byte(secret))
		require.ErrorIs(t, err, models.ErrNotFound, "the plain secret is not a key")

		entries := logged(t, db, access.UserTarget(u.ID), access.EventLoggedIn)
		require.Len(t, entries, 1)
		require.Equal(t, "user:ada@example.com", entries[0].Actor)
		require.Equal(t, map[string]any{"ip": home.IP}, entries[0].Detail)
		require.Zero(t, countEvent(t, db, access.EventLoginFailed))
	})

	t.Run("every failure gets the same answer and is logged against the email", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		createUser(t, db, userOpts{Email: "ada@example.com"})
		disabled := createUser(t, db, userOpts{Email: "bob@example.com"})
		require.NoError(t, access.SetDisabled(t.Context(), db, disabled.ID, true, "test"))

		tests := []struct {
			name, email, password, target string
		}{
			{"a wrong password", "ada@example.com", "not the password at all", "login:ada@example.com"},
			{"an empty password", "Ada@example.com", "", "login:ada@example.com"},
			{"an unknown email", "nobody@example.com", password, "login:nobody@example.com"},
			{"a disabled user with the right password", " BOB@example.com", password, "login:bob@example.com"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := len(logged(t, db, tt.target, access.EventLoginFailed))
				secret, u, err := login(t, db, tt.email, tt.password, home, relaxed)
				requireIncorrect(t, err)
				require.Empty(t, secret)
				require.Nil(t, u)
				entries := logged(t, db, tt.target, access.EventLoginFailed)
				require.Len(t, entries, before+1)
				last := entries[len(entries)-1]
				require.Equal(t, "anonymous", last.Actor)
				require.Equal(t, map[string]any{"ip": home.IP, "user_agent": home.UserAgent}, last.Detail)
			})
		}
		require.Zero(t, countEvent(t, db, access.EventLoggedIn))
	})

	t.Run("logout ends the session", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{})
		secret, _, err := login(t, db, u.Email, password, home, relaxed)
		require.NoError(t, err)
		kept, _, err := login(t, db, u.Email, password, other, relaxed)
		require.NoError(t, err)

		require.NoError(t, access.Logout(t.Context(), db, secret, u))
		_, err = access.SessionUser(t.Context(), db, secret)
		require.ErrorIs(t, err, models.ErrNotFound)
		who, err := access.SessionUser(t.Context(), db, kept)
		require.NoError(t, err, "only that session ends")
		require.Equal(t, u.ID, who.ID)
		require.Len(t, logged(t, db, access.UserTarget(u.ID), access.EventLoggedOut), 1)
	})

	t.Run("an expired session or an unknown secret signs nobody in", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{})
		expired, _, err := access.Login(t.Context(), db, u.Email, password, home, -time.Second, relaxed)
		require.NoError(t, err)
		for _, secret := range []string{expired, "", "not-a-session"} {
			_, err = access.SessionUser(t.Context(), db, secret)
			require.ErrorIs(t, err, models.ErrNotFound, "%q", secret)
		}
	})

	t.Run("a long user agent is cut to 512 bytes", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{})
		secret, _, err := login(t, db, u.Email, password, access.Client{IP: home.IP, UserAgent: strings.Repeat("a", 600)}, relaxed)
		require.NoError(t, err)
		s, err := models.ActiveSession(t.Context(), db, auth.HashSecret(secret))
		require.NoError(t, err)
		require.Equal(t, strings.Repeat("a", 512), s.UserAgent)
	})

	t.Run("a long user agent is cut whole characters at a time", func(t *testing.T) {
		t.Skip("BUG: access.truncate cuts the user agent at 512 bytes, which can split a UTF-8 character; " +
			"Bun's quoting then turns the broken byte into U+FFFD, so the session stores an agent ending in a " +
			"character the browser never sent, 514 bytes long. Cut at a rune boundary.")
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{})
		ua := strings.Repeat("a", 511) + "é" // é is two bytes: the 512th byte is its first half
		secret, _, err := login(t, db, u.Email, password, access.Client{IP: home.IP, UserAgent: ua}, relaxed)
		require.NoError(t, err)
		s, err := models.ActiveSession(t.Context(), db, auth.HashSecret(secret))
		require.NoError(t, err)
		require.LessOrEqual(t, len(s.UserAgent), 512)
		require.True(t, strings.HasPrefix(ua, s.UserAgent), "the stored agent (511 a and %q) is a prefix of the one sent", strings.TrimLeft(s.UserAgent, "a"))
	})
}

func TestLoginThrottling(t *testing.T) {
	t.Parallel()
	limits := access.LoginLimits{Attempts: 3, AddressAttempts: 6, Window: time.Hour}
	const wrong = "wrong password, wrong"

	// fail makes n failed sign-ins for email from a client.
	fail := func(t *testing.T, db bun.IDB, n int, email string, from access.Client) {
		t.Helper()
		for range n {
			_, _, err := login(t, db, email, wrong, from, limits)
			requireIncorrect(t, err)
		}
	}
	// requireBlocked requires a 429 naming what is blocked ("account" or
	// "address") and until when, and returns the refusal.
	requireBlocked := func(t *testing.T, err error, what string) *access.Refusal {
		t.Helper()
		e := requireAppErr(t, err, apperr.RateLimited)
		// The date is written only when the block ends on another day
		// (a test run shortly before midnight).
		want := map[string]string{
			"account": `^Too many failed sign-ins for this account: it is blocked until (\d{4}-\d\d-\d\d )?\d\d:\d\d UTC\.$`,
			"address": `^Too many failed sign-ins from your address: it is blocked for every account until (\d{4}-\d\d-\d\d )?\d\d:\d\d UTC\.$`,
		}[what]
		require.Regexp(t, want, e.Message)
		var r *access.Refusal
		require.ErrorAs(t, err, &r)
		require.Positive(t, r.RetryAfter)
		return r
	}

	t.Run("after the limit even the right password is refused", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{})
		fail(t, db, limits.Attempts-1, u.Email, home)
		_, _, err := login(t, db, u.Email, wrong, home, limits)
		requireIncorrect(t, err) // the limit-th failure is still checked
		secret, got, err := login(t, db, u.Email, password, home, limits)
		requireBlocked(t, err, "account")
		require.Empty(t, secret)
		require.Nil(t, got)
		require.Zero(t, countEvent(t, db, access.EventLoggedIn))
	})

	t.Run("refusals are not counted, so the lock ends with the window", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{})
		fail(t, db, limits.Attempts, u.Email, home)
		var first time.Duration
		for i := range 5 {
			r := requireBlocked(t, loginErr(t, db, u.Email, "still wrong, still wrong", home, limits), "account")
			if i == 0 {
				first = r.RetryAfter
			}
			require.LessOrEqual(t, r.RetryAfter, first, "the block does not grow with refusals")
		}
		require.Len(t, logged(t, db, "login:"+u.Email, access.EventLoginFailed), limits.Attempts,
			"only the checked failures are in the log")
		require.Equal(t, limits.Attempts, countAttempts(t, db, u.Email, ""), "only the checked failures are attempts")
	})

	t.Run("a success neither counts nor resets the count", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{})
		fail(t, db, limits.Attempts-1, u.Email, home)
		for range 3 {
			_, _, err := login(t, db, u.Email, password, home, limits)
			require.NoError(t, err, "successes below the limit are not counted")
		}
		fail(t, db, 1, u.Email, home)
		requireBlocked(t, loginErr(t, db, u.Email, password, home, limits), "account")
	})

	t.Run("failures for an account block it from every address, and only it", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		ada := createUser(t, db, userOpts{Email: "ada@example.com"})
		bob := createUser(t, db, userOpts{Email: "bob@example.com"})
		// The email is normalised before counting: case and spaces do not
		// make a fresh count.
		fail(t, db, 1, "ada@example.com", home)
		fail(t, db, 1, "ADA@example.com", access.Client{IP: "203.0.113.1"})
		fail(t, db, 1, " Ada@Example.com ", access.Client{IP: "203.0.113.2"})

		requireBlocked(t, loginErr(t, db, ada.Email, password, other, limits), "account")
		_, got, err := login(t, db, bob.Email, password, other, limits)
		require.NoError(t, err, "another account from that address is not blocked")
		require.Equal(t, bob.ID, got.ID)
	})

	t.Run("one account's failures do not block another from the same address until the address limit", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		ada := createUser(t, db, userOpts{Email: "ada@example.com"})
		grace := createUser(t, db, userOpts{Email: "grace@example.com"})
		fail(t, db, limits.Attempts, ada.Email, home)
		requireBlocked(t, loginErr(t, db, ada.Email, password, home, limits), "account")
		_, got, err := login(t, db, grace.Email, password, home, limits)
		require.NoError(t, err, "ada's typos do not lock grace out of the same office")
		require.Equal(t, grace.ID, got.ID)

		// An address trying many accounts is stopped at its own limit.
		fail(t, db, 1, "x@example.com", home)
		fail(t, db, 1, "y@example.com", home)
		fail(t, db, limits.AddressAttempts-limits.Attempts-2, "z@example.com", home)
		requireBlocked(t, loginErr(t, db, grace.Email, password, home, limits), "address")
		_, got, err = login(t, db, grace.Email, password, other, limits)
		require.NoError(t, err, "the same account from another address is not blocked")
		require.Equal(t, grace.ID, got.ID)
	})

	t.Run("failures older than the window do not count", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{})
		fail(t, db, limits.Attempts, u.Email, home)
		requireBlocked(t, loginErr(t, db, u.Email, password, home, limits), "account")
		short := limits
		short.Window = 50 * time.Millisecond
		require.Eventually(t, func() bool {
			_, _, err := login(t, db, u.Email, password, home, short)
			return err == nil
		}, time.Minute, 20*time.Millisecond, "the failures leave a 50ms window")
	})

	t.Run("the refusal says what is blocked and until when", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{})
		one := access.LoginLimits{Attempts: 1, AddressAttempts: 2, Window: 30 * time.Minute}
		_, _, err := login(t, db, u.Email, wrong, home, one)
		requireIncorrect(t, err)
		var failedAt time.Time
		require.NoError(t, db.NewSelect().Model((*models.LoginAttempt)(nil)).Column("created_at").Where("account = ?", u.Email).Scan(t.Context(), &failedAt))

		before := time.Now()
		r := requireBlocked(t, loginErr(t, db, u.Email, password, other, one), "account")
		until := failedAt.Add(one.Window).UTC()
		shown := until.Truncate(time.Minute)
		if shown.Before(until) {
			shown = shown.Add(time.Minute)
		}
		if shown.YearDay() == before.UTC().YearDay() {
			require.Equal(t, "Too many failed sign-ins for this account: it is blocked until "+shown.Format("15:04")+" UTC.", r.Err.Message,
				"the first failure leaves the window then")
		}
		require.InDelta(t, time.Until(until).Seconds(), r.RetryAfter.Seconds(), 5)

		// From the address's side: two other accounts' failures fill it.
		for _, email := range []string{"x@example.com", "y@example.com"} {
			_, _, err = login(t, db, email, wrong, other, one)
			requireIncorrect(t, err)
		}
		requireBlocked(t, loginErr(t, db, "grace@example.com", password, other, one), "address")

		// A block that ends on another day says which.
		long := access.LoginLimits{Attempts: 1, AddressAttempts: 100, Window: 48 * time.Hour}
		err = loginErr(t, db, u.Email, password, access.Client{IP: "203.0.113.50"}, long)
		e := requireAppErr(t, err, apperr.RateLimited)
		require.Regexp(t, `^Too many failed sign-ins for this account: it is blocked until \d{4}-\d\d-\d\d \d\d:\d\d UTC\.$`, e.Message)
	})

	t.Run("the count holds across processes", func(t *testing.T) {
		t.Parallel()
		// Two pools on one database, as two gantry processes have.
		url := testdb.NewURL(t)
		open := func() bun.IDB {
			db, err := models.Open(t.Context(), url, 4)
			require.NoError(t, err)
			t.Cleanup(db.Close)
			return db.Bun
		}
		first, second := open(), open()
		u := createUser(t, first, userOpts{})
		fail(t, first, 2, u.Email, home)
		fail(t, second, 1, u.Email, other)
		for name, db := range map[string]bun.IDB{"first": first, "second": second} {
			requireBlocked(t, loginErr(t, db, u.Email, password, access.Client{IP: "203.0.113.9"}, limits), "account")
			require.Len(t, logged(t, db, "login:"+u.Email, access.EventLoginFailed), 3, "the %s process sees every failure", name)
		}

		// Concurrently, half the attempts through each process: the
		// reservation is atomic across them too.
		limit := access.LoginLimits{Attempts: 5, AddressAttempts: 1000, Window: time.Hour}
		hashed := new(hashCounter)
		gate := access.NewHashGateWith(100, hashed.verify)
		limit.Gate = gate
		const n = 30
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			db := first
			if i%2 == 1 {
				db = second
			}
			wg.Go(func() {
				_, _, errs[i] = access.Login(context.Background(), db, "grace@example.com", wrong, home, time.Hour, limit)
			})
		}
		wg.Wait()
		incorrect, refused := tally(t, errs)
		require.Equal(t, limit.Attempts, incorrect, "passwords checked over both processes")
		require.Equal(t, n-limit.Attempts, refused)
		require.EqualValues(t, limit.Attempts, hashed.total.Load(), "hashes")
	})

	t.Run("concurrent wrong passwords are checked no more than the limit", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{})
		limit := access.LoginLimits{Attempts: 5, AddressAttempts: 1000, Window: time.Hour}
		hashed := new(hashCounter)
		limit.Gate = access.NewHashGateWith(100, hashed.verify) // wide enough to let all 40 through to the reservation
		const n = 40
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				_, _, errs[i] = access.Login(context.Background(), db, u.Email, wrong, home, time.Hour, limit)
			})
		}
		wg.Wait()
		incorrect, refused := tally(t, errs)
		require.Equal(t, limit.Attempts, incorrect, "answered 'incorrect'")
		require.Equal(t, n-limit.Attempts, refused, "answered 429")
		require.EqualValues(t, limit.Attempts, hashed.total.Load(), "passwords hashed")
		require.Len(t, logged(t, db, "login:"+u.Email, access.EventLoginFailed), limit.Attempts, "failures logged")
	})

	t.Run("an attempt left pending by a process that died counts as a failure", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{})
		// What a process killed while hashing leaves behind: reserved
		// attempts that never got an outcome.
		for range limits.Attempts {
			_, block, err := models.ReserveLoginAttempt(t.Context(), db, u.Email, other.IP,
				models.LoginThrottle{Account: limits.Attempts, Address: limits.AddressAttempts, Window: limits.Window})
			require.NoError(t, err)
			require.Nil(t, block)
		}
		requireBlocked(t, loginErr(t, db, u.Email, password, home, limits), "account")
		require.Zero(t, countEvent(t, db, access.EventLoggedIn))
	})

	t.Run("an attempt whose request gave up while hashing is still counted", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{})
		ctx, cancel := context.WithCancel(t.Context())
		gate := access.NewHashGateWith(1, func(hash, pw string) bool {
			cancel() // the client went away, or the request timed out, mid-hash
			return auth.CheckPassword(hash, pw)
		})
		_, _, err := access.Login(ctx, db, u.Email, wrong, home, time.Hour, access.LoginLimits{Attempts: 3, Window: time.Hour, Gate: gate})
		requireIncorrect(t, err)
		require.Equal(t, 1, countAttempts(t, db, u.Email, models.LoginFailed), "recorded as failed")
		require.Len(t, logged(t, db, "login:"+u.Email, access.EventLoginFailed), 1, "and logged")
	})
}

func TestLoginHashGate(t *testing.T) {
	t.Parallel()

	t.Run("no more passwords are hashed at once than the gate allows; the rest are refused at once, uncounted", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		createUser(t, db, userOpts{Email: "ada@example.com"})
		const size, n = 2, 30
		// Hashes wait until every other sign-in has been answered, so the
		// gate is full while they come.
		hashed := &hashCounter{hold: make(chan struct{})}
		var once sync.Once
		release := func() { once.Do(func() { close(hashed.hold) }) }
		t.Cleanup(release) // so that a failing test does not leave hashes waiting
		gate := access.NewHashGateWith(size, hashed.verify)
		limits := access.LoginLimits{Attempts: 1000, AddressAttempts: 1000, Window: time.Hour, Gate: gate}
		errs := make([]error, n)
		var answered atomic.Int32
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				email := "ada@example.com"
				if i%2 == 1 {
					email = "nobody" + strconv.Itoa(i) + "@example.com" // unknown users are hashed too
				}
				_, _, errs[i] = access.Login(context.Background(), db, email, "a wrong password", access.Client{IP: "192.0.2." + strconv.Itoa(i)}, time.Hour, limits)
				answered.Add(1)
			})
		}
		require.Eventually(t, func() bool { return answered.Load() == n-size }, time.Minute, 5*time.Millisecond,
			"all but the gate's sign-ins are answered while the gate is full")
		release()
		wg.Wait()

		require.LessOrEqual(t, hashed.peak.Load(), int32(size), "hashes at once")
		require.EqualValues(t, size, hashed.total.Load(), "hashes")
		busy := 0
		for _, err := range errs {
			if apperr.CodeOf(err) == apperr.Unauthorized {
				continue
			}
			e := requireAppErr(t, err, apperr.Unavailable)
			require.Equal(t, "Too many sign-ins are being checked right now. Try again in a second.", e.Message)
			var r *access.Refusal
			require.ErrorAs(t, err, &r)
			require.Equal(t, time.Second, r.RetryAfter)
			busy++
		}
		require.Equal(t, n-size, busy)
		require.Equal(t, size, countAttempts(t, db, "", ""), "turned-away sign-ins are not counted")

		// Once free, the gate lets sign-ins in again.
		_, _, err := access.Login(t.Context(), db, "ada@example.com", password, home, time.Hour, limits)
		require.NoError(t, err)
	})

	t.Run("a real gate bounds real hashing", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		createUser(t, db, userOpts{Email: "ada@example.com"})
		limits := access.LoginLimits{Attempts: 1000, AddressAttempts: 1000, Window: time.Hour, Gate: access.NewHashGate(1)}
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, _, errs[i] = access.Login(context.Background(), db, "ada@example.com", password, home, time.Hour, limits)
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				requireAppErr(t, err, apperr.Unavailable)
			}
		}
		_, _, err := access.Login(t.Context(), db, "ada@example.com", password, home, time.Hour, limits)
		require.NoError(t, err, "the gate is released after every sign-in")
	})
}

// hashCounter wraps the real password check, counting hashes and the most
// that ran at once.
type hashCounter struct {
	inFlight, peak, total atomic.Int32
	hold                  chan struct{} // when set, each hash waits for it to close
}

func (h *hashCounter) verify(hash, pw string) bool {
	now := h.inFlight.Add(1)
	defer h.inFlight.Add(-1)
	h.total.Add(1)
	for {
		p := h.peak.Load()
		if now <= p || h.peak.CompareAndSwap(p, now) {
			break
		}
	}
	if h.hold != nil {
		<-h.hold
	}
	if hash == "" {
		auth.CheckNoUser(pw)
		return false
	}
	return auth.CheckPassword(hash, pw)
}

// tally counts "incorrect" answers and 429 refusals, failing on anything else.
func tally(t *testing.T, errs []error) (incorrect, refused int) {
	t.Helper()
	for _, err := range errs {
		switch apperr.CodeOf(err) {
		case apperr.Unauthorized:
			incorrect++
		case apperr.RateLimited:
			refused++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	return incorrect, refused
}

// countAttempts counts sign-in attempts for an account ("": any) with an
// outcome ("": failed or pending).
func countAttempts(t *testing.T, db bun.IDB, account, outcome string) int {
	t.Helper()
	q := db.NewSelect().Model((*models.LoginAttempt)(nil))
	if account != "" {
		q = q.Where("account = ?", account)
	}
	if outcome != "" {
		q = q.Where("outcome = ?", outcome)
	} else if account != "" {
		q = q.Where("outcome <> ?", models.LoginOK)
	}
	n, err := q.Count(t.Context())
	require.NoError(t, err)
	return int(n)
}

func loginErr(t *testing.T, db bun.IDB, email, pw string, from access.Client, limits access.LoginLimits) error {
	t.Helper()
	_, _, err := login(t, db, email, pw, from, limits)
	return err
}

func TestCreateToken(t *testing.T) {
	t.Parallel()

	t.Run("the secret is returned once and only its hash is stored", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		owner := createUser(t, db, userOpts{Role: "operator"})
		secret, tok, err := access.CreateToken(t.Context(), db, owner, access.NewToken{Name: "ci-deploy-bot", Scopes: []string{"read", "write"}}, access.Actor(owner))
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(secret, "gnt_"), "secret %q carries the scanner prefix", secret)
		require.Len(t, secret, len("gnt_")+43, "gnt_ and 32 random bytes, base64url")
		require.Equal(t, secret[:10], tok.Prefix, "the prefix recognises the token without revealing it")
		require.Equal(t, owner.ID, tok.User.ID)

		stored, err := models.TokenByID(t.Context(), db, tok.ID)
		require.NoError(t, err)
		sum := sha256.Sum256([]byte(secret))
		require.Equal(t, sum[:], stored.TokenHash, "the SHA-256 of the secret is stored")
		require.Equal(t, secret[:10], stored.Prefix)
		require.Equal(t, "ci-deploy-bot", stored.Name)
		require.Equal(t, []string{"read", "write"}, stored.Scopes)
		require.Equal(t, owner.ID, stored.UserID)
		require.Nil(t, stored.ExpiresAt, "no expiry asked: it never expires")
		require.Nil(t, stored.RevokedAt)
		require.Nil(t, stored.LastUsedAt)

		hidden := secret[10:] // the part the prefix does not show
		raw, err := json.Marshal(stored)
		require.NoError(t, err)
		require.NotContains(t, string(raw), hidden, "the stored token, as the API shows it")
		require.NotContains(t, string(raw), "token_hash")
		require.NotContains(t, string(stored.TokenHash), hidden)

		entries := logged(t, db, access.TokenTarget(tok.ID), access.EventTokenCreated)
		require.Len(t, entries, 1)
		require.Equal(t, access.Actor(owner), entries[0].Actor)
		require.Equal(t, map[string]any{"name": "ci-deploy-bot", "scopes": []any{"read", "write"}, "owner": owner.Email}, entries[0].Detail)
		detail, err := json.Marshal(entries[0].Detail)
		require.NoError(t, err)
		require.NotContains(t, string(detail), hidden, "the log does not keep the secret")

		again, tok2 := createToken(t, db, owner, access.NewToken{Name: "ci-deploy-bot", Scopes: []string{"read", "write"}})
		require.NotEqual(t, secret, again, "every token gets a new secret")
		require.NotEqual(t, tok.TokenHash, tok2.TokenHash)
	})

	t.Run("scopes", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		admin := createUser(t, db, userOpts{Email: "admin@example.com", Role: "admin"})
		operator := createUser(t, db, userOpts{Email: "op@example.com", Role: "operator"})
		tests := []struct {
			name    string
			owner   *models.User
			scopes  []string
			want    []string // when it succeeds
			wantBad string   // the scopes field's complaint
		}{
			{"one scope", operator, []string{"read"}, []string{"read"}, ""},
			{"every scope but admin", operator, []string{"read", "write", "vote"}, []string{"read", "write", "vote"}, ""},
			{"trimmed and without repeats, in order", operator, []string{" write", "read ", "write"}, []string{"write", "read"}, ""},
			{"admin for an admin", admin, []string{"admin", "read"}, []string{"admin", "read"}, ""},
			{"none", operator, []string{}, nil, "at least one scope is required"},
			{"an unknown one", operator, []string{"read", "deploy"}, nil, `unknown scope "deploy": use read, write, vote, admin or agent`},
			{"in capitals", operator, []string{"READ"}, nil, `unknown scope "READ": use read, write, vote, admin or agent`},
			{"admin for an operator", operator, []string{"read", "admin"}, nil, "only admins can hold the admin scope"},
			{"agent alone for an operator", operator, []string{"agent"}, []string{"agent"}, ""},
			{"agent with another scope", operator, []string{"agent", "read"}, nil, "the agent scope stands alone: make a separate token for anything else"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				secret, tok, err := access.CreateToken(t.Context(), db, tt.owner, access.NewToken{Name: "bot", Scopes: tt.scopes}, "test")
				if tt.wantBad != "" {
					e := requireAppErr(t, err, apperr.Invalid)
					require.Equal(t, map[string]string{"scopes": tt.wantBad}, e.Fields)
					require.Empty(t, secret)
					require.Nil(t, tok)
					return
				}
				require.NoError(t, err)
				require.Equal(t, tt.want, tok.Scopes)
				got, err := access.BearerToken(t.Context(), db, secret)
				require.NoError(t, err)
				require.Equal(t, tt.want, got.Scopes, "as stored")
				for _, s := range []string{"read", "write", "vote", "admin"} {
					want := false
					for _, w := range tt.want {
						want = want || w == s
					}
					require.Equal(t, want, got.HasScope(s), "HasScope(%q)", s)
				}
			})
		}
	})

	t.Run("a token creates only tokens within its own scopes", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		admin := createUser(t, db, userOpts{Email: "admin@example.com", Role: "admin"})
		_, writeOnly := createToken(t, db, admin, access.NewToken{Name: "w", Scopes: []string{"write"}})
		_, readWrite := createToken(t, db, admin, access.NewToken{Name: "rw", Scopes: []string{"read", "write"}})
		tests := []struct {
			name    string
			by      *models.APIToken
			scopes  []string
			lacking string // "": allowed
		}{
			{"the issue's escalation", writeOnly, []string{"admin", "read", "write", "vote"}, "admin, read, vote"},
			{"one scope more", readWrite, []string{"read", "vote"}, "vote"},
			{"admin from a token without it, for an admin", readWrite, []string{"admin"}, "admin"},
			{"the same scopes", writeOnly, []string{"write"}, ""},
			{"fewer scopes", readWrite, []string{"read"}, ""},
			{"a session: any scope the role allows", nil, []string{"admin", "read", "write", "vote"}, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before, err := models.ListTokens(t.Context(), db, 0)
				require.NoError(t, err)
				secret, tok, err := access.CreateToken(t.Context(), db, admin, access.NewToken{Name: "minted", Scopes: tt.scopes, By: tt.by}, "test")
				if tt.lacking == "" {
					require.NoError(t, err)
					require.Equal(t, tt.scopes, tok.Scopes)
					return
				}
				e := requireAppErr(t, err, apperr.Forbidden)
				require.Equal(t, "This token cannot create a token with scopes it does not hold itself: it lacks "+tt.lacking+".", e.Message)
				require.Empty(t, secret)
				require.Nil(t, tok)
				after, err := models.ListTokens(t.Context(), db, 0)
				require.NoError(t, err)
				require.Len(t, after, len(before), "nothing stored")
			})
		}
	})

	t.Run("bad input names the field and stores nothing", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		owner := createUser(t, db, userOpts{})
		const nameRequired = `is required: say what will use the token, e.g. "ci-deploy-bot"`
		tests := []struct {
			name string
			in   access.NewToken
			want map[string]string
		}{
			{"no name", access.NewToken{Name: "", Scopes: []string{"read"}}, map[string]string{"name": nameRequired}},
			{"a blank name", access.NewToken{Name: " \t ", Scopes: []string{"read"}}, map[string]string{"name": nameRequired}},
			{"a name one too long", access.NewToken{Name: strings.Repeat("x", access.MaxTokenNameLength+1), Scopes: []string{"read"}}, map[string]string{"name": "must be at most 100 characters"}},
			{"a negative expiry", access.NewToken{Name: "bot", Scopes: []string{"read"}, ExpiresIn: -time.Second}, map[string]string{"expires_in": "must not be negative"}},
			{"everything at once", access.NewToken{Scopes: []string{}, ExpiresIn: -time.Hour}, map[string]string{"name": nameRequired, "scopes": "at least one scope is required", "expires_in": "must not be negative"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				secret, tok, err := access.CreateToken(t.Context(), db, owner, tt.in, "test")
				e := requireAppErr(t, err, apperr.Invalid)
				require.Equal(t, tt.want, e.Fields)
				require.Empty(t, secret)
				require.Nil(t, tok)
			})
		}
		tokens, err := models.ListTokens(t.Context(), db, 0)
		require.NoError(t, err)
		require.Empty(t, tokens)
		require.Zero(t, countEvent(t, db, access.EventTokenCreated))
	})

	t.Run("the name is trimmed and may be as long as the limit", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		owner := createUser(t, db, userOpts{})
		_, tok := createToken(t, db, owner, access.NewToken{Name: "  ci-deploy-bot  "})
		require.Equal(t, "ci-deploy-bot", tok.Name)
		long := strings.Repeat("x", access.MaxTokenNameLength)
		_, tok = createToken(t, db, owner, access.NewToken{Name: "  " + long + "  "})
		require.Equal(t, long, tok.Name)
	})

	t.Run("the name's limit counts characters, not bytes", func(t *testing.T) {
		t.Skip("BUG: CreateToken compares len(name), a byte count, with MaxTokenNameLength and says " +
			"\"must be at most 100 characters\": a 60-character name in a non-Latin script (120 bytes) is refused. " +
			"Count runes (utf8.RuneCountInString).")
		t.Parallel()
		db := testdb.New(t).Bun
		owner := createUser(t, db, userOpts{})
		name := strings.Repeat("é", 60)
		_, tok, err := access.CreateToken(t.Context(), db, owner, access.NewToken{Name: name, Scopes: []string{"read"}}, "test")
		require.NoError(t, err)
		require.Equal(t, name, tok.Name)
	})

	t.Run("an expiry is stored and ends the token", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		owner := createUser(t, db, userOpts{})
		before := time.Now()
		_, tok := createToken(t, db, owner, access.NewToken{ExpiresIn: 30 * 24 * time.Hour})
		require.NotNil(t, tok.ExpiresAt)
		require.WithinRange(t, *tok.ExpiresAt, before.Add(30*24*time.Hour), time.Now().Add(30*24*time.Hour))
		stored, err := models.TokenByID(t.Context(), db, tok.ID)
		require.NoError(t, err)
		require.NotNil(t, stored.ExpiresAt)
		require.WithinDuration(t, *tok.ExpiresAt, *stored.ExpiresAt, time.Millisecond)

		secret, short := createToken(t, db, owner, access.NewToken{ExpiresIn: 50 * time.Millisecond})
		require.NotNil(t, short.ExpiresAt)
		require.Eventually(t, func() bool {
			_, err := access.BearerToken(t.Context(), db, secret)
			return errors.Is(err, models.ErrNotFound)
		}, time.Minute, 20*time.Millisecond, "an expired token stops authenticating")
		require.False(t, short.Active(time.Now()))
	})
}

func TestBearerToken(t *testing.T) {
	t.Parallel()

	t.Run("the secret authenticates its token and its owner", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		owner := createUser(t, db, userOpts{Email: "ci@example.com", Role: "operator"})
		secret, tok := createToken(t, db, owner, access.NewToken{Scopes: []string{"read", "vote"}})
		got, err := access.BearerToken(t.Context(), db, secret)
		require.NoError(t, err)
		require.Equal(t, tok.ID, got.ID)
		require.Equal(t, []string{"read", "vote"}, got.Scopes)
		require.NotNil(t, got.User)
		require.Equal(t, "ci@example.com", got.User.Email)
		require.Equal(t, models.RoleOperator, got.User.Role)

		stored, err := models.TokenByID(t.Context(), db, tok.ID)
		require.NoError(t, err)
		require.NotNil(t, stored.LastUsedAt, "its use is recorded")
	})

	t.Run("anything but the exact secret is not found", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		owner := createUser(t, db, userOpts{})
		secret, tok := createToken(t, db, owner, access.NewToken{})
		flipped := []byte(secret)
		flipped[len(flipped)-1] ^= 1
		for name, presented := range map[string]string{
			"empty":                  "",
			"the prefix alone":       "gnt_",
			"the stored prefix":      tok.Prefix,
			"without its prefix":     strings.TrimPrefix(secret, "gnt_"),
			"with another prefix":    "tok_" + strings.TrimPrefix(secret, "gnt_"),
			"one bit changed":        string(flipped),
			"one character more":     secret + "A",
			"in capitals":            strings.ToUpper(secret),
			"with a space around it": " " + secret,
		} {
			t.Run(name, func(t *testing.T) {
				_, err := access.BearerToken(t.Context(), db, presented)
				require.ErrorIs(t, err, models.ErrNotFound)
			})
		}
		stored, err := models.TokenByID(t.Context(), db, tok.ID)
		require.NoError(t, err)
		require.Nil(t, stored.LastUsedAt, "no failed attempt counts as a use")
	})
}

func TestRevokeToken(t *testing.T) {
	t.Parallel()

	t.Run("a revoked token no longer authenticates", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		owner := createUser(t, db, userOpts{})
		secret, tok := createToken(t, db, owner, access.NewToken{Name: "ci"})
		kept, _ := createToken(t, db, owner, access.NewToken{Name: "other"})
		require.NoError(t, access.RevokeToken(t.Context(), db, tok.ID, owner.ID, access.Actor(owner)))

		_, err := access.BearerToken(t.Context(), db, secret)
		require.ErrorIs(t, err, models.ErrNotFound)
		_, err = access.BearerToken(t.Context(), db, kept)
		require.NoError(t, err, "the owner's other token still works")
		stored, err := models.TokenByID(t.Context(), db, tok.ID)
		require.NoError(t, err)
		require.NotNil(t, stored.RevokedAt, "the token is kept, marked revoked")

		entries := logged(t, db, access.TokenTarget(tok.ID), access.EventTokenRevoked)
		require.Len(t, entries, 1)
		require.Equal(t, access.Actor(owner), entries[0].Actor)
		require.Equal(t, map[string]any{"name": "ci", "owner": owner.Email}, entries[0].Detail)
	})

	t.Run("revoking twice is harmless and logs once", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		owner := createUser(t, db, userOpts{})
		_, tok := createToken(t, db, owner, access.NewToken{})
		require.NoError(t, access.RevokeToken(t.Context(), db, tok.ID, owner.ID, "test"))
		first, err := models.TokenByID(t.Context(), db, tok.ID)
		require.NoError(t, err)
		require.NoError(t, access.RevokeToken(t.Context(), db, tok.ID, 0, "test"))
		second, err := models.TokenByID(t.Context(), db, tok.ID)
		require.NoError(t, err)
		require.Equal(t, first.RevokedAt.UnixMicro(), second.RevokedAt.UnixMicro(), "the first revocation's time stays")
		require.Len(t, logged(t, db, access.TokenTarget(tok.ID), access.EventTokenRevoked), 1)
	})

	t.Run("another user's token reads as not found and stays", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		ada := createUser(t, db, userOpts{Email: "ada@example.com"})
		bob := createUser(t, db, userOpts{Email: "bob@example.com"})
		secret, tok := createToken(t, db, ada, access.NewToken{})
		e := requireAppErr(t, access.RevokeToken(t.Context(), db, tok.ID, bob.ID, access.Actor(bob)), apperr.NotFound)
		require.Equal(t, "No token with id "+strconv.FormatInt(tok.ID, 10)+".", e.Message, "the same answer as for a token that does not exist")
		_, err := access.BearerToken(t.Context(), db, secret)
		require.NoError(t, err)
		require.Empty(t, logged(t, db, access.TokenTarget(tok.ID), access.EventTokenRevoked))

		// Owner 0 (admins, the CLI) may revoke anyone's.
		require.NoError(t, access.RevokeToken(t.Context(), db, tok.ID, 0, "cli"))
		_, err = access.BearerToken(t.Context(), db, secret)
		require.ErrorIs(t, err, models.ErrNotFound)
	})

	t.Run("an unknown token is not found", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		e := requireAppErr(t, access.RevokeToken(t.Context(), db, 987654, 0, "test"), apperr.NotFound)
		require.Equal(t, "No token with id 987654.", e.Message)
	})
}

func TestDisabledUser(t *testing.T) {
	t.Parallel()

	t.Run("disabling ends sessions, refuses sign-in and stops tokens; enabling restores sign-in and tokens", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{Email: "ada@example.com"})
		session, _, err := login(t, db, u.Email, password, home, relaxed)
		require.NoError(t, err)
		token, _ := createToken(t, db, u, access.NewToken{})

		require.NoError(t, access.SetDisabled(t.Context(), db, u.ID, true, "user:root@example.com"))
		stored, err := models.UserByID(t.Context(), db, u.ID)
		require.NoError(t, err)
		require.True(t, stored.Disabled())
		_, err = access.SessionUser(t.Context(), db, session)
		require.ErrorIs(t, err, models.ErrNotFound, "the session ended")
		_, _, err = login(t, db, u.Email, password, home, relaxed)
		requireIncorrect(t, err) // the same answer as a wrong password
		_, err = access.BearerToken(t.Context(), db, token)
		require.ErrorIs(t, err, models.ErrNotFound, "the token stopped working")
		entries := logged(t, db, access.UserTarget(u.ID), access.EventUserDisabled)
		require.Len(t, entries, 1)
		require.Equal(t, "user:root@example.com", entries[0].Actor)
		require.Equal(t, map[string]any{"email": u.Email}, entries[0].Detail)

		require.NoError(t, access.SetDisabled(t.Context(), db, u.ID, false, "user:root@example.com"))
		stored, err = models.UserByID(t.Context(), db, u.ID)
		require.NoError(t, err)
		require.False(t, stored.Disabled())
		_, err = access.SessionUser(t.Context(), db, session)
		require.ErrorIs(t, err, models.ErrNotFound, "an ended session stays ended")
		_, err = access.BearerToken(t.Context(), db, token)
		require.NoError(t, err, "the token works again: it was never revoked")
		_, got, err := login(t, db, u.Email, password, home, relaxed)
		require.NoError(t, err)
		require.Equal(t, u.ID, got.ID)
		require.Len(t, logged(t, db, access.UserTarget(u.ID), access.EventUserEnabled), 1)
	})

	t.Run("an unknown user is not found", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		for _, disabled := range []bool{true, false} {
			e := requireAppErr(t, access.SetDisabled(t.Context(), db, 31337, disabled, "test"), apperr.NotFound)
			require.Equal(t, "No user with id 31337.", e.Message)
		}
	})
}

func TestSetPassword(t *testing.T) {
	t.Parallel()
	const newPassword = "a brand new passphrase"

	t.Run("replaces the password and ends every session", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{})
		s1, _, err := login(t, db, u.Email, password, home, relaxed)
		require.NoError(t, err)
		s2, _, err := login(t, db, u.Email, password, other, relaxed)
		require.NoError(t, err)

		require.NoError(t, access.SetPassword(t.Context(), db, u.ID, newPassword, "user:root@example.com"))
		for _, s := range []string{s1, s2} {
			_, err = access.SessionUser(t.Context(), db, s)
			require.ErrorIs(t, err, models.ErrNotFound)
		}
		_, _, err = login(t, db, u.Email, password, home, relaxed)
		requireIncorrect(t, err)
		_, _, err = login(t, db, u.Email, newPassword, home, relaxed)
		require.NoError(t, err)
		entries := logged(t, db, access.UserTarget(u.ID), access.EventPasswordChanged)
		require.Len(t, entries, 1)
		require.Equal(t, "user:root@example.com", entries[0].Actor)
		require.NotContains(t, entries[0].Detail, "password")
	})

	t.Run("a short password names the field and changes nothing", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		u := createUser(t, db, userOpts{})
		e := requireAppErr(t, access.SetPassword(t.Context(), db, u.ID, "too short", "test"), apperr.Invalid)
		require.Equal(t, map[string]string{"password": "password must be at least 12 characters"}, e.Fields)
		_, _, err := login(t, db, u.Email, password, home, relaxed)
		require.NoError(t, err)
	})

	t.Run("an unknown user is not found", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t).Bun
		e := requireAppErr(t, access.SetPassword(t.Context(), db, 777, newPassword, "test"), apperr.NotFound)
		require.Equal(t, "No user with id 777.", e.Message)
	})
}
