package awsenv_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/awsenv"
	"github.com/gantryhq/gantry/internal/awsenv/awstest"
)

// The provider runs as an IAM user of Gantry's account; environments are in
// another account, reached through an admin role with a path.
const (
	gantryAccount = "111111111111"
	envAccount    = "222222222222"
	clientAccount = "333333333333"
	adminRole     = "arn:aws:iam::222222222222:role/gantry/GantryAdmin"
)

type bundle struct {
	aws *awstest.Server
	p   *awsenv.Provider
	env awsenv.Env
}

func setup(t *testing.T, opts ...func(*awsenv.Options)) *bundle {
	t.Helper()
	fake := awstest.New(t)
	fake.AddRole(adminRole, 0)
	o := awsenv.Options{
		STSEndpoint: fake.URL,
		IAMEndpoint: fake.URL,
		Region:      awstest.Region,
		Credentials: awstest.Provider(fake.AddUser(gantryAccount, "gantry")),
	}
	for _, opt := range opts {
		opt(&o)
	}
	p, err := awsenv.New(t.Context(), o)
	require.NoError(t, err)
	return &bundle{aws: fake, p: p, env: awsenv.Env{Account: envAccount, Region: "eu-west-1", AdminRole: adminRole}}
}

// session is what the fake knows of credentials it issued.
func (b *bundle) session(t *testing.T, c awsenv.Credentials) awstest.Session {
	t.Helper()
	s, ok := b.aws.Session(c.AccessKeyID)
	require.True(t, ok, "the fake issued no session %s", c.AccessKeyID)
	return s
}

// stsAs is an STS client signing with granted credentials.
func (b *bundle) stsAs(c awsenv.Credentials) *sts.Client {
	return sts.NewFromConfig(b.aws.Config(aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken}))
}

func TestGrant(t *testing.T) {
	t.Parallel()

	t.Run("returns a session of the admin role lasting the allocation", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		start := time.Now()
		c, err := b.p.Grant(t.Context(), b.env, "alloc-1", 3*time.Hour)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(c.AccessKeyID, "ASIA"))
		require.NotEmpty(t, c.SecretAccessKey)
		require.NotEmpty(t, c.SessionToken)
		require.WithinDuration(t, start.Add(3*time.Hour), c.Expiration, 2*time.Second)
		require.Equal(t, "eu-west-1", c.Region)
		require.Equal(t, envAccount, c.Account)

		s := b.session(t, c)
		require.Equal(t, adminRole, s.RoleARN)
		require.Equal(t, "gantry-alloc-alloc-1", s.SessionName)
		require.Equal(t, c.SessionToken, s.SessionToken)
		require.NoError(t, b.aws.CheckSession(c.AccessKeyID, time.Now()))

		// The keys work, as the admin role.
		out, err := b.stsAs(c).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
		require.NoError(t, err)
		require.Equal(t, "arn:aws:sts::222222222222:assumed-role/GantryAdmin/gantry-alloc-alloc-1", *out.Arn)

		call := b.aws.CallsOf("AssumeRole")[0]
		require.Equal(t, "arn:aws:iam::111111111111:user/gantry", call.Caller)
		require.Equal(t, "10800", call.Params.Get("DurationSeconds"))
	})

	clamps := []struct {
		asked time.Duration
		want  int
	}{
		{time.Minute, 900},
		{15 * time.Minute, 900},
		{90*time.Minute + 500*time.Millisecond, 5401},
		{3 * time.Hour, 10800},
		{12 * time.Hour, 43200},
		{48 * time.Hour, 43200},
		{-time.Hour, 900},
	}
	for _, tc := range clamps {
		t.Run("asks "+tc.asked.String()+" as "+strconv.Itoa(tc.want)+"s", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			start := time.Now()
			c, err := b.p.Grant(t.Context(), b.env, "a1", tc.asked)
			require.NoError(t, err)
			require.Equal(t, strconv.Itoa(tc.want), b.aws.CallsOf("AssumeRole")[0].Params.Get("DurationSeconds"))
			require.WithinDuration(t, start.Add(time.Duration(tc.want)*time.Second), c.Expiration, 2*time.Second)
		})
	}

	names := []struct {
		name, asked, want string
	}{
		{"keeps AWS's characters", "a1_b+c=d,e.f@g-h", "gantry-alloc-a1_b+c=d,e.f@g-h"},
		{"replaces others, one per character", "alloc 1/ü:x", "gantry-alloc-alloc-1---x"},
		{"cuts to 64 characters", strings.Repeat("x", 100), "gantry-alloc-" + strings.Repeat("x", 51)},
		{"an empty name still makes a valid one", "", "gantry-alloc-"},
	}
	for _, tc := range names {
		t.Run("session name "+tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			c, err := b.p.Grant(t.Context(), b.env, tc.asked, time.Hour)
			require.NoError(t, err, "AWS (the fake) refused the session name")
			require.Equal(t, tc.want, b.session(t, c).SessionName)
			require.LessOrEqual(t, len(tc.want), 64)
		})
	}

	t.Run("refuses an admin role outside the environment's account", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		env := b.env
		env.Account = clientAccount
		_, err := b.p.Grant(t.Context(), env, "a1", time.Hour)
		require.ErrorContains(t, err, "is in account 222222222222")
		require.Empty(t, b.aws.Calls())
	})

	t.Run("refuses what is not a role ARN", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, arn := range []string{"", "GantryAdmin", "arn:aws:iam::222222222222:user/admin", "arn:aws:iam::2222:role/x", "arn:aws:sts::222222222222:role/x", "arn:aws:iam::222222222222:role/"} {
			env := b.env
			env.AdminRole = arn
			_, err := b.p.Grant(t.Context(), env, "a1", time.Hour)
			require.ErrorIs(t, err, awsenv.ErrRoleARN, arn)
		}
		require.Empty(t, b.aws.Calls())
	})

	t.Run("passes AWS's refusal on", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		env := b.env
		env.AdminRole = "arn:aws:iam::222222222222:role/Missing"
		_, err := b.p.Grant(t.Context(), env, "a1", time.Hour)
		var apiErr smithy.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, "AccessDenied", apiErr.ErrorCode())
		require.ErrorContains(t, err, "assuming arn:aws:iam::222222222222:role/Missing")
	})

	t.Run("fails, as AWS does, beyond the role's MaxSessionDuration", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		short := "arn:aws:iam::222222222222:role/Short"
		b.aws.AddRole(short, time.Hour)
		env := b.env
		env.AdminRole = short
		_, err := b.p.Grant(t.Context(), env, "a1", 3*time.Hour)
		require.ErrorContains(t, err, "MaxSessionDuration")
	})
}

