// Package awstest is a small STS and IAM inside a test, for real
// aws-sdk-go-v2 clients (and Gantry's forwarded identity requests) pointed at
// it with BaseEndpoint. It speaks the query protocol of both services as AWS
// documents it: form-encoded POSTs in, XML in the services' namespaces out,
// ErrorResponse documents with AWS's codes and statuses.
//
// Every request must carry a valid SigV4 signature: the server recomputes it
// with the SDK's signer from the secret it issued and compares. It knows
//
//   - users (AddUser): long-term AKIA… keys of arn:aws:iam::ACCOUNT:user/NAME;
//   - roles (AddRole), which any known principal may assume;
//   - the sessions AssumeRole issued (ASIA… keys with a session token), which
//     it keeps, with their role, issue time and expiry.
//
// Implemented actions: sts:AssumeRole, sts:GetCallerIdentity,
// iam:PutRolePolicy, iam:GetRolePolicy. Like IAM, the IAM actions act on
// roles of the caller's own account. Of policies it evaluates only the shape
// of AWS's "revoke active sessions" policy (Deny * on * when
// aws:TokenIssueTime is before a date); a session it revokes is refused every
// action but GetCallerIdentity, which AWS answers whatever the policies say.
// Issue times are kept to the whole second, the coarsest AWS could keep them,
// so a cut-off that is not rounded up shows.
//
// Both services answer on one URL; the action (and the service in the
// signature's credential scope) says which is meant.
package awstest

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Region is the region tests sign with.
const Region = "us-east-1"

// Namespaces of the services' XML documents.
const (
	STSNamespace = "https://sts.amazonaws.com/doc/2011-06-15/"
	IAMNamespace = "https://iam.amazonaws.com/doc/2010-05-08/"
)

// DefaultMaxSession is the MaxSessionDuration AddRole gives a role when none
// is asked for. AWS's own default is one hour; tests mostly want long
// allocations to work.
const DefaultMaxSession = 12 * time.Hour

// Errors of CheckSession.
var (
	ErrUnknownKey = errors.New("awstest: no such access key")
	ErrExpired    = errors.New("awstest: the session has expired")
	ErrRevoked    = errors.New("awstest: the session is denied by its role's revoke policy")
)

// Server is the fake STS and IAM.
type Server struct {
	// URL is the endpoint of both services, for BaseEndpoint.
	URL string

	srv *httptest.Server

	mu         sync.Mutex
	now        func() time.Time
	principals map[string]*principal // by access key id
	roles      map[string]*role      // by account + "/" + name
	calls      []Call
}

// Call is one request the server answered.
type Call struct {
	Service     string // "sts" or "iam"
	Action      string
	Params      url.Values // the form, Action and Version included
	AccessKeyID string     // "" when the request was not signed
	Caller      string     // the signer's ARN, "" when it was not recognised
	Status      int
	Error       string // the AWS error code, "" on success
	At          time.Time
}

// Session is what AssumeRole issued.
type Session struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	RoleARN         string
	SessionName     string
	Account         string
	Issued          time.Time // to the second
	Expiration      time.Time
}

type principal struct {
	accessKeyID, secret, token string
	account, arn, userID       string
	// role sessions only
	role        *role
	sessionName string
	issued      time.Time
	expires     time.Time
}

type role struct {
	arn, account, name, id string
	maxSession             time.Duration
	policies               map[string]string // inline, by name, as put
}

// New starts a server that stops when t ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{now: time.Now, principals: map[string]*principal{}, roles: map[string]*role{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	s.URL = s.srv.URL
	return s
}

// SetNow replaces the server's clock (it dates sessions, checks signing
// times and expiries).
func (s *Server) SetNow(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// AddUser creates the IAM user arn:aws:iam::ACCOUNT:user/NAME with an access
// key and returns the key.
func (s *Server) AddUser(account, name string) aws.Credentials {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &principal{
		accessKeyID: "AKIA" + randomID(16),
		secret:      randomSecret(),
		account:     account,
		arn:         "arn:aws:iam::" + account + ":user/" + name,
		userID:      "AIDA" + randomID(17),
	}
	s.principals[p.accessKeyID] = p
	return aws.Credentials{AccessKeyID: p.accessKeyID, SecretAccessKey: p.secret, Source: "awstest"}
}

// Provider wraps credentials for an SDK client.
func Provider(c aws.Credentials) aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken)
}

