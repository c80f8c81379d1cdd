package ecsfake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// TargetPrefix is X-Amz-Target's prefix: ECS's service name and API version.
const TargetPrefix = "AmazonEC2ContainerServiceV20141113."

const (
	contentType   = "application/x-amz-json-1.1"
	amzDateFormat = "20060102T150405Z"
	maxClockSkew  = 5 * time.Minute
)

// operation runs one call; it is given the request body and returns the
// response document, with the server's lock held.
type operation func(s *Server, body []byte) (any, *apiError)

var operations = map[string]operation{
	"ListContainerInstances":     (*Server).listContainerInstances,
	"DescribeContainerInstances": (*Server).describeContainerInstances,
	"StartTask":                  (*Server).startTask,
	"ListTasks":                  (*Server).listTasks,
	"DescribeTasks":              (*Server).describeTasks,
	"StopTask":                   (*Server).stopTask,
	"RunTask":                    (*Server).runTask,
}

// apiError is an error answer.
type apiError struct {
	status  int
	code    string
	message string
}

func clientError(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, message: fmt.Sprintf(format, args...)}
}

func invalidParameter(format string, args ...any) *apiError {
	return clientError("InvalidParameterException", format, args...)
}

// ServeHTTP answers one ECS request; every request, answered with an error
// or not, is recorded in Calls.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op, _ := strings.CutPrefix(r.Header.Get("X-Amz-Target"), TargetPrefix)
	s.runHooks(op)

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	body, readErr := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	call := Call{Operation: op, Body: body, At: now}
	out, err := s.handle(r, op, body, readErr, now)
	status := http.StatusOK
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Amzn-Requestid", randomHex(16))
	if err != nil {
		status, call.Error = err.status, err.code
		w.Header().Set("X-Amzn-ErrorType", err.code)
		out = map[string]string{"__type": err.code, "message": err.message}
	}
	call.Status = status
	s.calls = append(s.calls, call)
	doc, mErr := json.Marshal(out)
	if mErr != nil {
		http.Error(w, mErr.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(doc)
}

func (s *Server) runHooks(op string) {
	s.mu.Lock()
	hooks := s.hooks[op]
	delete(s.hooks, op)
	s.mu.Unlock()
	for _, fn := range hooks {
		fn()
	}
}

func (s *Server) handle(r *http.Request, op string, body []byte, readErr error, now time.Time) (any, *apiError) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		return nil, clientError("UnknownOperationException", "%s %s is not an ECS request", r.Method, r.URL.Path)
	}
	if readErr != nil {
		return nil, clientError("SerializationException", "reading the body: %v", readErr)
	}
	// Signatures are checked against the wall clock the SDK signs with, not
	// Options.Now, so tests may move the cluster's clock freely.
	if err := s.authenticate(r, body, time.Now()); err != nil {
		return nil, err
	}
	run, ok := operations[op]
	if !ok {
		return nil, clientError("UnknownOperationException", "operation %q is not implemented by ecsfake", r.Header.Get("X-Amz-Target"))
	}
	if ct := r.Header.Get("Content-Type"); ct != contentType {
		return nil, clientError("SerializationException", "Content-Type must be %s, not %q", contentType, ct)
	}
	if err := s.fireFault(op); err != nil {
		return nil, err
	}
	s.expire(now)
	return run(s, body)
}

func (s *Server) fireFault(op string) *apiError {
	fs := s.faults[op]
	if len(fs) == 0 {
		return nil
	}
	f := fs[0]
	if f.times > 0 {
		fs[0].times--
		if fs[0].times == 0 {
			s.faults[op] = fs[1:]
		}
	}
	return &apiError{status: f.status, code: f.code, message: f.message}
}

// decode reads a request document strictly: an unknown member is a
// SerializationException here, stricter than ECS may be, so that a
// misspelt field fails a test instead of being ignored.
func decode(body []byte, v any) *apiError {
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return clientError("SerializationException", "%v", err)
	}
	return nil
}

// authenticate checks the SigV4 signature: the credential scope names this
// server's key, region and the service ecs, the date is within the clock
// skew ECS allows, and the signature is the one the SDK's signer makes
// over the signed headers with the secret.
func (s *Server) authenticate(r *http.Request, body []byte, now time.Time) *apiError {
	h := r.Header.Get("Authorization")
	if h == "" {
		return &apiError{status: http.StatusBadRequest, code: "MissingAuthenticationTokenException", message: "Missing Authentication Token"}
	}
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return &apiError{status: http.StatusBadRequest, code: "IncompleteSignatureException", message: "Unsupported AWS 'algorithm'"}
	}
	var credential, signed, signature string
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			credential = v
		case "SignedHeaders":
			signed = v
		case "Signature":
			signature = v
		}
	}
	scope := strings.Split(credential, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" || signed == "" || signature == "" {
		return &apiError{status: http.StatusBadRequest, code: "IncompleteSignatureException", message: "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters."}
	}
	if scope[0] != s.keyID {
		return &apiError{status: http.StatusBadRequest, code: "UnrecognizedClientException", message: "The security token included in the request is invalid."}
	}
	if scope[2] != s.region || scope[3] != "ecs" {
		return &apiError{status: http.StatusBadRequest, code: "InvalidSignatureException", message: fmt.Sprintf("Credential should be scoped to a valid region and the service ecs, not %s/%s.", scope[2], scope[3])}
	}
	signedAt, err := time.Parse(amzDateFormat, r.Header.Get("X-Amz-Date"))
	if err != nil || signedAt.Format("20060102") != scope[1] {
		return &apiError{status: http.StatusBadRequest, code: "IncompleteSignatureException", message: "X-Amz-Date is missing or does not match the credential scope."}
	}
	if d := now.Sub(signedAt); d > maxClockSkew || d < -maxClockSkew {
		return &apiError{status: http.StatusBadRequest, code: "InvalidSignatureException", message: "Signature expired: " + r.Header.Get("X-Amz-Date") + " is not within 5 minutes of the server's time."}
	}
	if !s.signatureMatches(r, body, scope[2], strings.Split(signed, ";"), signedAt) {
		return &apiError{status: http.StatusBadRequest, code: "InvalidSignatureException", message: "The request signature we calculated does not match the signature you provided."}
	}
	return nil
}

func (s *Server) signatureMatches(r *http.Request, body []byte, region string, signedHeaders []string, signedAt time.Time) bool {
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
			if v := r.Header.Values(name); len(v) > 0 {
				req.Header[http.CanonicalHeaderKey(name)] = v
			}
		}
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: s.keyID, SecretAccessKey: s.secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "ecs", region, signedAt); err != nil {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(req.Header.Get("Authorization")), []byte(r.Header.Get("Authorization"))) == 1
}