func TestAdminCredentials(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := time.Now()
	c, err := b.p.AdminCredentials(t.Context(), b.env, 2*time.Hour)
	require.NoError(t, err)
	require.WithinDuration(t, start.Add(2*time.Hour), c.Expiration, 2*time.Second)
	name := b.session(t, c).SessionName
	require.True(t, strings.HasPrefix(name, awsenv.AdminSessionPrefix+"clean-"), name)
	require.Equal(t, "eu-west-1", c.Region)
}

func TestCredentials(t *testing.T) {
	t.Parallel()
	c := awsenv.Credentials{
		AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "s3cr3t", SessionToken: "t0ken",
		Expiration: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), Region: "eu-west-1", Account: envAccount,
	}

	t.Run("Env is what the AWS CLI reads", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, []string{
			"AWS_ACCESS_KEY_ID=ASIAEXAMPLE",
			"AWS_SECRET_ACCESS_KEY=s3cr3t",
			"AWS_SESSION_TOKEN=t0ken",
			"AWS_REGION=eu-west-1",
			"AWS_DEFAULT_REGION=eu-west-1",
		}, c.Env())
	})

	t.Run("printing and logging hide the secrets", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("granted", "creds", c)
		slog.New(slog.NewTextHandler(&buf, nil)).Info("granted", "creds", c)
		for _, s := range []string{buf.String(), c.String()} {
			require.Contains(t, s, "ASIAEXAMPLE")
			require.NotContains(t, s, "s3cr3t")
			require.NotContains(t, s, "t0ken")
		}
	})
}

