package awsenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/gantryhq/gantry/internal/apperr"
)

// AWS IAM authentication works as Vault's aws auth method and EKS's tokens
// do: the caller signs an sts:GetCallerIdentity request with its own
// credentials without sending it, and hands it to Gantry; Gantry sends it to
// STS, and STS, having checked the signature, says whose credentials signed
// it. Gantry never sees the caller's secret, and checks what it forwards so a
// token cannot make it call anything but GetCallerIdentity on STS.

// IdentityHeader is the HTTP request header carrying SignCallerIdentity's
// token.
const IdentityHeader = "X-Gantry-AWS-Identity"

// Limits on identity tokens.
const (
	// MaxClockSkew is how far a token's X-Amz-Date may be from Gantry's clock
	// (STS allows the same).
	MaxClockSkew = 15 * time.Minute
	// maxTokenLen bounds a token (a session token is a few kilobytes).
	maxTokenLen = 32 << 10
	// maxSTSResponse bounds what is read of STS's answer.
	maxSTSResponse = 1 << 20
)

const (
	stsVersion         = "2011-06-15"
	stsNamespace       = "https://sts.amazonaws.com/doc/2011-06-15/"
	callerIdentityBody = "Action=GetCallerIdentity&Version=" + stsVersion
	amzDateFormat      = "20060102T150405Z"
	signingAlgorithm   = "AWS4-HMAC-SHA256"
)

// signedRequest is what a token encodes (JSON, then standard base64).
type signedRequest struct {
	Method  string      `json:"method"`
	URL     string      `json:"url"`
	Headers headerValue `json:"headers"`
	Body    string      `json:"body"`
}

// headerValue reads headers as {"Name": ["v"]} or {"Name": "v"}, so
// clients in other languages may send either.
type headerValue map[string][]string

func (h *headerValue) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*h = make(headerValue, len(raw))
	for k, v := range raw {
		var list []string
		if err := json.Unmarshal(v, &list); err != nil {
			var one string
			if err := json.Unmarshal(v, &one); err != nil {
				return fmt.Errorf("header %s: neither a string nor a list of strings", k)
			}
			list = []string{one}
		}
		(*h)[k] = list
	}
	return nil
}