// Config is an SDK configuration signing with c in Region, with every
// service's endpoint set to this server.
func (s *Server) Config(c aws.Credentials) aws.Config {
	return aws.Config{Region: Region, Credentials: Provider(c), BaseEndpoint: aws.String(s.URL)}
}

// AddRole creates a role from its ARN (arn:aws:iam::ACCOUNT:role/[PATH/]NAME)
// that any principal may assume for up to maxSession (0:
// DefaultMaxSession).
func (s *Server) AddRole(arn string, maxSession time.Duration) {
	account, name, ok := parseRoleARN(arn)
	if !ok {
		panic("awstest: not a role ARN: " + arn)
	}
	if maxSession == 0 {
		maxSession = DefaultMaxSession
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roles[account+"/"+name] = &role{arn: arn, account: account, name: name, id: "AROA" + randomID(17), maxSession: maxSession, policies: map[string]string{}}
}

// PutRolePolicy attaches an inline policy to a role directly, as an operator
// would in the console.
func (s *Server) PutRolePolicy(roleARN, name, document string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustRole(roleARN).policies[name] = document
}

// RolePolicy returns an inline policy of a role as it was put (not
// URL-encoded).
func (s *Server) RolePolicy(roleARN, name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	doc, ok := s.mustRole(roleARN).policies[name]
	return doc, ok
}

func (s *Server) mustRole(arn string) *role {
	account, name, _ := parseRoleARN(arn)
	r := s.roles[account+"/"+name]
	if r == nil || r.arn != arn {
		panic("awstest: no role " + arn)
	}
	return r
}

// Calls returns the requests answered so far, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// CallsOf returns the requests for one action.
func (s *Server) CallsOf(action string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Action == action {
			out = append(out, c)
		}
	}
	return out
}

// Session returns the session AssumeRole issued with an access key.
func (s *Server) Session(accessKeyID string) (Session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.principals[accessKeyID]
	if p == nil || p.role == nil {
		return Session{}, false
	}
	return Session{
		AccessKeyID: p.accessKeyID, SecretAccessKey: p.secret, SessionToken: p.token,
		RoleARN: p.role.arn, SessionName: p.sessionName, Account: p.account,
		Issued: p.issued, Expiration: p.expires,
	}, true
}

// CheckSession says whether the credentials with accessKeyID may act at
// time at: nil, ErrUnknownKey, ErrExpired, or ErrRevoked when an inline
// policy of the role, as it stands now, revokes the session.
func (s *Server) CheckSession(accessKeyID string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.principals[accessKeyID]
	if p == nil {
		return ErrUnknownKey
	}
	if p.role == nil {
		return nil
	}
	if !at.Before(p.expires) {
		return ErrExpired
	}
	if p.revoked() {
		return ErrRevoked
	}
	return nil
}

// revoked reports whether an inline policy of the session's role denies
// everything to tokens issued when this one was.
func (p *principal) revoked() bool {
	if p.role == nil {
		return false
	}
	for _, doc := range p.role.policies {
		if cutoff, ok := revokeCutoff(doc); ok && p.issued.Before(cutoff) {
			return true
		}
	}
	return false
}

var roleARNPattern = regexp.MustCompile(`^arn:aws[a-z-]*:iam::(\d{12}):role/(?:[\x21-\x7e]*/)?([\w+=,.@-]{1,64})$`)

func parseRoleARN(arn string) (account, name string, ok bool) {
	m := roleARNPattern.FindStringSubmatch(arn)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// randomID is n characters of A–Z and 2–7, as AWS's key and principal ids.
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

func randomToken() string {
	b := make([]byte, 300)
	_, _ = rand.Read(b)
	return "IQoJb3JpZ2luX2Vj" + base64.StdEncoding.EncodeToString(b)
}

func requestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// uriEncode encodes as RFC 3986 (every byte but A–Z a–z 0–9 - . _ ~), as
// IAM encodes the policy documents it returns.
func uriEncode(s string) string {
	var b strings.Builder
	for i := range len(s) {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
