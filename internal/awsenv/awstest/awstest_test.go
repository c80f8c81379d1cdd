package awstest_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/awsenv/awstest"
)

const (
	gantryAccount = "111111111111"
	envAccount    = "222222222222"
	adminRole     = "arn:aws:iam::222222222222:role/gantry/GantryAdmin"
)

type bundle struct {
	aws    *awstest.Server
	gantry aws.Credentials
}

func setup(t *testing.T) *bundle {
	t.Helper()
	fake := awstest.New(t)
	fake.AddRole(adminRole, 0)
	return &bundle{aws: fake, gantry: fake.AddUser(gantryAccount, "gantry")}
}

func (b *bundle) sts(c aws.Credentials) *sts.Client {
	return sts.NewFromConfig(b.aws.Config(c))
}

func (b *bundle) iam(c aws.Credentials) *iam.Client {
	return iam.NewFromConfig(b.aws.Config(c))
}

// assume returns a session of the admin role.
func (b *bundle) assume(t *testing.T, seconds int32) aws.Credentials {
	t.Helper()
	out, err := b.sts(b.gantry).AssumeRole(t.Context(), &sts.AssumeRoleInput{
		RoleArn: aws.String(adminRole), RoleSessionName: aws.String("test"), DurationSeconds: aws.Int32(seconds),
	})
	require.NoError(t, err)
	c := out.Credentials
	return aws.Credentials{AccessKeyID: *c.AccessKeyId, SecretAccessKey: *c.SecretAccessKey, SessionToken: *c.SessionToken}
}

// requireAWSError asserts the SDK error's AWS code and HTTP status.
func requireAWSError(t *testing.T, err error, code string, status int) {
	t.Helper()
	var apiErr smithy.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, code, apiErr.ErrorCode(), apiErr.ErrorMessage())
	var respErr *awshttp.ResponseError
	require.ErrorAs(t, err, &respErr)
	require.Equal(t, status, respErr.HTTPStatusCode())
}

func TestGetCallerIdentity(t *testing.T) {
	t.Parallel()

	t.Run("names a user", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		out, err := b.sts(b.gantry).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
		require.NoError(t, err)
		require.Equal(t, gantryAccount, *out.Account)
		require.Equal(t, "arn:aws:iam::111111111111:user/gantry", *out.Arn)
		require.True(t, strings.HasPrefix(*out.UserId, "AIDA"))
	})

	t.Run("names an assumed role session", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		out, err := b.sts(b.assume(t, 900)).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
		require.NoError(t, err)
		require.Equal(t, envAccount, *out.Account)
		require.Equal(t, "arn:aws:sts::222222222222:assumed-role/GantryAdmin/test", *out.Arn)
		require.True(t, strings.HasSuffix(*out.UserId, ":test"))
	})
}

func TestSignature(t *testing.T) {
	t.Parallel()

	t.Run("a wrong secret is SignatureDoesNotMatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		wrong := b.gantry
		wrong.SecretAccessKey = strings.Repeat("x", 40)
		_, err := b.sts(wrong).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
		requireAWSError(t, err, "SignatureDoesNotMatch", http.StatusForbidden)
		calls := b.aws.CallsOf("GetCallerIdentity")
		require.Len(t, calls, 1)
		require.Equal(t, "SignatureDoesNotMatch", calls[0].Error)
		require.Equal(t, wrong.AccessKeyID, calls[0].AccessKeyID)
	})

	t.Run("an unknown key is InvalidClientTokenId", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		unknown := aws.Credentials{AccessKeyID: "AKIAUNKNOWNUNKNOWN00", SecretAccessKey: "x"}
		_, err := b.sts(unknown).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
		requireAWSError(t, err, "InvalidClientTokenId", http.StatusForbidden)
	})

	t.Run("a session without its token is InvalidClientTokenId", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := b.assume(t, 900)
		c.SessionToken = ""
		_, err := b.sts(c).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
		requireAWSError(t, err, "InvalidClientTokenId", http.StatusForbidden)
	})

	t.Run("an unsigned request is MissingAuthenticationToken", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp, err := http.PostForm(b.aws.URL, url.Values{"Action": {"GetCallerIdentity"}, "Version": {"2011-06-15"}})
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
		require.Contains(t, string(body), `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>MissingAuthenticationToken</Code>`)
	})

	t.Run("a signature older than 15 minutes has expired", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.signedPost(t, b.gantry, time.Now().Add(-16*time.Minute))
		require.Equal(t, http.StatusForbidden, resp.status)
		require.Contains(t, resp.body, "<Code>SignatureDoesNotMatch</Code>")
		require.Contains(t, resp.body, "Signature expired")
	})

	t.Run("a signature from the future is not yet current", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.signedPost(t, b.gantry, time.Now().Add(16*time.Minute))
		require.Equal(t, http.StatusForbidden, resp.status)
		require.Contains(t, resp.body, "Signature not yet current")
	})

	t.Run("a body changed after signing does not match", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := b.signedRequest(t, b.gantry, time.Now(), "Action=GetCallerIdentity&Version=2011-06-15")
		req.Body = io.NopCloser(strings.NewReader("Action=GetCallerIdentity&Version=2011-06-16")) // same length
		resp := do(t, req)
		require.Equal(t, http.StatusForbidden, resp.status)
		require.Contains(t, resp.body, "<Code>SignatureDoesNotMatch</Code>")
	})

	t.Run("a correctly signed raw request is answered", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.signedPost(t, b.gantry, time.Now())
		require.Equal(t, http.StatusOK, resp.status, resp.body)
		require.Contains(t, resp.body, `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult><Arn>arn:aws:iam::111111111111:user/gantry</Arn>`)
	})

	t.Run("the SDK corrects its clock from Date, as with AWS", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.aws.SetNow(func() time.Time { return time.Now().Add(20 * time.Minute) })
		_, err := b.sts(b.gantry).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
		require.NoError(t, err)
		calls := b.aws.CallsOf("GetCallerIdentity")
		require.Len(t, calls, 2)
		require.Equal(t, "SignatureDoesNotMatch", calls[0].Error)
		require.Empty(t, calls[1].Error)
	})
}

