package mailtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// SES limits the server enforces, as AWS documents them for SendEmail.
const (
	SESMaxRecipients = 50
	SESMaxLine       = 1000     // characters in one line of a raw message
	SESMaxMessage    = 40 << 20 // bytes of a raw message
)

// SESMaxClockSkew is how far a signature's date may be from the server's
// clock.
const SESMaxClockSkew = 15 * time.Minute

// SES is a small Amazon SES (API v2) inside a test, for the real
// aws-sdk-go-v2 sesv2 client pointed at it with BaseEndpoint. It implements
// SendEmail (POST /v2/email/outbound-emails) with Raw content as AWS
// documents it: a REST-JSON body whose Content.Raw.Data is the base64 of an
// RFC 5322 message; {"MessageId": …} on success; on failure the status, the
// x-amzn-ErrorType header and a {"message": …} body of SES's errors
// (BadRequestException, MessageRejected; MissingAuthenticationTokenException,
// UnrecognizedClientException, InvalidSignatureException for signing).
//
// Every request must carry a SigV4 signature scoped to the ses service,
// made with Credentials: the server signs the request again and compares.
// Like SES, it sends only from verified identities (VerifyIdentity) and
// rejects the rest with MessageRejected; it behaves as an account out of
// the sandbox, so any recipient is accepted.
//
// What it accepts it keeps as a Message: From is the envelope sender
// (FromEmailAddress, else the From header), To the envelope recipients
// (Destination, else the To, Cc and Bcc headers), Raw the decoded message.
type SES struct {
	// URL is the endpoint, for BaseEndpoint.
	URL string

	inbox
	creds aws.Credentials

	stateMu  sync.Mutex      // guards verified and calls; inbox has its own
	verified map[string]bool // addresses and domains, lower case
	calls    []SESCall
}

// SESCall is one request the server answered.
type SESCall struct {
	Method, Path string
	AccessKeyID  string // "" when the request was not signed
	Region       string // of the signature's credential scope
	Status       int
	Error        string // the error type (x-amzn-ErrorType), "" on success
	MessageID    string // on success
}

// NewSES starts an SES that stops when t ends. Nothing is verified yet.
func NewSES(t testing.TB) *SES {
	t.Helper()
	s := &SES{
		inbox:    newInbox(),
		creds:    aws.Credentials{AccessKeyID: "AKIA" + randomID(16), SecretAccessKey: randomSecret(), Source: "mailtest"},
		verified: map[string]bool{},
	}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Credentials are the only keys the server accepts.
func (s *SES) Credentials() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(s.creds.AccessKeyID, s.creds.SecretAccessKey, "")
}

// VerifyIdentity lets an address ("gantry@example.com") or a whole domain
// ("example.com") send, as a verified SES identity does.
func (s *SES) VerifyIdentity(identity string) {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	s.verified[strings.ToLower(identity)] = true
}

// Calls returns the requests answered so far, oldest first.
func (s *SES) Calls() []SESCall {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	return slices.Clone(s.calls)
}

// sesError is an error answer.
type sesError struct {
	status        int
	code, message string
}

func sesErr(status int, code, format string, args ...any) *sesError {
	return &sesError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *sesError {
	return sesErr(http.StatusBadRequest, "BadRequestException", format, args...)
}

func rejected(format string, args ...any) *sesError {
	return sesErr(http.StatusBadRequest, "MessageRejected", format, args...)
}

func (s *SES) serve(w http.ResponseWriter, r *http.Request) {
	call := SESCall{Method: r.Method, Path: r.URL.Path}
	msg, id, err := s.handle(r, &call)
	if err != nil {
		call.Status, call.Error = err.status, err.code
	} else {
		call.Status, call.MessageID = http.StatusOK, id
	}
	s.stateMu.Lock()
	s.calls = append(s.calls, call)
	s.stateMu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	// The SDK corrects its clock from Date when a signature is refused as
	// skewed, as it does with AWS.
	w.Header().Set("Date", time.Now().UTC().Format(http.TimeFormat))
	w.Header().Set("X-Amzn-Requestid", requestID())
	if err != nil {
		w.Header().Set("X-Amzn-Errortype", err.code)
		w.WriteHeader(err.status)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": err.message})
		return
	}
	s.add(msg)
	_ = json.NewEncoder(w).Encode(map[string]string{"MessageId": id})
}

// sendEmailRequest is the part of SendEmail's body the server reads.
type sendEmailRequest struct {
	FromEmailAddress string
	Destination      *struct {
		ToAddresses, CcAddresses, BccAddresses []string
	}
	Content *struct {
		Raw *struct {
			Data []byte // base64 in the JSON, as AWS documents
		}
		Simple   json.RawMessage
		Template json.RawMessage
	}
}

// handle authenticates a request and sends its message.
func (s *SES) handle(r *http.Request, call *SESCall) (Message, string, *sesError) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 2*SESMaxMessage))
	if err != nil {
		return Message{}, "", badRequest("The request body could not be read.")
	}
	if err := s.authenticate(r, body, call); err != nil {
		return Message{}, "", err
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v2/email/outbound-emails" {
		return Message{}, "", sesErr(http.StatusNotFound, "NotFoundException", "mailtest: only SendEmail (POST /v2/email/outbound-emails) is implemented, not %s %s", r.Method, r.URL.Path)
	}
	var in sendEmailRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return Message{}, "", badRequest("Could not parse the request body: %v", err)
	}
	switch {
	case in.Content == nil:
		return Message{}, "", badRequest("Content is required.")
	case in.Content.Simple != nil || in.Content.Template != nil:
		return Message{}, "", badRequest("mailtest: only Raw content is implemented")
	case in.Content.Raw == nil || len(in.Content.Raw.Data) == 0:
		return Message{}, "", badRequest("Raw message data is required.")
	}
	raw := in.Content.Raw.Data
	if len(raw) > SESMaxMessage {
		return Message{}, "", rejected("Message length is more than %d bytes long.", SESMaxMessage)
	}
	for line := range strings.Lines(string(raw)) {
		if len(strings.TrimRight(line, "\r\n")) > SESMaxLine {
			return Message{}, "", rejected("Message contains a line longer than %d characters.", SESMaxLine)
		}
	}
	parsed, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Message{}, "", rejected("Illegal message: %v", err)
	}

	from := in.FromEmailAddress
	if from == "" {
		from = parsed.Header.Get("From")
	}
	fromAddr, err := mail.ParseAddress(from)
	if err != nil {
		return Message{}, "", badRequest("Illegal address: %q", from)
	}
	if !s.isVerified(fromAddr.Address) {
		return Message{}, "", rejected("Email address is not verified. The following identities failed the check in region %s: %s", strings.ToUpper(call.Region), fromAddr.Address)
	}

	var rcpts []string
	if d := in.Destination; d != nil {
		rcpts = slices.Concat(d.ToAddresses, d.CcAddresses, d.BccAddresses)
	} else {
		for _, h := range []string{"To", "Cc", "Bcc"} {
			list, err := parsed.Header.AddressList(h)
			if err != nil && err != mail.ErrHeaderNotPresent {
				return Message{}, "", rejected("Illegal address in %s: %v", h, err)
			}
			for _, a := range list {
				rcpts = append(rcpts, a.Address)
			}
		}
	}
	switch {
	case len(rcpts) == 0:
		return Message{}, "", badRequest("Missing final recipients: give Destination or To, Cc or Bcc headers.")
	case len(rcpts) > SESMaxRecipients:
		return Message{}, "", rejected("Recipient count exceeds %d.", SESMaxRecipients)
	}
	for _, rcpt := range rcpts {
		if _, err := mail.ParseAddress(rcpt); err != nil {
			return Message{}, "", badRequest("Illegal address: %q", rcpt)
		}
	}
	return received(fromAddr.Address, rcpts, raw), sesMessageID(), nil
}

