package awstest

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// MaxClockSkew is how far a signature's date may be from the server's clock.
const MaxClockSkew = 15 * time.Minute

const amzDateFormat = "20060102T150405Z"

// actions maps each implemented action to its service.
var actions = map[string]string{
	"AssumeRole":        "sts",
	"GetCallerIdentity": "sts",
	"PutRolePolicy":     "iam",
	"GetRolePolicy":     "iam",
}

var versions = map[string]string{"sts": "2011-06-15", "iam": "2010-05-08"}

var namespaces = map[string]string{"sts": STSNamespace, "iam": IAMNamespace}

// awsError is an error answer: status, AWS error code, message.
type awsError struct {
	status  int
	code    string
	message string
}

func (e *awsError) Error() string { return e.code + ": " + e.message }

func sender(status int, code, format string, args ...any) *awsError {
	return &awsError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

func accessDenied(p *principal, action, resource string) *awsError {
	return sender(http.StatusForbidden, "AccessDenied", "User: %s is not authorized to perform: %s on resource: %s with an explicit deny in an identity-based policy", p.arn, action, resource)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	call := Call{At: now}
	status, body, err := s.handle(r, now, &call)
	if err != nil {
		status = err.status
		call.Error = err.code
		kind := "Sender"
		if status >= 500 {
			kind = "Receiver"
		}
		body = errorResponse{
			XMLName:   xml.Name{Space: namespaces[call.Service], Local: "ErrorResponse"},
			Error:     errorBody{Type: kind, Code: err.code, Message: err.message},
			RequestID: requestID(),
		}
	}
	call.Status = status
	s.calls = append(s.calls, call)
	out, mErr := xml.Marshal(body)
	if mErr != nil {
		http.Error(w, mErr.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	// The SDK corrects its clock from Date when a signature is refused as
	// skewed, as it does with AWS.
	w.Header().Set("Date", now.UTC().Format(http.TimeFormat))
	w.Header().Set("X-Amzn-Requestid", requestID())
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// handle authenticates a request and runs its action, filling in call.
func (s *Server) handle(r *http.Request, now time.Time, call *Call) (int, any, *awsError) {
	call.Service = "sts"
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return 0, nil, sender(http.StatusBadRequest, "MalformedQueryString", "The request body could not be read.")
	}
	params := r.URL.Query()
	if r.Method == http.MethodPost {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return 0, nil, sender(http.StatusBadRequest, "MalformedQueryString", "%v", err)
		}
		for k, v := range form {
			params[k] = append(params[k], v...)
		}
	}
	call.Params = params
	call.Action = params.Get("Action")
	auth, authErr := parseAuthorization(r.Header.Get("Authorization"))
	service, known := actions[call.Action]
	switch {
	case known:
		call.Service = service
	case authErr == nil && auth.service == "iam":
		call.Service = "iam"
	}
	if authErr != nil {
		return 0, nil, authErr
	}
	call.AccessKeyID = auth.accessKeyID
	p, aErr := s.authenticate(r, body, auth, call.Service, now)
	if aErr != nil {
		return 0, nil, aErr
	}
	call.Caller = p.arn
	if !known {
		return 0, nil, sender(http.StatusBadRequest, "InvalidAction", "Could not find operation %s for version %s", call.Action, params.Get("Version"))
	}
	if v := params.Get("Version"); v != versions[service] {
		return 0, nil, sender(http.StatusBadRequest, "InvalidAction", "Could not find operation %s for version %s", call.Action, v)
	}
	switch call.Action {
	case "AssumeRole":
		return s.assumeRole(p, params, now)
	case "GetCallerIdentity":
		return s.getCallerIdentity(p)
	case "PutRolePolicy":
		return s.putRolePolicy(p, params)
	default: // GetRolePolicy
		return s.getRolePolicy(p, params)
	}
}

// authorization is a parsed SigV4 Authorization header.
type authorization struct {
	accessKeyID, date, region, service string
	signedHeaders                      []string
}

func parseAuthorization(h string) (authorization, *awsError) {
	if h == "" {
		return authorization{}, sender(http.StatusForbidden, "MissingAuthenticationToken", "Request is missing Authentication Token")
	}
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return authorization{}, sender(http.StatusBadRequest, "IncompleteSignature", "Unsupported AWS 'algorithm': '%s'", strings.Fields(h)[0])
	}
	var a authorization
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
		return authorization{}, sender(http.StatusBadRequest, "IncompleteSignature", "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters, with a Credential of KEY/DATE/REGION/SERVICE/aws4_request. Authorization=%s", h)
	}
	a.accessKeyID, a.date, a.region, a.service = scope[0], scope[1], scope[2], scope[3]
	a.signedHeaders = strings.Split(signed, ";")
	return a, nil
}

// authenticate finds the signer and checks its signature by signing the
// same request again with the SDK's signer and the secret the server holds.
func (s *Server) authenticate(r *http.Request, body []byte, a authorization, service string, now time.Time) (*principal, *awsError) {
	p := s.principals[a.accessKeyID]
	if p == nil {
		return nil, sender(http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid.")
	}
	if r.Header.Get("X-Amz-Security-Token") != p.token {
		return nil, sender(http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid.")
	}
	if a.service != service {
		return nil, sender(http.StatusForbidden, "SignatureDoesNotMatch", "Credential should be scoped to correct service: '%s'. ", service)
	}
	if service == "iam" && a.region != "us-east-1" {
		return nil, sender(http.StatusForbidden, "SignatureDoesNotMatch", "Credential should be scoped to a valid region. ")
	}
	amzDate := r.Header.Get("X-Amz-Date")
	signedAt, err := time.Parse(amzDateFormat, amzDate)
	if err != nil {
		return nil, sender(http.StatusBadRequest, "IncompleteSignature", "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
	}
	if signedAt.Format("20060102") != a.date {
		return nil, sender(http.StatusForbidden, "SignatureDoesNotMatch", "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%s'", a.date, signedAt.Format("20060102"))
	}
	nowStamp := now.UTC().Format(amzDateFormat)
	if signedAt.Before(now.Add(-MaxClockSkew)) {
		return nil, sender(http.StatusForbidden, "SignatureDoesNotMatch", "Signature expired: %s is now earlier than %s (%s - 15 min.)", amzDate, now.Add(-MaxClockSkew).UTC().Format(amzDateFormat), nowStamp)
	}
	if signedAt.After(now.Add(MaxClockSkew)) {
		return nil, sender(http.StatusForbidden, "SignatureDoesNotMatch", "Signature not yet current: %s is still later than %s (%s + 15 min.)", amzDate, now.Add(MaxClockSkew).UTC().Format(amzDateFormat), nowStamp)
	}
	if !signatureMatches(r, body, a, p, signedAt) {
		return nil, sender(http.StatusForbidden, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
	}
	if p.role != nil && !now.Before(p.expires) {
		return nil, sender(http.StatusForbidden, "ExpiredToken", "The security token included in the request is expired")
	}
	return p, nil
}

// signatureMatches rebuilds the request from the headers the client says it
// signed, signs it with p's secret and compares the Authorization headers
// (credential, signed headers and signature) in constant time.
func signatureMatches(r *http.Request, body []byte, a authorization, p *principal, signedAt time.Time) bool {
	req, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return false
	}
	for _, name := range a.signedHeaders {
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
	creds := aws.Credentials{AccessKeyID: p.accessKeyID, SecretAccessKey: p.secret, SessionToken: p.token}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), a.service, a.region, signedAt); err != nil {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(req.Header.Get("Authorization")), []byte(r.Header.Get("Authorization"))) == 1
}