type response struct {
	status int
	body   string
}

func (b *bundle) signedRequest(t *testing.T, c aws.Credentials, at time.Time, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.aws.URL+"/", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	sum := sha256.Sum256([]byte(body))
	require.NoError(t, v4.NewSigner().SignHTTP(t.Context(), c, req, hex.EncodeToString(sum[:]), "sts", awstest.Region, at))
	return req
}

func (b *bundle) signedPost(t *testing.T, c aws.Credentials, at time.Time) response {
	t.Helper()
	return do(t, b.signedRequest(t, c, at, "Action=GetCallerIdentity&Version=2011-06-15"))
}

func do(t *testing.T, req *http.Request) response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, body: string(body)}
}

func TestAssumeRole(t *testing.T) {
	t.Parallel()

	t.Run("issues a session it remembers", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		before := time.Now().Truncate(time.Second)
		out, err := b.sts(b.gantry).AssumeRole(t.Context(), &sts.AssumeRoleInput{
			RoleArn: aws.String(adminRole), RoleSessionName: aws.String("alloc-1"), DurationSeconds: aws.Int32(3 * 3600),
		})
		require.NoError(t, err)
		require.Equal(t, "arn:aws:sts::222222222222:assumed-role/GantryAdmin/alloc-1", *out.AssumedRoleUser.Arn)
		require.True(t, strings.HasPrefix(*out.Credentials.AccessKeyId, "ASIA"))
		require.WithinDuration(t, before.Add(3*time.Hour), *out.Credentials.Expiration, 2*time.Second)

		s, ok := b.aws.Session(*out.Credentials.AccessKeyId)
		require.True(t, ok)
		require.Equal(t, adminRole, s.RoleARN)
		require.Equal(t, "alloc-1", s.SessionName)
		require.Equal(t, envAccount, s.Account)
		require.Equal(t, *out.Credentials.SessionToken, s.SessionToken)
		require.Equal(t, s.Issued.Truncate(time.Second), s.Issued)
		require.True(t, out.Credentials.Expiration.Equal(s.Expiration))
		require.NoError(t, b.aws.CheckSession(s.AccessKeyID, time.Now()))
		require.ErrorIs(t, b.aws.CheckSession(s.AccessKeyID, s.Expiration), awstest.ErrExpired)
	})

	refusals := []struct {
		name   string
		in     sts.AssumeRoleInput
		code   string
		status int
	}{
		{"an unknown role", sts.AssumeRoleInput{RoleArn: aws.String("arn:aws:iam::222222222222:role/Other"), RoleSessionName: aws.String("s1")}, "AccessDenied", 403},
		{"a role ARN without its path", sts.AssumeRoleInput{RoleArn: aws.String("arn:aws:iam::222222222222:role/GantryAdmin"), RoleSessionName: aws.String("s1")}, "AccessDenied", 403},
		{"a session name with a space", sts.AssumeRoleInput{RoleArn: aws.String(adminRole), RoleSessionName: aws.String("a b")}, "ValidationError", 400},
		{"a one-character session name", sts.AssumeRoleInput{RoleArn: aws.String(adminRole), RoleSessionName: aws.String("a")}, "ValidationError", 400},
		{"a 65-character session name", sts.AssumeRoleInput{RoleArn: aws.String(adminRole), RoleSessionName: aws.String(strings.Repeat("a", 65))}, "ValidationError", 400},
		{"under 900 seconds", sts.AssumeRoleInput{RoleArn: aws.String(adminRole), RoleSessionName: aws.String("s1"), DurationSeconds: aws.Int32(899)}, "ValidationError", 400},
		{"over 12 hours", sts.AssumeRoleInput{RoleArn: aws.String(adminRole), RoleSessionName: aws.String("s1"), DurationSeconds: aws.Int32(43201)}, "ValidationError", 400},
	}
	for _, tc := range refusals {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			_, err := b.sts(b.gantry).AssumeRole(t.Context(), &tc.in)
			requireAWSError(t, err, tc.code, tc.status)
		})
	}

	t.Run("refuses more than the role's MaxSessionDuration", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		short := "arn:aws:iam::222222222222:role/Short"
		b.aws.AddRole(short, time.Hour)
		_, err := b.sts(b.gantry).AssumeRole(t.Context(), &sts.AssumeRoleInput{RoleArn: aws.String(short), RoleSessionName: aws.String("s1"), DurationSeconds: aws.Int32(3601)})
		requireAWSError(t, err, "ValidationError", 400)
		require.ErrorContains(t, err, "MaxSessionDuration")
	})

	t.Run("limits role chaining to one hour", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		session := b.assume(t, 900)
		in := &sts.AssumeRoleInput{RoleArn: aws.String(adminRole), RoleSessionName: aws.String("chained"), DurationSeconds: aws.Int32(3601)}
		_, err := b.sts(session).AssumeRole(t.Context(), in)
		requireAWSError(t, err, "ValidationError", 400)
		require.ErrorContains(t, err, "role chaining")
		in.DurationSeconds = aws.Int32(3600)
		_, err = b.sts(session).AssumeRole(t.Context(), in)
		require.NoError(t, err)
	})

	t.Run("an expired session is ExpiredToken", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		session := b.assume(t, 900)
		later := time.Now().Add(time.Hour)
		b.aws.SetNow(func() time.Time { return later })
		resp := b.signedPost(t, session, later)
		require.Equal(t, http.StatusForbidden, resp.status)
		require.Contains(t, resp.body, "<Code>ExpiredToken</Code>")

		// The SDK, signing with the real clock, corrects it from Date and
		// meets the same answer.
		_, err := b.sts(session).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
		requireAWSError(t, err, "ExpiredToken", http.StatusForbidden)
	})
}