func (s *SES) isVerified(addr string) bool {
	addr = strings.ToLower(addr)
	_, domain, _ := strings.Cut(addr, "@")
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	return s.verified[addr] || s.verified[domain]
}

// authenticate checks the request's SigV4 signature by signing it again
// with the SDK's signer and the server's secret, filling in call.
func (s *SES) authenticate(r *http.Request, body []byte, call *SESCall) *sesError {
	h := r.Header.Get("Authorization")
	if h == "" {
		return sesErr(http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token")
	}
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return sesErr(http.StatusBadRequest, "IncompleteSignatureException", "Unsupported AWS 'algorithm': '%s'", strings.Fields(h)[0])
	}
	var credential, signed string
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			credential = v
		case "SignedHeaders":
			signed = v
		}
	}
	scope := strings.Split(credential, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" || signed == "" {
		return sesErr(http.StatusBadRequest, "IncompleteSignatureException", "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters, with a Credential of KEY/DATE/REGION/SERVICE/aws4_request.")
	}
	call.AccessKeyID, call.Region = scope[0], scope[2]
	if scope[0] != s.creds.AccessKeyID || r.Header.Get("X-Amz-Security-Token") != "" {
		return sesErr(http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid.")
	}
	if scope[3] != "ses" {
		return sesErr(http.StatusForbidden, "InvalidSignatureException", "Credential should be scoped to correct service: 'ses'.")
	}
	signedAt, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || signedAt.Format("20060102") != scope[1] {
		return sesErr(http.StatusBadRequest, "IncompleteSignatureException", "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header, matching the date of the Credential scope.")
	}
	now := time.Now()
	if d := now.Sub(signedAt); d > SESMaxClockSkew || d < -SESMaxClockSkew {
		return sesErr(http.StatusForbidden, "InvalidSignatureException", "Signature expired: %s is not within %s of %s.", signedAt.Format("20060102T150405Z"), SESMaxClockSkew, now.UTC().Format("20060102T150405Z"))
	}

	// Sign the same request again, from the headers the client says it
	// signed, and compare the Authorization headers in constant time.
	req, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return badRequest("%v", err)
	}
	for name := range strings.SplitSeq(signed, ";") {
		switch name {
		case "host", "x-amz-date":
			// the signer sets these from the URL and the time
		case "content-length":
			req.ContentLength = r.ContentLength
		default:
			if v := r.Header.Values(name); len(v) > 0 {
				req.Header[http.CanonicalHeaderKey(name)] = v
			}
		}
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), s.creds, req, hex.EncodeToString(sum[:]), scope[3], scope[2], signedAt); err != nil ||
		subtle.ConstantTimeCompare([]byte(req.Header.Get("Authorization")), []byte(h)) != 1 {
		return sesErr(http.StatusForbidden, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
	}
	return nil
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// randomID is n characters of A–Z and 2–7, as AWS's key ids.
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return idEncoding.EncodeToString(b)[:n]
}

// randomSecret is 40 characters, as an AWS secret access key.
func randomSecret() string {
	b := make([]byte, 30)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func requestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// sesMessageID has the shape of SES's message ids.
func sesMessageID() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x-000000", b[0:8], b[8:12], b[12:14], b[14:16], b[16:22])
}
