// Package awsenv is the adapter for environments of kind aws: an AWS account
// and region that Gantry reaches through an admin role it may assume.
//
//   - Grant assumes the admin role for one allocation (sts:AssumeRole, session
//     length = the allocation's length) and hands out the session's keys.
//   - RevokeSessions makes every session of the admin role issued before a
//     time stop working, with AWS's documented "revoke active sessions"
//     mechanism: an inline policy AWSRevokeOlderSessions on the role denying
//     everything to tokens issued earlier (see revoke.go).
//   - AdminCredentials gives the cleanup command a session of its own.
//   - RoleEnv assumes any other role (a Terraform plan or apply role) for one
//     command and gives the command's environment its keys (see role.go).
//   - SignCallerIdentity and VerifyCallerIdentity are the two halves of AWS
//     IAM authentication of Gantry's callers (see identity.go).
//
// Every call goes through the real aws-sdk-go-v2 clients; tests point them at
// internal/awsenv/awstest, a small STS and IAM speaking the documented wire
// protocol.
//
// What the admin role needs: a trust policy letting Gantry's own principal
// assume it, a MaxSessionDuration at least as long as the longest allocation
// (AWS's default is one hour), and iam:GetRolePolicy and iam:PutRolePolicy on
// itself. Gantry should run with an IAM user's keys or another principal that
// is not itself a role session: AWS limits sessions obtained by role chaining
// to one hour, whatever the role allows.
package awsenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// Session limits of sts:AssumeRole.
const (
	MinSession = 15 * time.Minute
	MaxSession = 12 * time.Hour
)

// Session name prefixes, so CloudTrail tells the sessions apart. A granted
// session's name never starts with AdminSessionPrefix.
const (
	GrantSessionPrefix = "gantry-alloc-"
	AdminSessionPrefix = "gantry-admin-"
	RoleSessionPrefix  = "gantry-infra-"
)

// defaultRegion signs STS calls when neither Options nor the environment name
// a region (it is the region of STS's global endpoint).
const defaultRegion = "us-east-1"

// Options configure a Provider.
type Options struct {
	// STSEndpoint and IAMEndpoint replace AWS's endpoints (a VPC endpoint, or
	// a test server); empty: AWS's own for Region.
	STSEndpoint string
	IAMEndpoint string
	// Region of the STS calls; empty: the default chain's, else us-east-1.
	Region string
	// Credentials are Gantry's own; nil: the SDK's default chain.
	Credentials aws.CredentialsProvider
	// Now is Gantry's clock (the age of identity tokens, the wait after a
	// revocation, admin session names); nil: time.Now.
	Now func() time.Time
}

// Provider calls STS and IAM for aws environments.
type Provider struct {
	sts    *sts.Client
	iam    *iam.Client
	region string
	stsURL *url.URL // the configured STS endpoint, nil for AWS's own
	now    func() time.Time
	http   *http.Client // forwards signed identity requests to STS
}

// New builds a Provider. It makes no AWS call.
func New(ctx context.Context, o Options) (*Provider, error) {
	var load []func(*config.LoadOptions) error
	if o.Region != "" {
		load = append(load, config.WithRegion(o.Region))
	}
	if o.Credentials != nil {
		load = append(load, config.WithCredentialsProvider(o.Credentials))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = defaultRegion
	}
	p := &Provider{region: cfg.Region, now: o.Now, http: forwardClient()}
	if p.now == nil {
		p.now = time.Now
	}
	if o.STSEndpoint != "" {
		if p.stsURL, err = parseEndpoint(o.STSEndpoint); err != nil {
			return nil, fmt.Errorf("STS endpoint: %w", err)
		}
	}
	if o.IAMEndpoint != "" {
		if _, err := parseEndpoint(o.IAMEndpoint); err != nil {
			return nil, fmt.Errorf("IAM endpoint: %w", err)
		}
	}
	p.sts = sts.NewFromConfig(cfg, func(so *sts.Options) {
		if o.STSEndpoint != "" {
			so.BaseEndpoint = aws.String(o.STSEndpoint)
		}
	})
	p.iam = iam.NewFromConfig(cfg, func(io *iam.Options) {
		if o.IAMEndpoint != "" {
			io.BaseEndpoint = aws.String(o.IAMEndpoint)
			// IAM is global: requests are signed for its partition's home
			// region, which the SDK only works out for AWS's own endpoint.
			io.Region = iamSigningRegion(cfg.Region)
		}
	})
	return p, nil
}

func parseEndpoint(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q is not an http(s)://host[:port][/path] URL", s)
	}
	return u, nil
}

func iamSigningRegion(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "cn-north-1"
	case strings.HasPrefix(region, "us-gov-"):
		return "us-gov-west-1"
	default:
		return "us-east-1"
	}
}

// Env is one aws environment.
type Env struct {
	Account   string // 12 digits; when set it must be the admin role's account
	Region    string
	AdminRole string // ARN of the role Gantry assumes
}

// Credentials are one session of an environment's admin role.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	Expiration      time.Time
	Region          string
	Account         string
}

// Env returns the variables the AWS CLI and SDKs read, for a command's
// environment.
func (c Credentials) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + c.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + c.SecretAccessKey,
		"AWS_SESSION_TOKEN=" + c.SessionToken,
		"AWS_REGION=" + c.Region,
		"AWS_DEFAULT_REGION=" + c.Region,
	}
}

