// Package github is Gantry's adapter to GitHub: it verifies and parses the
// webhooks GitHub sends (ping, pull_request) and sets commit statuses
// through the REST API with go-github.
package github

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// The request headers of a webhook delivery.
const (
	// HeaderEvent names the event: "ping", "pull_request", ….
	HeaderEvent = "X-GitHub-Event"
	// HeaderDelivery is the delivery's GUID; a redelivery keeps it.
	HeaderDelivery = "X-GitHub-Delivery"
	// HeaderSignature is "sha256=" and the hex HMAC-SHA256 of the raw body
	// keyed with the webhook's secret.
	HeaderSignature = "X-Hub-Signature-256"
)

// MaxPayloadSize is the largest webhook body GitHub sends (25 MB); a body
// limit for the webhook endpoint.
const MaxPayloadSize = 25 << 20

// ErrSignature is wrapped by every error of VerifySignature.
var ErrSignature = errors.New("webhook signature")

const signaturePrefix = "sha256="

// Sign returns the X-Hub-Signature-256 value GitHub sends for body with
// secret: "sha256=" and the hex HMAC-SHA256.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return signaturePrefix + hex.EncodeToString(mac.Sum(nil))
}

// VerifySignature checks header, the X-Hub-Signature-256 of a delivery,
// against the raw body and the webhook's secret, comparing in constant
// time. Errors (missing, malformed, mismatching signature, or no secret
// configured) wrap ErrSignature; the web layer answers 401.
func VerifySignature(secret, body []byte, header string) error {
	if len(secret) == 0 {
		return fmt.Errorf("%w: no webhook secret is configured, so no delivery can be trusted", ErrSignature)
	}
	if header == "" {
		return fmt.Errorf("%w: missing %s header", ErrSignature, HeaderSignature)
	}
	hexMAC, ok := strings.CutPrefix(header, signaturePrefix)
	if !ok {
		return fmt.Errorf("%w: %s does not start with %q", ErrSignature, HeaderSignature, signaturePrefix)
	}
	got, err := hex.DecodeString(hexMAC)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: %s is not %d hex-encoded bytes", ErrSignature, HeaderSignature, sha256.Size)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return fmt.Errorf("%w: does not match the body and the configured secret", ErrSignature)
	}
	return nil
}
