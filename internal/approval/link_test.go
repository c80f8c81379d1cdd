package approval_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/approval"
)

var (
	keyA = []byte("key-a-0123456789abcdef0123456789abcdef")
	keyB = []byte("key-b-0123456789abcdef0123456789abcdef")
	keyC = []byte("key-c-0123456789abcdef0123456789abcdef")
)

func claims() approval.Claims {
	return approval.Claims{Subject: "execution:123", Voter: "ada@example.com", Expires: t0.Add(72 * time.Hour), Nonce: "n0nce"}
}

func sign(t *testing.T, s approval.Signer, c approval.Claims) string {
	t.Helper()
	token, err := s.Sign(c)
	require.NoError(t, err)
	return token
}

// requireOnly asserts err matches want and neither other Verify error.
func requireOnly(t *testing.T, err, want error) {
	t.Helper()
	require.ErrorIs(t, err, want)
	for _, other := range []error{approval.ErrInvalid, approval.ErrExpired, approval.ErrKey} {
		if other != want {
			require.False(t, errors.Is(err, other), "%v also matches %v", err, other)
		}
	}
}

func TestSignVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	s := approval.Signer{Key: keyA}
	for _, c := range []approval.Claims{
		claims(),
		{Subject: "gate:pipeline/prod/7", Voter: "bob@example.com", Expires: t0.Add(time.Hour)},
		{Subject: `odd "subject" <&> ünïcode`, Voter: "x@y.z", Expires: t0.Add(time.Second), Nonce: strings.Repeat("n", 200)},
	} {
		token := sign(t, s, c)
		got, err := s.Verify(token, t0)
		require.NoError(t, err)
		require.Equal(t, c, got)
		require.Equal(t, url.QueryEscape(token), token, "URL-safe as it is")
		require.Equal(t, url.PathEscape(token), token, "URL-safe as it is")
		require.Equal(t, 1, strings.Count(token, "."))
	}
}

func TestSignNormalizes(t *testing.T) {
	t.Parallel()
	s := approval.Signer{Key: keyA}
	c := claims()
	c.Voter = " Ada@Example.COM "
	c.Expires = t0.Add(time.Hour + 999*time.Millisecond).In(time.FixedZone("CET", 3600))
	got, err := s.Verify(sign(t, s, c), t0)
	require.NoError(t, err)
	require.Equal(t, "ada@example.com", got.Voter)
	require.Equal(t, t0.Add(time.Hour), got.Expires, "whole seconds, truncated, in UTC")
	require.Equal(t, time.UTC, got.Expires.Location())
}

// TestTokenFormat pins the format: links already emailed must keep working
// across releases.
func TestTokenFormat(t *testing.T) {
	t.Parallel()
	c := approval.Claims{Subject: "execution:123", Voter: "ada@example.com", Expires: time.Unix(1767225600, 0)}
	token := sign(t, approval.Signer{Key: keyA}, c)

	payload := `{"sub":"execution:123","voter":"ada@example.com","exp":1767225600}`
	body := base64.RawURLEncoding.EncodeToString([]byte(payload))
	h := hmac.New(sha256.New, keyA)
	h.Write([]byte("gantry-approval-v1." + body))
	require.Equal(t, body+"."+base64.RawURLEncoding.EncodeToString(h.Sum(nil)), token)
	require.Equal(t,
		"eyJzdWIiOiJleGVjdXRpb246MTIzIiwidm90ZXIiOiJhZGFAZXhhbXBsZS5jb20iLCJleHAiOjE3NjcyMjU2MDB9.FHTC9gIqfsRfYGinr4MMgZHNlEvRHTOk-9csX2m2b7M",
		token)
}

func TestVerifyExpiry(t *testing.T) {
	t.Parallel()
	s := approval.Signer{Key: keyA}
	c := claims()
	token := sign(t, s, c)

	_, err := s.Verify(token, c.Expires.Add(-time.Nanosecond))
	require.NoError(t, err, "valid until the last moment")

	for _, now := range []time.Time{c.Expires, c.Expires.Add(time.Second), c.Expires.Add(365 * 24 * time.Hour)} {
		got, err := s.Verify(token, now)
		requireOnly(t, err, approval.ErrExpired)
		require.Equal(t, c, got, "expired links still say what they were for")
	}
}

func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	s := approval.Signer{Key: keyA}
	token := sign(t, s, claims())
	body, sig, _ := strings.Cut(token, ".")
	other := sign(t, s, approval.Claims{Subject: "execution:999", Voter: "ada@example.com", Expires: t0.Add(time.Hour)})
	otherBody, otherSig, _ := strings.Cut(other, ".")
	forged := func(payload string) string {
		b := base64.RawURLEncoding.EncodeToString([]byte(payload))
		return b + "." + sig
	}

	for name, bad := range map[string]string{
		"empty":                       "",
		"a dot":                       ".",
		"no signature":                body + ".",
		"no payload":                  "." + sig,
		"no dot":                      body + sig,
		"three parts":                 token + "." + sig,
		"payload changed":             flip(body) + "." + sig,
		"signature changed":           body + "." + flip(sig),
		"signature of another token":  body + "." + otherSig,
		"payload of another token":    otherBody + "." + sig,
		"signature cut short":         body + "." + sig[:len(sig)-2],
		"signature too long":          body + "." + sig + "AA",
		"padded signature":            body + "." + sig + "=",
		"standard base64":             strings.NewReplacer("-", "+", "_", "/").Replace(token),
		"whitespace":                  " " + token,
		"a line break in the payload": body[:10] + "\n" + body[10:] + "." + sig,
		"a CR in the signature":       body + "." + sig[:10] + "\r" + sig[10:],
		"a CRLF at the end":           token + "\r\n",
		"a forged voter":              forged(`{"sub":"execution:123","voter":"eve@example.com","exp":1767225600}`),
		"too long":                    body + strings.Repeat("A", approval.MaxTokenLen) + "." + sig,
		"signed with another key":     sign(t, approval.Signer{Key: keyB}, claims()),
		"signed without domain":       body + "." + rawMAC(keyA, body),
		"not base64":                  "!!!!.????",
		"a JWT with alg none":         "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := s.Verify(bad, t0)
			requireOnly(t, err, approval.ErrInvalid)
			require.Equal(t, approval.Claims{}, got, "nothing of an invalid token is returned")
		})
	}
}

