package app

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/config"
	"github.com/gantryhq/gantry/internal/mail"
	"github.com/gantryhq/gantry/internal/mail/mailtest"
)

// TestMailThroughSES: GANTRY_SES_REGION makes Gantry's mail go through
// Amazon SES with the process's AWS credentials (here the in-test SES's).
func TestMailThroughSES(t *testing.T) {
	ses := mailtest.NewSES(t)
	ses.VerifyIdentity("example.com")
	creds, err := ses.Credentials().Retrieve(t.Context())
	require.NoError(t, err)
	t.Setenv("AWS_ACCESS_KEY_ID", creds.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", creds.SecretAccessKey)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")

	cfg, err := config.Load([]string{"GANTRY_SES_REGION=eu-west-1", "GANTRY_SES_ENDPOINT=" + ses.URL, "GANTRY_MAIL_FROM=Gantry <gantry@example.com>"}, nil)
	require.NoError(t, err)
	sender, err := newMailSender(t.Context(), cfg)
	require.NoError(t, err)
	require.NoError(t, sender.Send(t.Context(), mail.Message{To: []string{"ada@example.com"}, Subject: "Vote on live/prod/vpc", Text: "Review the plan.\n"}))
	m := ses.Wait(t, 10*time.Second, func(m mailtest.Message) bool { return m.Subject == "Vote on live/prod/vpc" })
	require.Equal(t, []string{"ada@example.com"}, m.To)
	require.Equal(t, "eu-west-1", ses.Calls()[0].Region)

	_, err = config.Load([]string{"GANTRY_SES_REGION=eu-west-1", "GANTRY_SMTP_URL=smtp://localhost:25"}, nil)
	require.ErrorContains(t, err, "GANTRY_SES_REGION")
	require.True(t, strings.Contains(err.Error(), "not both"))
}