// SignCallerIdentity signs a POST sts:GetCallerIdentity request with cfg's
// credentials (SigV4, service sts, cfg's region) for stsEndpoint (empty:
// https://sts.REGION.amazonaws.com) and returns it as a token for
// IdentityHeader. The token is valid for MaxClockSkew.
func SignCallerIdentity(ctx context.Context, cfg aws.Config, stsEndpoint string) (string, error) {
	region := cfg.Region
	if region == "" {
		region = defaultRegion
	}
	if stsEndpoint == "" {
		stsEndpoint = "https://sts." + region + ".amazonaws.com"
	}
	u, err := parseEndpoint(stsEndpoint)
	if err != nil {
		return "", fmt.Errorf("signing GetCallerIdentity: STS endpoint: %w", err)
	}
	if u.Path == "" {
		u.Path = "/"
	}
	if cfg.Credentials == nil {
		return "", errors.New("signing GetCallerIdentity: no credentials")
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return "", fmt.Errorf("signing GetCallerIdentity: retrieving credentials: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(callerIdentityBody))
	if err != nil {
		return "", fmt.Errorf("signing GetCallerIdentity: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	sum := sha256.Sum256([]byte(callerIdentityBody))
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "sts", region, time.Now().UTC()); err != nil {
		return "", fmt.Errorf("signing GetCallerIdentity: %w", err)
	}
	b, err := json.Marshal(signedRequest{Method: req.Method, URL: req.URL.String(), Headers: headerValue(req.Header), Body: callerIdentityBody})
	if err != nil {
		return "", fmt.Errorf("signing GetCallerIdentity: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// Identity is the AWS principal that signed a token, as STS reports it.
type Identity struct {
	Account string // 12 digits
	ARN     string // arn:aws:iam::ACCOUNT:user/NAME, arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION, …
	UserID  string
}

// VerifyCallerIdentity checks a SignCallerIdentity token, forwards it to STS
// unchanged and returns who signed it. Whether that account may call Gantry
// is the caller's decision.
//
// Before anything leaves Gantry the token must be a POST of exactly
// GetCallerIdentity to the configured STS endpoint (AWS's own STS hosts when
// none is configured), signed with SigV4 for sts, dated within MaxClockSkew.
// Errors are *apperr.Error: Unauthorized for a token that is malformed, fails
// those checks or that STS refuses ("signature rejected by STS"),
// Unavailable when STS fails or throttles.
func (p *Provider) VerifyCallerIdentity(ctx context.Context, token string) (Identity, error) {
	req, err := p.checkToken(token)
	if err != nil {
		return Identity{}, err
	}
	resp, err := p.http.Do(req.WithContext(ctx))
	if err != nil {
		return Identity{}, apperr.New(apperr.Unavailable, "Could not reach STS to check the AWS identity (%v); try again.", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSTSResponse))
	if err != nil {
		return Identity{}, apperr.New(apperr.Unavailable, "Could not read STS's answer about the AWS identity (%v); try again.", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Code    string `xml:"Code"`
				Message string `xml:"Message"`
			} `xml:"Error"`
		}
		_ = xml.Unmarshal(body, &e)
		code, msg := e.Error.Code, e.Error.Message
		if code == "" {
			code = resp.Status
		}
		if resp.StatusCode >= 500 || code == "Throttling" {
			return Identity{}, apperr.New(apperr.Unavailable, "STS could not check the AWS identity now (%s); try again.", code)
		}
		return Identity{}, apperr.New(apperr.Unauthorized, "AWS identity signature rejected by STS: %s: %s", code, msg)
	}
	var out struct {
		XMLName xml.Name `xml:"https://sts.amazonaws.com/doc/2011-06-15/ GetCallerIdentityResponse"`
		Result  struct {
			Arn     string `xml:"Arn"`
			UserID  string `xml:"UserId"`
			Account string `xml:"Account"`
		} `xml:"GetCallerIdentityResult"`
	}
	if err := xml.Unmarshal(body, &out); err != nil || !accountID.MatchString(out.Result.Account) {
		return Identity{}, apperr.New(apperr.Unavailable, "STS answered GetCallerIdentity with something else; try again.")
	}
	return Identity{Account: out.Result.Account, ARN: out.Result.Arn, UserID: out.Result.UserID}, nil
}

// VerifyAccount is VerifyCallerIdentity returning only the account.
func (p *Provider) VerifyAccount(ctx context.Context, token string) (string, error) {
	id, err := p.VerifyCallerIdentity(ctx, token)
	return id.Account, err
}

// forwardedByTransport are signed headers never copied from a token: the
// transport sets them from the URL and the body, which the checks pinned.
var forwardedByTransport = []string{"host", "content-length"}

// checkToken decodes a token and builds the request to forward, refusing
// anything but a signed GetCallerIdentity for the configured STS.
func (p *Provider) checkToken(token string) (*http.Request, error) {
	refuse := func(format string, args ...any) error {
		return apperr.New(apperr.Unauthorized, "Invalid AWS identity in "+IdentityHeader+": "+format, args...)
	}
	if len(token) > maxTokenLen {
		return nil, refuse("longer than %d bytes", maxTokenLen)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(token))
	if err != nil {
		return nil, refuse("not base64")
	}
	var sr signedRequest
	if err := json.Unmarshal(raw, &sr); err != nil {
		return nil, refuse("not a JSON signed request")
	}
	if sr.Method != http.MethodPost {
		return nil, refuse("the method is %q, not POST", sr.Method)
	}
	u, err := url.Parse(sr.URL)
	if err != nil {
		return nil, refuse("bad URL")
	}
	if !p.allowedSTS(u) {
		return nil, refuse("%s is not this Gantry's STS endpoint", u.Redacted())
	}
	form, err := url.ParseQuery(sr.Body)
	if err != nil || len(form) != 2 || !slices.Equal(form["Action"], []string{"GetCallerIdentity"}) || !slices.Equal(form["Version"], []string{stsVersion}) {
		return nil, refuse("the body is not %s", callerIdentityBody)
	}
	h := make(http.Header, len(sr.Headers))
	for k, v := range sr.Headers {
		h[http.CanonicalHeaderKey(k)] = v
	}
	auth, err := parseAuthorization(h.Get("Authorization"))
	if err != nil {
		return nil, refuse("%v", err)
	}
	if auth.service != "sts" {
		return nil, refuse("signed for %q, not sts", auth.service)
	}
	for _, need := range []string{"host", "x-amz-date"} {
		if !slices.Contains(auth.signedHeaders, need) {
			return nil, refuse("%s is not signed", need)
		}
	}
	date, err := time.Parse(amzDateFormat, h.Get("X-Amz-Date"))
	if err != nil {
		return nil, refuse("no X-Amz-Date")
	}
	if date.Format("20060102") != auth.date {
		return nil, refuse("X-Amz-Date and the credential scope disagree")
	}
	if skew := p.now().Sub(date); skew > MaxClockSkew || skew < -MaxClockSkew {
		return nil, refuse("signed at %s, more than %s from now", date.Format(time.RFC3339), MaxClockSkew)
	}
	if cl := h.Get("Content-Length"); cl != "" && cl != fmt.Sprint(len(sr.Body)) {
		return nil, refuse("Content-Length is not the body's")
	}
	// Forward the signature and what it covers, nothing else.
	out := &http.Request{Method: http.MethodPost, URL: u, Host: u.Host, Header: http.Header{}}
	out.Header["Authorization"] = h.Values("Authorization")
	for _, name := range auth.signedHeaders {
		if !slices.Contains(forwardedByTransport, name) {
			out.Header[http.CanonicalHeaderKey(name)] = h.Values(name)
		}
	}
	out.ContentLength = int64(len(sr.Body))
	body := []byte(sr.Body)
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return out, nil
}

// awsSTSHost is STS's global host or a regional one.
var awsSTSHost = regexp.MustCompile(`^sts(\.[a-z]{2}(-[a-z]+)+-\d+)?\.amazonaws\.com$`)

// allowedSTS reports whether u is the configured STS endpoint, or AWS's own
// STS (https, global or regional host) when none is configured.
func (p *Provider) allowedSTS(u *url.URL) bool {
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return false
	}
	path := u.Path
	if path == "" {
		path = "/"
	}
	if p.stsURL == nil {
		return u.Scheme == "https" && awsSTSHost.MatchString(u.Host) && path == "/"
	}
	want := p.stsURL.Path
	if want == "" {
		want = "/"
	}
	return u.Scheme == p.stsURL.Scheme && strings.EqualFold(u.Host, p.stsURL.Host) && path == want
}

// authorization is what the checks read of a SigV4 Authorization header.
type authorization struct {
	date, service string
	signedHeaders []string
}

func parseAuthorization(h string) (authorization, error) {
	rest, ok := strings.CutPrefix(h, signingAlgorithm+" ")
	if !ok {
		return authorization{}, errors.New("no " + signingAlgorithm + " Authorization header")
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
	scope := strings.Split(credential, "/") // KEY/DATE/REGION/SERVICE/aws4_request
	if len(scope) != 5 || scope[4] != "aws4_request" || signed == "" || signature == "" {
		return authorization{}, errors.New("malformed Authorization header")
	}
	return authorization{date: scope[1], service: scope[3], signedHeaders: strings.Split(signed, ";")}, nil
}

// forwardClient sends tokens to STS: bounded in time, never following a
// redirect elsewhere.
func forwardClient() *http.Client {
	return &http.Client{
		Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
