package awsenv

import (
	"context"
	"fmt"
	"time"
)

// RoleEnv assumes roleARN, a role that is not an environment's admin role
// (the plan or apply role of an infrastructure unit), for one command, and
// returns the variables that give the command that session: AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION and AWS_DEFAULT_REGION.
//
// The session is named RoleSessionPrefix + sessionName (reduced to AWS's
// characters and length, as SessionName does), so CloudTrail ties what the
// command did to the plan or execution that ran it. It lasts duration,
// clamped to what AssumeRole accepts (MinSession to MaxSession): give the
// command's timeout, so the keys outlive the command. AWS refuses a duration
// beyond the role's MaxSessionDuration (one hour unless raised), and beyond
// one hour when Gantry itself runs as a role session.
//
// The region is the Provider's (Options.Region, else the default chain's,
// else us-east-1); a Terraform provider block naming a region overrides it.
//
// A malformed roleARN is refused before any AWS call, with an error wrapping
// ErrRoleARN. The variables hold the session's secrets: pass them to the
// command and nowhere else.
func (p *Provider) RoleEnv(ctx context.Context, roleARN, sessionName string, duration time.Duration) ([]string, error) {
	role, err := parseRoleARN(roleARN)
	if err != nil {
		return nil, fmt.Errorf("assuming a role for a command: %w", err)
	}
	c, err := p.assumeRole(ctx, role, p.region, SessionName(RoleSessionPrefix, sessionName), duration)
	if err != nil {
		return nil, err
	}
	return c.Env(), nil
}