// String names the credentials without their secrets.
func (c Credentials) String() string {
	return fmt.Sprintf("aws session %s (account %s, %s, until %s)", c.AccessKeyID, c.Account, c.Region, c.Expiration.UTC().Format(time.RFC3339))
}

// LogValue keeps the secret and the session token out of logs.
func (c Credentials) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("access_key_id", c.AccessKeyID),
		slog.String("account", c.Account),
		slog.String("region", c.Region),
		slog.Time("expiration", c.Expiration),
	)
}

// Grant assumes env's admin role for one allocation. The session lasts
// duration, clamped to what AssumeRole accepts (MinSession to MaxSession);
// its name is GrantSessionPrefix + sessionName, reduced to AWS's characters
// and length.
func (p *Provider) Grant(ctx context.Context, env Env, sessionName string, duration time.Duration) (Credentials, error) {
	return p.assume(ctx, env, SessionName(GrantSessionPrefix, sessionName), duration)
}

// AdminCredentials assumes env's admin role for Gantry itself (the cleanup
// command), in a session named AdminSessionPrefix + the time.
func (p *Provider) AdminCredentials(ctx context.Context, env Env, duration time.Duration) (Credentials, error) {
	return p.assume(ctx, env, p.adminSessionName("clean"), duration)
}

func (p *Provider) adminSessionName(purpose string) string {
	return SessionName(AdminSessionPrefix, purpose+"-"+p.now().UTC().Format("20060102T150405Z"))
}

func (p *Provider) assume(ctx context.Context, env Env, sessionName string, duration time.Duration) (Credentials, error) {
	role, err := env.role()
	if err != nil {
		return Credentials{}, err
	}
	if env.Region == "" {
		return Credentials{}, fmt.Errorf("aws environment %s: no region", role.arn)
	}
	return p.assumeRole(ctx, role, env.Region, sessionName, duration)
}

// assumeRole calls sts:AssumeRole; region is what the credentials are for
// (their Env), not where STS is called.
func (p *Provider) assumeRole(ctx context.Context, role roleARN, region, sessionName string, duration time.Duration) (Credentials, error) {
	out, err := p.sts.AssumeRole(ctx, &sts.AssumeRoleInput{
		RoleArn:         aws.String(role.arn),
		RoleSessionName: aws.String(sessionName),
		DurationSeconds: aws.Int32(DurationSeconds(duration)),
	})
	if err != nil {
		return Credentials{}, fmt.Errorf("assuming %s as %s: %w", role.arn, sessionName, err)
	}
	c := out.Credentials
	if c == nil || c.AccessKeyId == nil || c.SecretAccessKey == nil || c.SessionToken == nil || c.Expiration == nil {
		return Credentials{}, fmt.Errorf("assuming %s: STS answered without credentials", role.arn)
	}
	return Credentials{
		AccessKeyID:     *c.AccessKeyId,
		SecretAccessKey: *c.SecretAccessKey,
		SessionToken:    *c.SessionToken,
		Expiration:      *c.Expiration,
		Region:          region,
		Account:         role.account,
	}, nil
}

// DurationSeconds is the session length AssumeRole is asked for: d rounded
// up to a second and clamped to [MinSession, MaxSession].
func DurationSeconds(d time.Duration) int32 {
	d = min(max(d, MinSession), MaxSession)
	return int32(math.Ceil(d.Seconds()))
}

// sessionNameChars is what AWS accepts in a role session name.
var sessionNameChars = regexp.MustCompile(`[^\w+=,.@-]`)

// SessionName is prefix + name with every character AWS refuses in a role
// session name replaced by '-', cut to AWS's 64 characters.
func SessionName(prefix, name string) string {
	s := sessionNameChars.ReplaceAllString(prefix+name, "-")
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// roleARN is a parsed IAM role ARN:
// arn:PARTITION:iam::ACCOUNT:role/[PATH/]NAME.
type roleARN struct {
	arn, partition, account, path, name string
}

var (
	accountID = regexp.MustCompile(`^\d{12}$`)
	roleName  = regexp.MustCompile(`^[\w+=,.@-]{1,64}$`)
)

// ErrRoleARN is wrapped by errors about an environment's admin_role.
var ErrRoleARN = errors.New("not an IAM role ARN")

func parseRoleARN(s string) (roleARN, error) {
	parts := strings.SplitN(s, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || parts[2] != "iam" || parts[3] != "" || !accountID.MatchString(parts[4]) {
		return roleARN{}, fmt.Errorf("%q: %w (arn:aws:iam::123456789012:role/NAME)", s, ErrRoleARN)
	}
	resource, ok := strings.CutPrefix(parts[5], "role/")
	if !ok {
		return roleARN{}, fmt.Errorf("%q: %w: the resource is not role/…", s, ErrRoleARN)
	}
	i := strings.LastIndexByte(resource, '/')
	path, name := "/"+resource[:i+1], resource[i+1:]
	if !roleName.MatchString(name) {
		return roleARN{}, fmt.Errorf("%q: %w: bad role name %q", s, ErrRoleARN, name)
	}
	return roleARN{arn: s, partition: parts[1], account: parts[4], path: path, name: name}, nil
}

func (e Env) role() (roleARN, error) {
	r, err := parseRoleARN(e.AdminRole)
	if err != nil {
		return roleARN{}, fmt.Errorf("aws environment admin_role: %w", err)
	}
	if e.Account != "" && e.Account != r.account {
		return roleARN{}, fmt.Errorf("aws environment %s: admin_role %s is in account %s", e.Account, r.arn, r.account)
	}
	return r, nil
}
