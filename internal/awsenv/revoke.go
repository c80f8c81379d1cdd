package awsenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
)

// RevokePolicyName is the inline policy AWS's console attaches to a role for
// "Revoke active sessions"; Gantry writes the same one.
const RevokePolicyName = "AWSRevokeOlderSessions"

// revokeSessionLength is how long the session that writes the policy lasts.
const revokeSessionLength = MinSession

// RevokeSessions makes every session of env's admin role issued before
// before stop working, the way AWS documents ("Revoke IAM role temporary
// security credentials"): an inline policy RevokePolicyName on the role that
// denies every action to tokens issued before a time.
//
// The cut-off is before rounded up to a whole second, so a session issued
// within that second is revoked too, whatever precision AWS keeps issue times
// at; RevokeSessions then waits for the cut-off to pass (at most a second),
// so a session assumed after it returns, for cleanup or the next allocation,
// is not caught. AWS's clock, not Gantry's, dates sessions: keep the host's
// clock synchronised.
//
// IAM acts on the caller's own account, so the policy is written by a
// session of the admin role itself. The policy is per role: every
// environment sharing the admin role loses its older sessions.
//
// It is idempotent and never moves the cut-off back: when the role already
// carries a later cut-off (a retried call with an old before), it leaves it.
func (p *Provider) RevokeSessions(ctx context.Context, env Env, before time.Time) error {
	role, err := env.role()
	if err != nil {
		return err
	}
	cutoff := before.UTC().Truncate(time.Second)
	if cutoff.Before(before) {
		cutoff = cutoff.Add(time.Second)
	}
	admin, err := p.assume(ctx, Env{Account: env.Account, Region: p.region, AdminRole: env.AdminRole}, p.adminSessionName("revoke"), revokeSessionLength)
	if err != nil {
		return fmt.Errorf("revoking sessions of %s: %w", role.arn, err)
	}
	as := func(o *iam.Options) {
		o.Credentials = credentials.NewStaticCredentialsProvider(admin.AccessKeyID, admin.SecretAccessKey, admin.SessionToken)
	}
	current, err := p.revokeCutoff(ctx, role, as)
	if err != nil {
		return err
	}
	if current.Before(cutoff) {
		_, err = p.iam.PutRolePolicy(ctx, &iam.PutRolePolicyInput{
			RoleName:       aws.String(role.name),
			PolicyName:     aws.String(RevokePolicyName),
			PolicyDocument: aws.String(RevokePolicy(cutoff)),
		}, as)
		if err != nil {
			return fmt.Errorf("revoking sessions of %s: putting %s: %w", role.arn, RevokePolicyName, err)
		}
	}
	if wait := cutoff.Sub(p.now()); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return fmt.Errorf("revoking sessions of %s: waiting for the cut-off: %w", role.arn, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// revokeCutoff reads the cut-off of the role's RevokePolicyName policy; zero
// when there is none or it is not of the documented shape.
func (p *Provider) revokeCutoff(ctx context.Context, role roleARN, as func(*iam.Options)) (time.Time, error) {
	out, err := p.iam.GetRolePolicy(ctx, &iam.GetRolePolicyInput{
		RoleName:   aws.String(role.name),
		PolicyName: aws.String(RevokePolicyName),
	}, as)
	var missing *iamtypes.NoSuchEntityException
	if errors.As(err, &missing) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("revoking sessions of %s: reading %s: %w", role.arn, RevokePolicyName, err)
	}
	// IAM returns policy documents URL-encoded (RFC 3986).
	doc, err := url.PathUnescape(aws.ToString(out.PolicyDocument))
	if err != nil {
		return time.Time{}, nil
	}
	t, _ := ParseRevokePolicy(doc)
	return t, nil
}

// revokePolicy is the document of AWS's documentation, field for field.
type revokePolicy struct {
	Version   string          `json:"Version"`
	Statement revokeStatement `json:"Statement"`
}

type revokeStatement struct {
	Effect    string `json:"Effect"`
	Action    string `json:"Action"`
	Resource  string `json:"Resource"`
	Condition struct {
		DateLessThan struct {
			TokenIssueTime string `json:"aws:TokenIssueTime"`
		} `json:"DateLessThan"`
	} `json:"Condition"`
}

// RevokePolicy is the documented policy denying everything to sessions
// issued before cutoff (written to the second, in UTC).
func RevokePolicy(cutoff time.Time) string {
	var p revokePolicy
	p.Version = "2012-10-17"
	p.Statement.Effect = "Deny"
	p.Statement.Action = "*"
	p.Statement.Resource = "*"
	p.Statement.Condition.DateLessThan.TokenIssueTime = cutoff.UTC().Format(time.RFC3339)
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		panic(err) // fixed structs of strings always marshal
	}
	return string(b)
}

// ParseRevokePolicy returns the cut-off of a revoke policy: the documented
// document RevokePolicy writes, or the console's variant (a one-statement
// array, ["*"] lists, milliseconds); an error for any other policy.
func ParseRevokePolicy(doc string) (time.Time, error) {
	var p struct {
		Statement json.RawMessage
	}
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		return time.Time{}, fmt.Errorf("not a revoke policy: %w", err)
	}
	type statement struct {
		Effect    string
		Action    json.RawMessage
		Resource  json.RawMessage
		Condition map[string]map[string]json.RawMessage
	}
	var s statement
	if err := json.Unmarshal(p.Statement, &s); err != nil {
		var list []statement
		if err := json.Unmarshal(p.Statement, &list); err != nil || len(list) != 1 {
			return time.Time{}, errors.New("not a revoke policy: not one statement")
		}
		s = list[0]
	}
	if s.Effect != "Deny" || !isStar(s.Action) || !isStar(s.Resource) || len(s.Condition) != 1 || len(s.Condition["DateLessThan"]) != 1 {
		return time.Time{}, errors.New("not a revoke policy: not Deny * on * with one DateLessThan condition")
	}
	var at string
	if raw, ok := s.Condition["DateLessThan"]["aws:TokenIssueTime"]; !ok || json.Unmarshal(raw, &at) != nil {
		return time.Time{}, errors.New("not a revoke policy: no aws:TokenIssueTime string")
	}
	t, err := time.Parse(time.RFC3339, at) // fractional seconds are accepted too
	if err != nil {
		return time.Time{}, fmt.Errorf("not a revoke policy: %w", err)
	}
	return t, nil
}

// isStar reports whether a policy element is "*" or ["*"].
func isStar(raw json.RawMessage) bool {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s == "*"
	}
	var list []string
	return json.Unmarshal(raw, &list) == nil && len(list) == 1 && list[0] == "*"
}
