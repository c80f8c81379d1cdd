package approval

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gantryhq/gantry/internal/apperr"
)

// MinKeyLen is the shortest signing key a Signer accepts, in bytes.
const MinKeyLen = 32

// MaxTokenLen is the longest token Sign produces and Verify looks at.
const MaxTokenLen = 2048

// domain separates these MACs from any other use of the same key; the
// version changes if the token format ever does.
const domain = "gantry-approval-v1."

// Claims is what a voting link says: this voter may vote on this subject
// until it expires.
type Claims struct {
	// Subject is what is voted on, such as "execution:123" or "gate:7". The
	// handler must check that it names the approval being voted on.
	Subject string
	// Voter is the email address the link was sent to. Sign normalizes it
	// (trimmed, lower case).
	Voter string
	// Expires is when the link stops working. Tokens carry whole seconds:
	// Sign truncates it, and Verify returns it in UTC.
	Expires time.Time
	// Nonce is optional: a random value (crypto/rand.Text()) that makes each
	// link unique, so that a caller who stores it can revoke one link or
	// accept only the latest one sent.
	Nonce string
}

// payload is Claims on the wire.
type payload struct {
	Subject string `json:"sub"`
	Voter   string `json:"voter"`
	Expires int64  `json:"exp"` // Unix seconds
	Nonce   string `json:"nonce,omitempty"`
}

// Errors of Verify. Every token Verify refuses matches exactly one of them
// with errors.Is; the wrapping error says why, for logs. They are
// *apperr.Error values (403) whose messages tell the voter what to do.
var (
	// ErrInvalid: malformed, tampered with, or signed with another key.
	ErrInvalid error = &apperr.Error{Code: apperr.Forbidden, Message: "This voting link is not valid. Open the link exactly as it is in the email, or sign in and vote from the dashboard."}
	// ErrExpired: authentic but past Claims.Expires.
	ErrExpired error = &apperr.Error{Code: apperr.Forbidden, Message: "This voting link has expired. Sign in and vote from the dashboard."}
)

// ErrKey is returned by a Signer whose keys are too short: a configuration
// fault, not the voter's.
var ErrKey = fmt.Errorf("approval: signing keys must be at least %d bytes", MinKeyLen)

// Signer signs and verifies voting links: tokens of the form
//
//	base64url(payload) "." base64url(HMAC-SHA256(key, "gantry-approval-v1." + base64url(payload)))
//
// where payload is the claims as JSON and base64url is unpadded (RFC 4648
// §5). The MAC covers the encoded payload, so nothing of a token is decoded
// before it is authenticated.
//
// Key signs and verifies. To rotate keys without breaking the links already
// sent, move the old key to Previous, which only verifies, and drop it once
// its links have expired.
type Signer struct {
	Key      []byte
	Previous [][]byte
}

// Validate returns ErrKey (wrapped) unless Key and every Previous key are at
// least MinKeyLen bytes. Sign and Verify check it too; call it at start-up to
// fail early.
func (s Signer) Validate() error {
	if len(s.Key) < MinKeyLen {
		return fmt.Errorf("key is %d bytes: %w", len(s.Key), ErrKey)
	}
	for i, k := range s.Previous {
		if len(k) < MinKeyLen {
			return fmt.Errorf("previous key %d is %d bytes: %w", i, len(k), ErrKey)
		}
	}
	return nil
}

