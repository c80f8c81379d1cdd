package mailtest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/mail/mailtest"
)

const raw = "From: Gantry <gantry@example.com>\r\nTo: ada@example.com\r\nCc: Grace <grace@example.org>\r\nSubject: =?utf-8?q?d=C3=A9ploiement?=\r\n\r\nVote.\r\n"

// client is the real SDK client for fake, signing with creds in eu-west-1.
func client(fake *mailtest.SES, creds aws.CredentialsProvider, opts ...func(*sesv2.Options)) *sesv2.Client {
	return sesv2.NewFromConfig(aws.Config{Region: "eu-west-1", Credentials: creds, BaseEndpoint: aws.String(fake.URL)}, opts...)
}

func rawInput(data string) *sesv2.SendEmailInput {
	return &sesv2.SendEmailInput{Content: &types.EmailContent{Raw: &types.RawMessage{Data: []byte(data)}}}
}

func TestSES_SendEmail(t *testing.T) {
	t.Parallel()

	t.Run("takes envelope from the headers without Destination", func(t *testing.T) {
		t.Parallel()
		fake := mailtest.NewSES(t)
		fake.VerifyIdentity("gantry@example.com")
		out, err := client(fake, fake.Credentials()).SendEmail(t.Context(), rawInput(raw))
		require.NoError(t, err)
		require.NotEmpty(t, *out.MessageId)

		got := fake.Messages()
		require.Len(t, got, 1)
		require.Equal(t, "gantry@example.com", got[0].From)
		require.Equal(t, []string{"ada@example.com", "grace@example.org"}, got[0].To)
		require.Equal(t, "déploiement", got[0].Subject)
		require.Equal(t, "Vote.\r\n", got[0].Body)
		require.Equal(t, raw, string(got[0].Raw))
		creds, err := fake.Credentials().Retrieve(t.Context())
		require.NoError(t, err)
		require.Equal(t, []mailtest.SESCall{{
			Method: http.MethodPost, Path: "/v2/email/outbound-emails", AccessKeyID: creds.AccessKeyID,
			Region: "eu-west-1", Status: http.StatusOK, MessageID: *out.MessageId,
		}}, fake.Calls())
	})

	t.Run("takes envelope from the request", func(t *testing.T) {
		t.Parallel()
		fake := mailtest.NewSES(t)
		fake.VerifyIdentity("bounces.example.com")
		in := rawInput(raw)
		in.FromEmailAddress = aws.String("ops@bounces.example.com")
		in.Destination = &types.Destination{ToAddresses: []string{"eve@example.net"}, BccAddresses: []string{"audit@example.com"}}
		_, err := client(fake, fake.Credentials()).SendEmail(t.Context(), in)
		require.NoError(t, err)
		got := fake.Messages()[0]
		require.Equal(t, "ops@bounces.example.com", got.From)
		require.Equal(t, []string{"eve@example.net", "audit@example.com"}, got.To)
	})

	refused := []struct {
		name   string
		verify string
		creds  aws.CredentialsProvider // nil: the fake's
		// wrongSecret signs with the fake's key id and another secret;
		// service signs again for another service.
		wrongSecret bool
		service     string
		in          *sesv2.SendEmailInput
		status      int
		code        string
		msg         string
	}{
		{
			name: "unverified From", verify: "example.org", in: rawInput(raw),
			status: 400, code: "MessageRejected",
			msg: "Email address is not verified. The following identities failed the check in region EU-WEST-1: gantry@example.com",
		},
		{
			name: "unsigned", creds: aws.AnonymousCredentials{}, in: rawInput(raw),
			status: 403, code: "MissingAuthenticationTokenException", msg: "Missing Authentication Token",
		},
		{
			name: "unknown key", creds: credentials.NewStaticCredentialsProvider("AKIAAAAAAAAAAAAAAAAA", "secret", ""), in: rawInput(raw),
			status: 403, code: "UnrecognizedClientException", msg: "The security token included in the request is invalid.",
		},
		{
			name: "a wrong secret", in: rawInput(raw), wrongSecret: true,
			status: 403, code: "InvalidSignatureException",
			msg: "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.",
		},
		{
			name: "a signature for another service", in: rawInput(raw), service: "email",
			status: 403, code: "InvalidSignatureException", msg: "Credential should be scoped to correct service: 'ses'.",
		},
		{
			name: "Simple content", verify: "example.com",
			in: &sesv2.SendEmailInput{
				FromEmailAddress: aws.String("gantry@example.com"),
				Destination:      &types.Destination{ToAddresses: []string{"ada@example.com"}},
				Content: &types.EmailContent{Simple: &types.Message{
					Subject: &types.Content{Data: aws.String("Vote")}, Body: &types.Body{Text: &types.Content{Data: aws.String("Vote.")}},
				}},
			},
			status: 400, code: "BadRequestException", msg: "mailtest: only Raw content is implemented",
		},
		{
			name: "no recipients", verify: "example.com", in: rawInput("From: gantry@example.com\r\nSubject: x\r\n\r\nx\r\n"),
			status: 400, code: "BadRequestException",
		},
		{
			name: "a line over 1000 characters", verify: "example.com", in: rawInput(raw + strings.Repeat("x", 1001) + "\r\n"),
			status: 400, code: "MessageRejected", msg: "Message contains a line longer than 1000 characters.",
		},
		{
			name: "more than 50 recipients", verify: "example.com",
			in: func() *sesv2.SendEmailInput {
				in := rawInput(raw)
				in.Destination = &types.Destination{ToAddresses: slices.Repeat([]string{"ada@example.com"}, 51)}
				return in
			}(),
			status: 400, code: "MessageRejected", msg: "Recipient count exceeds 50.",
		},
	}
	for _, tc := range refused {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			t.Parallel()
			fake := mailtest.NewSES(t)
			if tc.verify != "" {
				fake.VerifyIdentity(tc.verify)
			}
			creds := tc.creds
			if creds == nil {
				creds = fake.Credentials()
			}
			if tc.wrongSecret {
				c, err := creds.Retrieve(t.Context())
				require.NoError(t, err)
				creds = credentials.NewStaticCredentialsProvider(c.AccessKeyID, "wrong"+c.SecretAccessKey, "")
			}
			var opts []func(*sesv2.Options)
			if tc.service != "" {
				c, err := creds.Retrieve(t.Context())
				require.NoError(t, err)
				opts = append(opts, func(o *sesv2.Options) { o.HTTPClient = resign{c: c, service: tc.service} })
			}
			_, err := client(fake, creds, opts...).SendEmail(t.Context(), tc.in)
			var apiErr smithy.APIError
			require.ErrorAs(t, err, &apiErr)
			require.Equal(t, tc.code, apiErr.ErrorCode())
			if tc.msg != "" {
				require.Equal(t, tc.msg, apiErr.ErrorMessage())
			}
			var respErr *smithyhttp.ResponseError
			require.ErrorAs(t, err, &respErr)
			require.Equal(t, tc.status, respErr.HTTPStatusCode())
			require.Empty(t, fake.Messages())
			require.Equal(t, tc.code, fake.Calls()[0].Error)
		})
	}
}

// resign signs each request again, for another service, before sending it.
type resign struct {
	c       aws.Credentials
	service string
}

func (r resign) Do(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.Header.Del("Authorization")
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), r.c, req, hex.EncodeToString(sum[:]), r.service, "eu-west-1", time.Now()); err != nil {
		return nil, err
	}
	return http.DefaultClient.Do(req)
}
