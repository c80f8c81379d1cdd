package mail_test

import (
	"errors"
	"io"
	"mime"
	"mime/multipart"
	netmail "net/mail"
	"regexp"
	"strings"
	"testing"
	"time"

	sestypes "github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/mail"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
)

type sesBundle struct {
	fake   *mailtest.SES
	sender *mail.SES
}

// setupSES starts an in-test SES where example.com is a verified identity
// and builds a sender for it, in eu-west-1, sending as from.
func setupSES(t *testing.T, from string) *sesBundle {
	t.Helper()
	fake := mailtest.NewSES(t)
	fake.VerifyIdentity("example.com")
	s, err := mail.NewSES(t.Context(), mail.SESOptions{
		Region:      "eu-west-1",
		Endpoint:    fake.URL,
		From:        from,
		Credentials: fake.Credentials(),
	})
	require.NoError(t, err)
	return &sesBundle{fake: fake, sender: s}
}

func TestSES_TextAndHTML(t *testing.T) {
	t.Parallel()

	b := setupSES(t, "Gantry <gantry@example.com>")
	text := "Plan for eu-west-1 is ready: déploiement #42.\nOpen https://gantry.example.com/infra/executions/7 to vote.\n" + strings.Repeat("long ", 40) + "\n"
	html := `<p>Plan for eu-west-1 is ready: déploiement #42. Open <a href="https://gantry.example.com/infra/executions/7">the execution</a> to vote.</p>` + "\n"
	subject := "Vote on déploiement #42"
	before := time.Now().Add(-time.Second)
	err := b.sender.Send(t.Context(), mail.Message{
		To:      []string{"Ada Lovelace <ada@example.com>", "grace@example.org"},
		Subject: subject,
		Text:    text,
		HTML:    html,
	})
	require.NoError(t, err)

	calls := b.fake.Calls()
	require.Len(t, calls, 1)
	require.Equal(t, "eu-west-1", calls[0].Region)
	require.Equal(t, 200, calls[0].Status)
	require.NotEmpty(t, calls[0].MessageID)

	msgs := b.fake.Messages()
	require.Len(t, msgs, 1)
	got := msgs[0]
	require.Equal(t, "gantry@example.com", got.From, "envelope sender")
	require.Equal(t, []string{"ada@example.com", "grace@example.org"}, got.To, "envelope recipients")
	require.Equal(t, subject, got.Subject)

	msg := parse(t, got.Raw)
	from, err := netmail.ParseAddress(msg.Header.Get("From"))
	require.NoError(t, err)
	require.Equal(t, &netmail.Address{Name: "Gantry", Address: "gantry@example.com"}, from)
	to, err := msg.Header.AddressList("To")
	require.NoError(t, err)
	require.Equal(t, []*netmail.Address{{Name: "Ada Lovelace", Address: "ada@example.com"}, {Address: "grace@example.org"}}, to)
	decoded, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	require.NoError(t, err)
	require.Equal(t, subject, decoded)
	date, err := msg.Header.Date()
	require.NoError(t, err)
	require.WithinRange(t, date, before, time.Now().Add(time.Second))
	require.Regexp(t, `^<[A-Z2-7]{26}@example\.com>$`, msg.Header.Get("Message-ID"))
	require.Equal(t, "1.0", msg.Header.Get("MIME-Version"))

	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "multipart/alternative", mediaType)
	mr := multipart.NewReader(msg.Body, params["boundary"])
	var parts [][2]string
	for {
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.Equal(t, "quoted-printable", p.Header.Get("Content-Transfer-Encoding"))
		parts = append(parts, [2]string{p.Header.Get("Content-Type"), decodeQP(t, p)})
	}
	require.Equal(t, [][2]string{
		{"text/plain; charset=utf-8", crlf(text)},
		{"text/html; charset=utf-8", crlf(html)},
	}, parts)
}

// TestSES_SameMessageAsSMTP sends one message both ways: apart from what is
// new in every message (Date, Message-ID, the multipart boundary) the bytes
// are the same.
func TestSES_SameMessageAsSMTP(t *testing.T) {
	t.Parallel()

	for _, html := range []string{"", "<p>Vote.</p>\n"} {
		m := mail.Message{To: []string{"Ada Lovelace <ada@example.com>"}, Subject: "Vote on déploiement #42", Text: "Vote.\n", HTML: html}
		b := setupSES(t, "Gantry <gantry@example.com>")
		require.NoError(t, b.sender.Send(t.Context(), m))
		viaSES := b.fake.Messages()[0]

		smtp := setup(t, serverOptions{})
		require.NoError(t, smtp.sender(t, "smtp://%s").Send(t.Context(), m))
		viaSMTP := smtp.only(t)

		require.Equal(t, viaSMTP.From, viaSES.From)
		require.Equal(t, viaSMTP.To, viaSES.To)
		require.Equal(t, normalize(t, viaSMTP.Data), normalize(t, viaSES.Raw))
	}
}

