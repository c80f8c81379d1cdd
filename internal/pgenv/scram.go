package pgenv

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// SCRAM parameters PostgreSQL uses by default (scram_iterations, salt length).
const (
	scramIterations = 4096
	scramSaltLength = 16
)

// scramVerifier returns the SCRAM-SHA-256 verifier PostgreSQL stores for
// password (RFC 5802, RFC 7677), in the form CREATE ROLE ... PASSWORD accepts
// as already hashed: SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>.
// password must not need SASLprep normalisation, which holds for the ASCII
// letters and digits Grant generates.
func scramVerifier(password string) (string, error) {
	salt := make([]byte, scramSaltLength)
	_, _ = rand.Read(salt) // never fails
	return scramVerifierWith(password, salt, scramIterations)
}

func scramVerifierWith(password string, salt []byte, iterations int) (string, error) {
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", fmt.Errorf("deriving the SCRAM key: %w", err)
	}
	clientKey := hmacSHA256(salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	serverKey := hmacSHA256(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(storedKey[:]), b64(serverKey)), nil
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
