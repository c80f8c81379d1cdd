// Package auth holds the credential primitives: password hashing, random
// secrets for sessions and API tokens, and the scopes a token may carry.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"
)

// argon2id parameters: OWASP's recommended minimum (19 MiB, 2 passes).
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
	saltLen      = 16
)

// MinPasswordLength is enforced wherever a password is set.
const MinPasswordLength = 12

// HashPassword returns a PHC-formatted argon2id hash of password.
func HashPassword(password string) (string, error) {
	if len(password) < MinPasswordLength {
		return "", fmt.Errorf("password must be at least %d characters", MinPasswordLength)
	}
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("reading random salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// CheckPassword reports whether password matches hash, in constant time.
func CheckPassword(hash, password string) bool {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var mem, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &t, &p); err != nil {
		return false
	}
	salt, err1 := b64.DecodeString(parts[4])
	want, err2 := b64.DecodeString(parts[5])
	if err1 != nil || err2 != nil {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, t, mem, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// dummyHash is checked against when the email is unknown, so a wrong email
// and a wrong password take the same time. It is made on first use rather
// than when the package initialises: every start of the binary (each CLI
// call, and each command's supervisor, see internal/runner) would
// otherwise spend a hash, 19 MiB and about half a second, before main.
var dummyHash = sync.OnceValue(func() string {
	h, _ := HashPassword("not-a-real-password-at-all")
	return h
})

// CheckNoUser spends the time a real check would.
func CheckNoUser(password string) { CheckPassword(dummyHash(), password) }

var b64 = base64.RawStdEncoding

// NewSecret returns a random URL-safe secret with a readable prefix, such as
// "gnt_…" for API tokens, and the SHA-256 that is stored in its place.
func NewSecret(prefix string) (secret string, hash []byte, err error) {
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", nil, fmt.Errorf("reading random bytes: %w", err)
	}
	secret = prefix + base64.RawURLEncoding.EncodeToString(buf)
	return secret, HashSecret(secret), nil
}

// HashSecret is how a presented secret is looked up.
func HashSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// NewPassword generates a password for a first admin or a reset.
func NewPassword() (string, error) {
	buf := make([]byte, 15)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(buf), nil
}

// TokenPrefix marks Gantry API tokens so secret scanners can find them.
const TokenPrefix = "gnt_"

// Scopes a token can carry. A token never exceeds its owner's role: scopes
// only narrow what the owner could do.
const (
	ScopeRead  = "read"  // GET anything the owner may read
	ScopeWrite = "write" // change things the owner may change
	ScopeVote  = "vote"  // vote on approvals the owner is a voter of
	ScopeAdmin = "admin" // user, token and job administration
	ScopeAgent = "agent" // act as a daemons agent (gantry agent) and nothing else
)

// Scopes lists every scope with what it allows, for forms and --help.
var Scopes = []struct{ Name, Help string }{
	{ScopeRead, "read every page and API listing the owner may see"},
	{ScopeWrite, "make changes the owner's role allows"},
	{ScopeVote, "vote on approvals the owner is a voter of"},
	{ScopeAdmin, "administer users, tokens and jobs (admins only)"},
	{ScopeAgent, "run `gantry agent`: register an instance, take its daemon tasks, report on them (operators)"},
}

// ParseScopes validates a list of scope names.
func ParseScopes(names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, errors.New("at least one scope is required")
	}
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		ok := false
		for _, s := range Scopes {
			ok = ok || s.Name == n
		}
		if !ok {
			return nil, fmt.Errorf("unknown scope %q: use read, write, vote, admin or agent", n)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}