func TestRevokeSessions(t *testing.T) {
	t.Parallel()

	t.Run("writes the documented policy on the role", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		at := time.Date(2014, 5, 7, 23, 47, 0, 0, time.UTC)
		require.NoError(t, b.p.RevokeSessions(t.Context(), b.env, at))

		want, err := os.ReadFile("testdata/revoke_policy.json")
		require.NoError(t, err)
		got, ok := b.aws.RolePolicy(adminRole, "AWSRevokeOlderSessions")
		require.True(t, ok)
		require.Equal(t, strings.TrimSpace(string(want)), got)

		// Written in the role's account, by a session of the role itself
		// (IAM acts on the caller's account), to the role's name without its path.
		put := b.aws.CallsOf("PutRolePolicy")
		require.Len(t, put, 1)
		require.Equal(t, "GantryAdmin", put[0].Params.Get("RoleName"))
		require.Equal(t, "AWSRevokeOlderSessions", put[0].Params.Get("PolicyName"))
		require.True(t, strings.HasPrefix(put[0].Caller, "arn:aws:sts::222222222222:assumed-role/GantryAdmin/gantry-admin-revoke-"), put[0].Caller)
	})

	t.Run("revokes the sessions issued before, not those after", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		granted, err := b.p.Grant(t.Context(), b.env, "a1", 3*time.Hour)
		require.NoError(t, err)
		require.NoError(t, b.p.RevokeSessions(t.Context(), b.env, time.Now()))

		require.ErrorIs(t, b.aws.CheckSession(granted.AccessKeyID, time.Now()), awstest.ErrRevoked)
		// Refused on the wire too: the granted keys can no longer act.
		_, err = b.stsAs(granted).AssumeRole(t.Context(), &sts.AssumeRoleInput{RoleArn: aws.String(adminRole), RoleSessionName: aws.String("escape")})
		var apiErr smithy.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, "AccessDenied", apiErr.ErrorCode())

		// Sessions assumed once RevokeSessions returned are not caught.
		next, err := b.p.Grant(t.Context(), b.env, "a2", time.Hour)
		require.NoError(t, err)
		require.NoError(t, b.aws.CheckSession(next.AccessKeyID, time.Now()))
		clean, err := b.p.AdminCredentials(t.Context(), b.env, time.Hour)
		require.NoError(t, err)
		require.NoError(t, b.aws.CheckSession(clean.AccessKeyID, time.Now()))
	})

	t.Run("rounds the cut-off up to the second and waits for it", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		before := time.Now().Truncate(time.Second).Add(500 * time.Millisecond)
		require.NoError(t, b.p.RevokeSessions(t.Context(), b.env, before))
		require.False(t, time.Now().Before(before.Truncate(time.Second).Add(time.Second)), "returned before the cut-off")
		doc, _ := b.aws.RolePolicy(adminRole, "AWSRevokeOlderSessions")
		cutoff, err := awsenv.ParseRevokePolicy(doc)
		require.NoError(t, err)
		require.Equal(t, before.UTC().Truncate(time.Second).Add(time.Second), cutoff)
	})

	t.Run("is idempotent and never moves the cut-off back", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		at := time.Now().Add(-time.Minute).Truncate(time.Second)
		require.NoError(t, b.p.RevokeSessions(t.Context(), b.env, at))
		want, _ := b.aws.RolePolicy(adminRole, "AWSRevokeOlderSessions")

		require.NoError(t, b.p.RevokeSessions(t.Context(), b.env, at))                 // retried
		require.NoError(t, b.p.RevokeSessions(t.Context(), b.env, at.Add(-time.Hour))) // late retry of an older call
		got, _ := b.aws.RolePolicy(adminRole, "AWSRevokeOlderSessions")
		require.Equal(t, want, got)
		require.Len(t, b.aws.CallsOf("PutRolePolicy"), 1)

		require.NoError(t, b.p.RevokeSessions(t.Context(), b.env, at.Add(30*time.Second)))
		got, _ = b.aws.RolePolicy(adminRole, "AWSRevokeOlderSessions")
		require.Equal(t, awsenv.RevokePolicy(at.Add(30*time.Second)), got)
	})

	t.Run("keeps a later cut-off the console wrote", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		console := `{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Action":["*"],"Resource":["*"],"Condition":{"DateLessThan":{"aws:TokenIssueTime":"` +
			time.Now().Add(-time.Second).UTC().Format("2006-01-02T15:04:05.000Z") + `"}}}]}`
		b.aws.PutRolePolicy(adminRole, "AWSRevokeOlderSessions", console)
		require.NoError(t, b.p.RevokeSessions(t.Context(), b.env, time.Now().Add(-time.Hour)))
		got, _ := b.aws.RolePolicy(adminRole, "AWSRevokeOlderSessions")
		require.Equal(t, console, got)
	})

	t.Run("replaces another policy under the name", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.aws.PutRolePolicy(adminRole, "AWSRevokeOlderSessions", `{"Version":"2012-10-17","Statement":[]}`)
		at := time.Now().Add(-time.Minute).Truncate(time.Second)
		require.NoError(t, b.p.RevokeSessions(t.Context(), b.env, at))
		got, _ := b.aws.RolePolicy(adminRole, "AWSRevokeOlderSessions")
		require.Equal(t, awsenv.RevokePolicy(at), got)
	})

	t.Run("stops waiting when the context ends", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(o *awsenv.Options) {
			o.Now = func() time.Time { return time.Now().Add(-time.Hour) } // the cut-off is an hour away
		})
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		err := b.p.RevokeSessions(ctx, b.env, time.Now())
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestParseRevokePolicy(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	got, err := awsenv.ParseRevokePolicy(awsenv.RevokePolicy(at))
	require.NoError(t, err)
	require.Equal(t, at, got)

	got, err = awsenv.ParseRevokePolicy(`{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Action":["*"],"Resource":["*"],"Condition":{"DateLessThan":{"aws:TokenIssueTime":"2030-01-02T03:04:05.250Z"}}}]}`)
	require.NoError(t, err)
	require.Equal(t, at.Add(250*time.Millisecond), got)

	for _, doc := range []string{
		`{`,
		`{"Statement":{"Effect":"Allow","Action":"*","Resource":"*","Condition":{"DateLessThan":{"aws:TokenIssueTime":"2030-01-02T03:04:05Z"}}}}`,
		`{"Statement":{"Effect":"Deny","Action":"s3:*","Resource":"*","Condition":{"DateLessThan":{"aws:TokenIssueTime":"2030-01-02T03:04:05Z"}}}}`,
		`{"Statement":{"Effect":"Deny","Action":"*","Resource":"*","Condition":{"DateGreaterThan":{"aws:TokenIssueTime":"2030-01-02T03:04:05Z"}}}}`,
		`{"Statement":{"Effect":"Deny","Action":"*","Resource":"*"}}`,
		`{"Statement":[]}`,
	} {
		_, err := awsenv.ParseRevokePolicy(doc)
		require.Error(t, err, doc)
	}
}