var (
	dateLine      = regexp.MustCompile(`(?m)^Date: .*\r\n`)
	messageIDLine = regexp.MustCompile(`(?m)^Message-ID: .*\r\n`)
)

// normalize replaces what differs between two renderings of one message.
func normalize(t *testing.T, raw []byte) string {
	t.Helper()
	s := dateLine.ReplaceAllString(string(raw), "Date: DATE\r\n")
	s = messageIDLine.ReplaceAllString(s, "Message-ID: ID\r\n")
	_, params, err := mime.ParseMediaType(parse(t, raw).Header.Get("Content-Type"))
	require.NoError(t, err)
	if boundary := params["boundary"]; boundary != "" {
		s = strings.ReplaceAll(s, boundary, "BOUNDARY")
	}
	return s
}

func TestSES_Rejected(t *testing.T) {
	t.Parallel()

	b := setupSES(t, "Gantry <gantry@unverified.example>")
	err := b.sender.Send(t.Context(), mail.Message{To: []string{"ada@example.com"}, Subject: "Vote", Text: "Vote.\n"})
	require.Error(t, err)
	require.ErrorContains(t, err, "mail: sending through SES in eu-west-1")
	require.ErrorContains(t, err, "MessageRejected: Email address is not verified. The following identities failed the check in region EU-WEST-1: gantry@unverified.example")
	var rejected *sestypes.MessageRejected
	require.ErrorAs(t, err, &rejected)

	creds, cErr := b.fake.Credentials().Retrieve(t.Context())
	require.NoError(t, cErr)
	require.NotContains(t, err.Error(), creds.SecretAccessKey)

	require.Empty(t, b.fake.Messages())
	calls := b.fake.Calls()
	require.Len(t, calls, 1, "a rejection is not retried")
	require.Equal(t, "MessageRejected", calls[0].Error)
}

func TestSES_RefusedBeforeAnyRequest(t *testing.T) {
	t.Parallel()

	cases := []struct {
		name string
		msg  mail.Message
		want string
	}{
		{"no recipients", mail.Message{Subject: "Vote", Text: "Vote.\n"}, "no recipients"},
		{"line break in subject", mail.Message{To: []string{"ada@example.com"}, Subject: "Vote\r\nBcc: eve@example.com", Text: "Vote.\n"}, "subject contains a line break"},
		{"line break in a recipient", mail.Message{To: []string{"ada@example.com\r\nBcc: eve@example.com"}, Subject: "Vote", Text: "Vote.\n"}, "line break"},
		{"no text", mail.Message{To: []string{"ada@example.com"}, Subject: "Vote", HTML: "<p>Vote.</p>"}, "no Text"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupSES(t, "Gantry <gantry@example.com>")
			err := b.sender.Send(t.Context(), tc.msg)
			require.ErrorContains(t, err, tc.want)
			require.Empty(t, b.fake.Calls())
		})
	}
}

func TestNewSES(t *testing.T) {
	t.Parallel()

	t.Run("names its region and endpoint", func(t *testing.T) {
		t.Parallel()
		s, err := mail.NewSES(t.Context(), mail.SESOptions{Region: "eu-west-1", From: "gantry@example.com"})
		require.NoError(t, err)
		require.Equal(t, "Amazon SES in eu-west-1", s.String())
		s, err = mail.NewSES(t.Context(), mail.SESOptions{Region: "eu-west-1", Endpoint: "http://127.0.0.1:4566", From: "gantry@example.com"})
		require.NoError(t, err)
		require.Equal(t, "Amazon SES in eu-west-1 at http://127.0.0.1:4566", s.String())
	})

	invalid := []struct {
		name string
		o    mail.SESOptions
		want string
	}{
		{"no From", mail.SESOptions{Region: "eu-west-1"}, "From address is empty"},
		{"bad From", mail.SESOptions{Region: "eu-west-1", From: "gantry"}, `From: address "gantry"`},
		{"line break in From", mail.SESOptions{Region: "eu-west-1", From: "gantry@example.com\r\nBcc: eve@example.com"}, "line break"},
		{"endpoint not http(s)", mail.SESOptions{Region: "eu-west-1", From: "gantry@example.com", Endpoint: "ftp://ses.example.com"}, `scheme "ftp"`},
		{"endpoint with a password", mail.SESOptions{Region: "eu-west-1", From: "gantry@example.com", Endpoint: "https://u:s3cret@ses.example.com"}, "without user"},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := mail.NewSES(t.Context(), tc.o)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "s3cret")
		})
	}
}

// TestNewSES_NoRegion changes the environment, so it does not run in
// parallel.
func TestNewSES_NoRegion(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", dir+"/config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", dir+"/credentials")
	_, err := mail.NewSES(t.Context(), mail.SESOptions{From: "gantry@example.com"})
	require.ErrorContains(t, err, "SES needs a region")
}
