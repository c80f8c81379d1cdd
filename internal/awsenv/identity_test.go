package awsenv_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/awsenv"
	"github.com/gantryhq/gantry/internal/awsenv/awstest"
)

// token is a decoded identity token, to read and tamper with.
type token struct {
	Method  string              `json:"method"`
	URL     string              `json:"url"`
	Headers map[string][]string `json:"headers"`
	Body    string              `json:"body"`
}

func decode(t *testing.T, s string) token {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	var tok token
	require.NoError(t, json.Unmarshal(raw, &tok))
	return tok
}

func (tok token) encode(t *testing.T) string {
	t.Helper()
	raw, err := json.Marshal(tok)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(raw)
}

// sign makes a token as a Gantry client would, with a user of the client
// account.
func (b *bundle) sign(t *testing.T, endpoint string) (string, aws.Credentials) {
	t.Helper()
	client := b.aws.AddUser(clientAccount, "ci-runner")
	tok, err := awsenv.SignCallerIdentity(t.Context(), b.aws.Config(client), endpoint)
	require.NoError(t, err)
	return tok, client
}

// requireRefused asserts a 401 error, and that nothing reached STS when
// forwarded is false.
func (b *bundle) requireRefused(t *testing.T, err error, forwarded bool, contains string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, apperr.Unauthorized, apperr.CodeOf(err), err.Error())
	require.ErrorContains(t, err, contains)
	if !forwarded {
		require.Empty(t, b.aws.CallsOf("GetCallerIdentity"), "the token reached STS")
	}
}

func TestSignCallerIdentity(t *testing.T) {
	t.Parallel()

	t.Run("signs a POST of GetCallerIdentity for STS", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s, client := b.sign(t, b.aws.URL)
		tok := decode(t, s)
		require.Equal(t, "POST", tok.Method)
		require.Equal(t, b.aws.URL+"/", tok.URL)
		require.Equal(t, "Action=GetCallerIdentity&Version=2011-06-15", tok.Body)
		auth := tok.Headers["Authorization"][0]
		require.True(t, strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+client.AccessKeyID+"/"), auth)
		require.Contains(t, auth, "/us-east-1/sts/aws4_request")
		require.Contains(t, auth, "SignedHeaders=content-length;content-type;host;x-amz-date,")
		require.NotContains(t, s, client.SecretAccessKey)
	})

	t.Run("defaults to the STS endpoint of the region", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cfg := b.aws.Config(b.aws.AddUser(clientAccount, "ci"))
		cfg.Region = "eu-west-1"
		s, err := awsenv.SignCallerIdentity(t.Context(), cfg, "")
		require.NoError(t, err)
		tok := decode(t, s)
		require.Equal(t, "https://sts.eu-west-1.amazonaws.com/", tok.URL)
		require.Contains(t, tok.Headers["Authorization"][0], "/eu-west-1/sts/aws4_request")
	})

	t.Run("carries a session's token", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c, err := b.p.Grant(t.Context(), b.env, "a1", time.Hour)
		require.NoError(t, err)
		s, err := awsenv.SignCallerIdentity(t.Context(), b.aws.Config(aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken}), b.aws.URL)
		require.NoError(t, err)
		require.Equal(t, []string{c.SessionToken}, decode(t, s).Headers["X-Amz-Security-Token"])
	})
}