// Sign returns the token for c, signed with s.Key. It fails when the keys are
// too short (ErrKey), when c lacks Subject, Voter or Expires (or Expires is
// before 1970) or is not valid UTF-8, or when the token would be longer than
// MaxTokenLen.
func (s Signer) Sign(c Claims) (string, error) {
	if err := s.Validate(); err != nil {
		return "", fmt.Errorf("signing a voting link: %w", err)
	}
	p := payload{Subject: c.Subject, Voter: normalize(c.Voter), Expires: c.Expires.Unix(), Nonce: c.Nonce}
	switch {
	case p.Subject == "":
		return "", errors.New("signing a voting link: the subject is empty")
	case p.Voter == "":
		return "", errors.New("signing a voting link: the voter is empty")
	case c.Expires.IsZero() || p.Expires <= 0:
		return "", errors.New("signing a voting link: the expiry is not set")
	case !utf8.ValidString(p.Subject) || !utf8.ValidString(p.Voter) || !utf8.ValidString(p.Nonce):
		return "", errors.New("signing a voting link: the claims are not valid UTF-8")
	}
	js, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("signing a voting link: %w", err)
	}
	body := b64.EncodeToString(js)
	token := body + "." + b64.EncodeToString(mac(s.Key, body))
	if len(token) > MaxTokenLen {
		return "", fmt.Errorf("signing a voting link: the token would be %d bytes, over %d", len(token), MaxTokenLen)
	}
	return token, nil
}

// Verify checks token and returns its claims. It returns an error matching
// ErrInvalid for anything malformed, tampered with or signed with none of
// s's keys, and one matching ErrExpired for an authentic token when now is at
// or past its expiry; with ErrExpired it also returns the (authentic) claims,
// so the page can say which approval the link was for. A Signer with short
// keys returns ErrKey. Verify never panics, whatever token holds.
func (s Signer) Verify(token string, now time.Time) (Claims, error) {
	if err := s.Validate(); err != nil {
		return Claims{}, fmt.Errorf("verifying a voting link: %w", err)
	}
	if len(token) > MaxTokenLen {
		return Claims{}, invalid("the token is too long")
	}
	// Go's base64 decoders skip CR and LF, even strict ones; anything outside
	// the alphabet is refused here so that a token has one spelling.
	if i := strings.IndexFunc(token, func(r rune) bool { return !isTokenChar(r) }); i >= 0 {
		return Claims{}, invalid(fmt.Sprintf("character %d is not base64url", i))
	}
	body, sig, ok := strings.Cut(token, ".")
	if !ok || body == "" || sig == "" || strings.Contains(sig, ".") {
		return Claims{}, invalid("the token is not two dot-separated parts")
	}
	got, err := b64.DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return Claims{}, invalid("the signature is malformed")
	}
	authentic := false
	for _, k := range append([][]byte{s.Key}, s.Previous...) {
		// Every key is tried, so the time taken does not say which matched.
		if hmac.Equal(got, mac(k, body)) {
			authentic = true
		}
	}
	if !authentic {
		return Claims{}, invalid("the signature does not match")
	}

	// From here the payload is one Sign produced, so failures below mean a
	// key was used by something else; they are still refused, not trusted.
	js, err := b64.DecodeString(body)
	if err != nil {
		return Claims{}, invalid("the payload is not base64url")
	}
	var p payload
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || dec.More() {
		return Claims{}, invalid("the payload is not the expected JSON")
	}
	if p.Subject == "" || p.Voter == "" || p.Expires <= 0 {
		return Claims{}, invalid("the payload lacks a subject, voter or expiry")
	}
	c := Claims{Subject: p.Subject, Voter: p.Voter, Expires: time.Unix(p.Expires, 0).UTC(), Nonce: p.Nonce}
	if !now.Before(c.Expires) {
		return c, fmt.Errorf("voting link expired at %s: %w", c.Expires.Format(time.RFC3339), ErrExpired)
	}
	return c, nil
}

// b64 is unpadded base64url that refuses non-canonical encodings, so one
// token has one spelling.
var b64 = base64.RawURLEncoding.Strict()

func mac(key []byte, body string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(domain))
	h.Write([]byte(body))
	return h.Sum(nil)
}

// isTokenChar says whether r may appear in a token: the base64url alphabet
// and the dot between the parts.
func isTokenChar(r rune) bool {
	return 'A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.'
}

func invalid(why string) error { return fmt.Errorf("voting link: %s: %w", why, ErrInvalid) }