func TestRolePolicy(t *testing.T) {
	t.Parallel()

	t.Run("put and get a policy, URL-encoded as IAM returns it", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		admin := b.iam(b.assume(t, 900))
		doc := `{"Version": "2012-10-17", "Statement": {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}}`
		_, err := admin.PutRolePolicy(t.Context(), &iam.PutRolePolicyInput{RoleName: aws.String("GantryAdmin"), PolicyName: aws.String("p1"), PolicyDocument: aws.String(doc)})
		require.NoError(t, err)
		out, err := admin.GetRolePolicy(t.Context(), &iam.GetRolePolicyInput{RoleName: aws.String("GantryAdmin"), PolicyName: aws.String("p1")})
		require.NoError(t, err)
		require.Equal(t, "GantryAdmin", *out.RoleName)
		require.True(t, strings.HasPrefix(*out.PolicyDocument, "%7B%22Version%22%3A%20%222012-10-17%22"), *out.PolicyDocument)
		decoded, err := url.PathUnescape(*out.PolicyDocument)
		require.NoError(t, err)
		require.Equal(t, doc, decoded)
		stored, ok := b.aws.RolePolicy(adminRole, "p1")
		require.True(t, ok)
		require.Equal(t, doc, stored)
		require.Equal(t, "iam", b.aws.CallsOf("PutRolePolicy")[0].Service)
	})

	t.Run("a missing policy is NoSuchEntity", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.iam(b.assume(t, 900)).GetRolePolicy(t.Context(), &iam.GetRolePolicyInput{RoleName: aws.String("GantryAdmin"), PolicyName: aws.String("none")})
		requireAWSError(t, err, "NoSuchEntity", http.StatusNotFound)
	})

	t.Run("roles of another account are not found", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.iam(b.gantry).PutRolePolicy(t.Context(), &iam.PutRolePolicyInput{RoleName: aws.String("GantryAdmin"), PolicyName: aws.String("p1"), PolicyDocument: aws.String(`{"Statement": []}`)})
		requireAWSError(t, err, "NoSuchEntity", http.StatusNotFound)
	})

	t.Run("a document that is not JSON is MalformedPolicyDocument", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.iam(b.assume(t, 900)).PutRolePolicy(t.Context(), &iam.PutRolePolicyInput{RoleName: aws.String("GantryAdmin"), PolicyName: aws.String("p1"), PolicyDocument: aws.String(`{`)})
		requireAWSError(t, err, "MalformedPolicyDocument", http.StatusBadRequest)
	})
}