func TestVerifyCallerIdentity(t *testing.T) {
	t.Parallel()

	t.Run("admits a correctly signed token and names its account", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s, client := b.sign(t, b.aws.URL)
		id, err := b.p.VerifyCallerIdentity(t.Context(), s)
		require.NoError(t, err)
		require.Equal(t, clientAccount, id.Account)
		require.Equal(t, "arn:aws:iam::333333333333:user/ci-runner", id.ARN)
		require.True(t, strings.HasPrefix(id.UserID, "AIDA"))

		calls := b.aws.CallsOf("GetCallerIdentity")
		require.Len(t, calls, 1)
		require.Equal(t, client.AccessKeyID, calls[0].AccessKeyID)
		require.Equal(t, http.StatusOK, calls[0].Status)

		account, err := b.p.VerifyAccount(t.Context(), s)
		require.NoError(t, err)
		require.Equal(t, clientAccount, account)
	})

	t.Run("admits a role session's token", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c, err := b.p.Grant(t.Context(), b.env, "a1", time.Hour)
		require.NoError(t, err)
		s, err := awsenv.SignCallerIdentity(t.Context(), b.aws.Config(aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken}), b.aws.URL)
		require.NoError(t, err)
		id, err := b.p.VerifyCallerIdentity(t.Context(), s)
		require.NoError(t, err)
		require.Equal(t, envAccount, id.Account)
		require.Equal(t, "arn:aws:sts::222222222222:assumed-role/GantryAdmin/gantry-alloc-a1", id.ARN)
	})

	t.Run("headers may be single strings", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s, _ := b.sign(t, b.aws.URL)
		tok := decode(t, s)
		flat := map[string]any{"method": tok.Method, "url": tok.URL, "body": tok.Body, "headers": map[string]string{}}
		for k, v := range tok.Headers {
			flat["headers"].(map[string]string)[strings.ToLower(k)] = v[0]
		}
		raw, err := json.Marshal(flat)
		require.NoError(t, err)
		id, err := b.p.VerifyCallerIdentity(t.Context(), base64.StdEncoding.EncodeToString(raw))
		require.NoError(t, err)
		require.Equal(t, clientAccount, id.Account)
	})

	t.Run("rejects a tampered signature: STS refuses it, 401", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s, _ := b.sign(t, b.aws.URL)
		tok := decode(t, s)
		auth := tok.Headers["Authorization"][0]
		last := auth[len(auth)-1]
		flipped := byte('0')
		if last == '0' {
			flipped = '1'
		}
		tok.Headers["Authorization"] = []string{auth[:len(auth)-1] + string(flipped)}
		_, err := b.p.VerifyCallerIdentity(t.Context(), tok.encode(t))
		b.requireRefused(t, err, true, "signature rejected by STS")
		require.ErrorContains(t, err, "SignatureDoesNotMatch")
		require.Equal(t, "SignatureDoesNotMatch", b.aws.CallsOf("GetCallerIdentity")[0].Error)
	})

	t.Run("rejects a signed header changed after signing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s, _ := b.sign(t, b.aws.URL)
		tok := decode(t, s)
		tok.Headers["Content-Type"] = []string{"application/x-www-form-urlencoded"}
		_, err := b.p.VerifyCallerIdentity(t.Context(), tok.encode(t))
		b.requireRefused(t, err, true, "signature rejected by STS")
	})

	t.Run("rejects another account's key under the same signature", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s, client := b.sign(t, b.aws.URL)
		other := b.aws.AddUser(clientAccount, "other")
		tok := decode(t, s)
		tok.Headers["Authorization"] = []string{strings.Replace(tok.Headers["Authorization"][0], client.AccessKeyID, other.AccessKeyID, 1)}
		_, err := b.p.VerifyCallerIdentity(t.Context(), tok.encode(t))
		b.requireRefused(t, err, true, "signature rejected by STS")
	})

	hosts := []struct{ name, endpoint string }{
		{"another host", "http://169.254.169.254"},
		{"the STS host on another port", "http://127.0.0.1:1"},
		{"AWS's STS when another is configured", "https://sts.amazonaws.com"},
	}
	for _, tc := range hosts {
		t.Run("rejects a token for "+tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			s, _ := b.sign(t, tc.endpoint)
			_, err := b.p.VerifyCallerIdentity(t.Context(), s)
			b.requireRefused(t, err, false, "is not this Gantry's STS endpoint")
		})
	}

	t.Run("rejects a token signed more than 15 minutes ago", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(o *awsenv.Options) {
			o.Now = func() time.Time { return time.Now().Add(16 * time.Minute) }
		})
		s, _ := b.sign(t, b.aws.URL)
		_, err := b.p.VerifyCallerIdentity(t.Context(), s)
		b.requireRefused(t, err, false, "more than 15m0s from now")
	})

	t.Run("rejects a token dated in the future", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(o *awsenv.Options) {
			o.Now = func() time.Time { return time.Now().Add(-16 * time.Minute) }
		})
		s, _ := b.sign(t, b.aws.URL)
		_, err := b.p.VerifyCallerIdentity(t.Context(), s)
		b.requireRefused(t, err, false, "more than 15m0s from now")
	})

	t.Run("admits a token signed 14 minutes ago", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(o *awsenv.Options) {
			o.Now = func() time.Time { return time.Now().Add(14 * time.Minute) }
		})
		s, _ := b.sign(t, b.aws.URL)
		_, err := b.p.VerifyCallerIdentity(t.Context(), s)
		require.NoError(t, err)
	})

	mutations := []struct {
		name     string
		mutate   func(*token)
		contains string
	}{
		{"another action", func(tok *token) { tok.Body = "Action=AssumeRole&Version=2011-06-15" }, "the body is not"},
		{"an action with extra parameters", func(tok *token) {
			tok.Body = "Action=GetCallerIdentity&Version=2011-06-15&RoleArn=arn:aws:iam::222222222222:role/x"
		}, "the body is not"},
		{"the action twice", func(tok *token) { tok.Body = "Action=GetCallerIdentity&Action=GetCallerIdentity&Version=2011-06-15" }, "the body is not"},
		{"another version", func(tok *token) { tok.Body = "Action=GetCallerIdentity&Version=2010-05-08" }, "the body is not"},
		{"a GET", func(tok *token) { tok.Method = "GET" }, "not POST"},
		{"a query string", func(tok *token) { tok.URL += "?Action=AssumeRole" }, "not this Gantry's STS endpoint"},
		{"another path", func(tok *token) { tok.URL += "admin" }, "not this Gantry's STS endpoint"},
		{"user info in the URL", func(tok *token) { tok.URL = strings.Replace(tok.URL, "http://", "http://x@", 1) }, "not this Gantry's STS endpoint"},
		{"an unsigned X-Amz-Date", func(tok *token) {
			tok.Headers["Authorization"] = []string{strings.Replace(tok.Headers["Authorization"][0], ";x-amz-date", "", 1)}
		}, "x-amz-date is not signed"},
		{"a signature for another service", func(tok *token) {
			tok.Headers["Authorization"] = []string{strings.Replace(tok.Headers["Authorization"][0], "/sts/", "/iam/", 1)}
		}, `signed for "iam"`},
		{"no Authorization", func(tok *token) { delete(tok.Headers, "Authorization") }, "no AWS4-HMAC-SHA256 Authorization header"},
		{"no X-Amz-Date", func(tok *token) { delete(tok.Headers, "X-Amz-Date") }, "no X-Amz-Date"},
		{"a Content-Length that is not the body's", func(tok *token) { tok.Headers["Content-Length"] = []string{"9999"} }, "Content-Length"},
	}
	for _, tc := range mutations {
		t.Run("rejects "+tc.name+" before forwarding", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			s, _ := b.sign(t, b.aws.URL)
			tok := decode(t, s)
			tc.mutate(&tok)
			_, err := b.p.VerifyCallerIdentity(t.Context(), tok.encode(t))
			b.requireRefused(t, err, false, tc.contains)
		})
	}

	t.Run("rejects what is not a token", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, s := range []string{"", "not base64!", base64.StdEncoding.EncodeToString([]byte("not json")), strings.Repeat("A", 40<<10)} {
			_, err := b.p.VerifyCallerIdentity(t.Context(), s)
			b.requireRefused(t, err, false, "Invalid AWS identity")
		}
	})

	t.Run("STS failing is Unavailable, not a rejection", func(t *testing.T) {
		t.Parallel()
		sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Receiver</Type><Code>ServiceUnavailable</Code><Message>down</Message></Error><RequestId>1</RequestId></ErrorResponse>`))
		}))
		t.Cleanup(sts.Close)
		b := setup(t, func(o *awsenv.Options) { o.STSEndpoint = sts.URL })
		s, _ := b.sign(t, sts.URL)
		_, err := b.p.VerifyCallerIdentity(t.Context(), s)
		require.Equal(t, apperr.Unavailable, apperr.CodeOf(err), err.Error())
	})
}

// With no STS endpoint configured, tokens may name AWS's own STS hosts only.
// (Checked without forwarding: these tests do not reach AWS.)
func TestVerifyCallerIdentityAWSHosts(t *testing.T) {
	t.Parallel()
	fake := awstest.New(t)
	client := fake.AddUser(clientAccount, "ci")
	p, err := awsenv.New(t.Context(), awsenv.Options{Region: "eu-west-1", Credentials: awstest.Provider(fake.AddUser(gantryAccount, "gantry"))})
	require.NoError(t, err)

	cases := []struct {
		endpoint string
		ok       bool
	}{
		{"https://sts.amazonaws.com", true},
		{"https://sts.eu-west-1.amazonaws.com", true},
		{"https://sts.us-gov-west-1.amazonaws.com", true},
		{"https://sts.ap-southeast-2.amazonaws.com/", true},
		{"http://sts.amazonaws.com", false},
		{"https://sts.amazonaws.com:8443", false},
		{"https://sts.amazonaws.com.evil.example", false},
		{"https://evilsts.amazonaws.com", false},
		{"https://sts.eu-west-1.amazonaws.com.evil.example", false},
		{"https://s3.amazonaws.com", false},
		{"https://sts.amazonaws.com/x", false},
		{"https://127.0.0.1", false},
	}
	for _, tc := range cases {
		cfg := fake.Config(client)
		cfg.Region = "eu-west-1"
		s, err := awsenv.SignCallerIdentity(t.Context(), cfg, tc.endpoint)
		require.NoError(t, err)
		err = p.CheckToken(s)
		if tc.ok {
			require.NoError(t, err, tc.endpoint)
		} else {
			require.ErrorContains(t, err, "not this Gantry's STS endpoint", tc.endpoint)
		}
	}
}