// TestVerifyNonCanonicalSignature: a second spelling of a valid signature
// (other trailing bits in the last character) is refused, so a token has one
// spelling.
func TestVerifyNonCanonicalSignature(t *testing.T) {
	t.Parallel()
	s := approval.Signer{Key: keyA}
	token := sign(t, s, claims())
	// 32 bytes are 43 characters whose last one carries 4 data bits and 2
	// zero bits; setting a zero bit decodes leniently to the same bytes.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, token[len(token)-1])
	require.Zero(t, last&3)
	alt := token[:len(token)-1] + string(alphabet[last|1])
	lenient, err := base64.RawURLEncoding.DecodeString(alt[strings.IndexByte(alt, '.')+1:])
	require.NoError(t, err)
	strict, _ := base64.RawURLEncoding.DecodeString(token[strings.IndexByte(token, '.')+1:])
	require.Equal(t, strict, lenient, "the same signature bytes")
	_, err = s.Verify(alt, t0)
	requireOnly(t, err, approval.ErrInvalid)
}

func TestKeyRotation(t *testing.T) {
	t.Parallel()
	old := approval.Signer{Key: keyA}
	rotated := approval.Signer{Key: keyB, Previous: [][]byte{keyC, keyA}}
	c := claims()

	oldToken := sign(t, old, c)
	got, err := rotated.Verify(oldToken, t0)
	require.NoError(t, err, "links sent before the rotation keep working")
	require.Equal(t, c, got)

	newToken := sign(t, rotated, c)
	_, err = (approval.Signer{Key: keyB}).Verify(newToken, t0)
	require.NoError(t, err, "new links are signed with Key")
	_, err = old.Verify(newToken, t0)
	requireOnly(t, err, approval.ErrInvalid)

	_, err = (approval.Signer{Key: keyB}).Verify(oldToken, t0)
	requireOnly(t, err, approval.ErrInvalid)
}

func TestShortKeys(t *testing.T) {
	t.Parallel()
	token := sign(t, approval.Signer{Key: keyA}, claims())
	for name, s := range map[string]approval.Signer{
		"none":               {},
		"31 bytes":           {Key: keyA[:31]},
		"short previous key": {Key: keyA, Previous: [][]byte{keyB, nil}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			requireOnly(t, s.Validate(), approval.ErrKey)
			_, err := s.Sign(claims())
			requireOnly(t, err, approval.ErrKey)
			_, err = s.Verify(token, t0)
			requireOnly(t, err, approval.ErrKey)
		})
	}
	require.NoError(t, approval.Signer{Key: keyA[:32]}.Validate())
}

func TestSignRefusesIncompleteClaims(t *testing.T) {
	t.Parallel()
	s := approval.Signer{Key: keyA}
	for name, edit := range map[string]func(*approval.Claims){
		"no subject":           func(c *approval.Claims) { c.Subject = "" },
		"no voter":             func(c *approval.Claims) { c.Voter = "  " },
		"no expiry":            func(c *approval.Claims) { c.Expires = time.Time{} },
		"expiry before 1970":   func(c *approval.Claims) { c.Expires = time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC) },
		"invalid UTF-8":        func(c *approval.Claims) { c.Subject = "execution:\xff" },
		"longer than MaxToken": func(c *approval.Claims) { c.Nonce = strings.Repeat("n", approval.MaxTokenLen) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := claims()
			edit(&c)
			_, err := s.Sign(c)
			require.Error(t, err)
		})
	}
}

func TestLinkErrorsMapToStatuses(t *testing.T) {
	t.Parallel()
	require.Equal(t, apperr.Forbidden, apperr.CodeOf(approval.ErrInvalid))
	require.Equal(t, apperr.Forbidden, apperr.CodeOf(approval.ErrExpired))
	require.Equal(t, apperr.Internal, apperr.CodeOf(approval.ErrKey))
	// The web layer shows the sentinel's message, not the reason for logs.
	_, err := approval.Signer{Key: keyA}.Verify("garbage", t0)
	var ae *apperr.Error
	require.ErrorAs(t, err, &ae)
	require.Same(t, approval.ErrInvalid, error(ae))
}

// flip changes the first character of a base64url string to another valid
// one.
func flip(s string) string {
	c := byte('A')
	if s[0] == 'A' {
		c = 'B'
	}
	return string(c) + s[1:]
}

func rawMAC(key []byte, body string) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