func TestRevokePolicy(t *testing.T) {
	t.Parallel()

	policy := func(cutoff time.Time) string {
		return `{"Version": "2012-10-17", "Statement": {"Effect": "Deny", "Action": "*", "Resource": "*",
			"Condition": {"DateLessThan": {"aws:TokenIssueTime": "` + cutoff.UTC().Format(time.RFC3339) + `"}}}}`
	}

	t.Run("denies sessions issued before the cut-off, but not GetCallerIdentity", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		old := b.assume(t, 900)
		cutoff := time.Now().Truncate(time.Second).Add(time.Second)
		b.aws.PutRolePolicy(adminRole, "AWSRevokeOlderSessions", policy(cutoff))
		require.ErrorIs(t, b.aws.CheckSession(old.AccessKeyID, time.Now()), awstest.ErrRevoked)

		_, err := b.sts(old).AssumeRole(t.Context(), &sts.AssumeRoleInput{RoleArn: aws.String(adminRole), RoleSessionName: aws.String("again")})
		requireAWSError(t, err, "AccessDenied", http.StatusForbidden)
		require.ErrorContains(t, err, "explicit deny")
		_, err = b.iam(old).GetRolePolicy(t.Context(), &iam.GetRolePolicyInput{RoleName: aws.String("GantryAdmin"), PolicyName: aws.String("AWSRevokeOlderSessions")})
		requireAWSError(t, err, "AccessDenied", http.StatusForbidden)
		_, err = b.sts(old).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
		require.NoError(t, err)
	})

	t.Run("spares sessions issued at or after the cut-off", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.aws.PutRolePolicy(adminRole, "AWSRevokeOlderSessions", policy(time.Now().Add(-time.Minute)))
		fresh := b.assume(t, 900)
		require.NoError(t, b.aws.CheckSession(fresh.AccessKeyID, time.Now()))
		_, err := b.iam(fresh).GetRolePolicy(t.Context(), &iam.GetRolePolicyInput{RoleName: aws.String("GantryAdmin"), PolicyName: aws.String("AWSRevokeOlderSessions")})
		require.NoError(t, err)
	})

	t.Run("issue times are whole seconds, so a cut-off in the same second revokes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		session := b.assume(t, 900)
		s, _ := b.aws.Session(session.AccessKeyID)
		b.aws.PutRolePolicy(adminRole, "AWSRevokeOlderSessions", policy(s.Issued))
		require.NoError(t, b.aws.CheckSession(session.AccessKeyID, time.Now()), "DateLessThan is strict")
		b.aws.PutRolePolicy(adminRole, "AWSRevokeOlderSessions", policy(s.Issued.Add(time.Second)))
		require.ErrorIs(t, b.aws.CheckSession(session.AccessKeyID, time.Now()), awstest.ErrRevoked)
	})

	t.Run("the console's variant counts; other policies do not", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		session := b.assume(t, 900)
		later := time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000Z")
		b.aws.PutRolePolicy(adminRole, "other", `{"Version": "2012-10-17", "Statement": [{"Effect": "Deny", "Action": "s3:*", "Resource": "*",
			"Condition": {"DateLessThan": {"aws:TokenIssueTime": "`+later+`"}}}]}`)
		require.NoError(t, b.aws.CheckSession(session.AccessKeyID, time.Now()))
		b.aws.PutRolePolicy(adminRole, "console", `{"Version": "2012-10-17", "Statement": [{"Effect": "Deny", "Action": ["*"], "Resource": ["*"],
			"Condition": {"DateLessThan": {"aws:TokenIssueTime": "`+later+`"}}}]}`)
		require.ErrorIs(t, b.aws.CheckSession(session.AccessKeyID, time.Now()), awstest.ErrRevoked)
	})

	t.Run("users are not sessions", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.aws.CheckSession(b.gantry.AccessKeyID, time.Now()))
		require.ErrorIs(t, b.aws.CheckSession("ASIANOSUCHKEY0000000", time.Now()), awstest.ErrUnknownKey)
		require.False(t, errors.Is(b.aws.CheckSession(b.gantry.AccessKeyID, time.Now()), awstest.ErrRevoked))
	})
}
