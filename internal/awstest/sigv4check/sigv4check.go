// Package sigv4check verifies AWS Signature Version 4 on requests that
// in-test AWS endpoints (ecsfake, logsfake, s3fake) receive, the way the services
// do: the credential scope names the server's key, region and service, the
// date is within five minutes of the server's clock, and the signature is
// the one aws-sdk-go-v2's own signer makes over the signed headers with the
// server's secret. The server signs the request again and compares.
package sigv4check

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const (
	amzDateFormat = "20060102T150405Z"
	maxClockSkew  = 5 * time.Minute
)

// Verifier holds what a server accepts.
type Verifier struct {
	KeyID, Secret, Region, Service string
	// S3 signs as S3 does: the path is not escaped a second time, and the
	// payload's hash is the X-Amz-Content-Sha256 header the client sent.
	S3 bool
}

// Failure is why a signature was refused: AWS's error code and message.
type Failure struct {
	Status  int
	Code    string
	Message string
}

func (f *Failure) Error() string { return f.Code + ": " + f.Message }

func refuse(code, format string, args ...any) *Failure {
	status := http.StatusBadRequest
	if code == "SignatureDoesNotMatch" || code == "InvalidAccessKeyId" || code == "AccessDenied" {
		status = http.StatusForbidden
	}
	return &Failure{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Check verifies r, whose body (already read) is body, at the time now.
// The codes are the JSON services' (IncompleteSignatureException, …)
// or, with S3, S3's (AccessDenied, SignatureDoesNotMatch, …).
func (v Verifier) Check(r *http.Request, body []byte, now time.Time) *Failure {
	code := func(json, s3 string) string {
		if v.S3 {
			return s3
		}
		return json
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return refuse(code("MissingAuthenticationTokenException", "AccessDenied"), "Missing Authentication Token")
	}
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return refuse(code("IncompleteSignatureException", "AuthorizationHeaderMalformed"), "Unsupported AWS 'algorithm'")
	}
	var credential, signed, signature string
	for part := range strings.SplitSeq(rest, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			credential = val
		case "SignedHeaders":
			signed = val
		case "Signature":
			signature = val
		}
	}
	scope := strings.Split(credential, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" || signed == "" || signature == "" {
		return refuse(code("IncompleteSignatureException", "AuthorizationHeaderMalformed"), "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters.")
	}
	if scope[0] != v.KeyID {
		return refuse(code("UnrecognizedClientException", "InvalidAccessKeyId"), "The security token included in the request is invalid.")
	}
	if scope[2] != v.Region || scope[3] != v.Service {
		return refuse(code("InvalidSignatureException", "AuthorizationHeaderMalformed"), "Credential should be scoped to region %s and the service %s, not %s/%s.", v.Region, v.Service, scope[2], scope[3])
	}
	signedAt, err := time.Parse(amzDateFormat, r.Header.Get("X-Amz-Date"))
	if err != nil || signedAt.Format("20060102") != scope[1] {
		return refuse(code("IncompleteSignatureException", "AccessDenied"), "X-Amz-Date is missing or does not match the credential scope.")
	}
	if d := now.Sub(signedAt); d > maxClockSkew || d < -maxClockSkew {
		return refuse(code("InvalidSignatureException", "RequestTimeTooSkewed"), "Signature expired: %s is not within 5 minutes of the server's time.", r.Header.Get("X-Amz-Date"))
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if !v.S3 || payload == "" {
		sum := sha256.Sum256(body)
		payload = hex.EncodeToString(sum[:])
	} else if payload != "UNSIGNED-PAYLOAD" && !strings.HasPrefix(payload, "STREAMING-") {
		sum := sha256.Sum256(body)
		if hex.EncodeToString(sum[:]) != payload {
			return refuse("XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.")
		}
	}
	if !v.matches(r, payload, strings.Split(signed, ";"), signedAt) {
		return refuse(code("InvalidSignatureException", "SignatureDoesNotMatch"), "The request signature we calculated does not match the signature you provided.")
	}
	return nil
}

func (v Verifier) matches(r *http.Request, payload string, signedHeaders []string, signedAt time.Time) bool {
	req, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return false
	}
	for _, name := range signedHeaders {
		switch name {
		case "host", "x-amz-date", "x-amz-security-token":
			// the signer sets these from the URL, the time and the credentials
		case "content-length":
			req.ContentLength = r.ContentLength
		default:
			if vals := r.Header.Values(name); len(vals) > 0 {
				req.Header[http.CanonicalHeaderKey(name)] = vals
			}
		}
	}
	creds := aws.Credentials{AccessKeyID: v.KeyID, SecretAccessKey: v.Secret}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = v.S3 })
	if err := signer.SignHTTP(context.Background(), creds, req, payload, v.Service, v.Region, signedAt); err != nil {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(req.Header.Get("Authorization")), []byte(r.Header.Get("Authorization"))) == 1
}
