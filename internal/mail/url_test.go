package mail_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/mail"
)

func TestParseURL(t *testing.T) {
	t.Parallel()

	valid := []struct {
		url, want string
	}{
		{"smtp://mail.example.com", "smtp://mail.example.com:587?starttls=opportunistic"},
		{"smtp://mail.example.com:25?starttls=off", "smtp://mail.example.com:25?starttls=off"},
		{"smtp://u:p4ss@mail.example.com?starttls=required", "smtp://u:****@mail.example.com:587?starttls=required"},
		{"smtp://u:p4ss@mail.example.com", "smtp://u:****@mail.example.com:587?starttls=opportunistic"},
		{"smtps://u:p4ss@mail.example.com", "smtps://u:****@mail.example.com:465"},
		{"smtp://u:p4ss@localhost:1025?starttls=off", "smtp://u:****@localhost:1025?starttls=off"},
		{"smtp://[::1]:2525/", "smtp://[::1]:2525?starttls=opportunistic"},
	}
	for _, tt := range valid {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()

			s, err := mail.ParseURL(tt.url, "Gantry <gantry@example.com>")
			require.NoError(t, err)
			require.Equal(t, tt.want, s.String(), "String masks the password")
		})
	}

	invalid := []struct {
		name, url, from, want string
	}{
		{"wrong scheme", "https://mail.example.com", "", `scheme "https"`},
		{"no scheme", "mail.example.com:587", "", "want smtp://host:port"},
		{"no host", "smtp://", "", "no host"},
		{"port out of range", "smtp://u:p4ss@mail.example.com:99999", "", `port "99999"`},
		{"port not a number", "smtp://u:p4ss@mail.example.com:abc", "", "malformed"},
		{"path", "smtp://mail.example.com/relay", "", `path "/relay"`},
		{"unknown parameter", "smtp://mail.example.com?tls=yes", "", `unknown parameter "tls"`},
		{"bad starttls", "smtp://mail.example.com?starttls=maybe", "", `starttls="maybe"`},
		{"starttls twice", "smtp://mail.example.com?starttls=off&starttls=required", "", "more than once"},
		{"starttls with smtps", "smtps://mail.example.com?starttls=required", "", "does not apply to smtps"},
		{"user without password", "smtp://u@mail.example.com", "", `user "u" but no password`},
		{"password without user", "smtp://:p4ss@mail.example.com", "", "no user name"},
		{"password in clear", "smtp://u:p4ss@mail.example.com?starttls=off", "", "unencrypted"},
		{"empty from", "smtp://mail.example.com", "-", "From address is empty"},
		{"bad from", "smtp://mail.example.com", "gantry at example.com", "From: address"},
		{"from with line break", "smtp://mail.example.com", "gantry@example.com\r\nBcc: x@example.net", "line break"},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			from := tt.from
			switch from {
			case "":
				from = "gantry@example.com"
			case "-":
				from = ""
			}
			s, err := mail.ParseURL(tt.url, from)
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), "p4ss", "errors never show the password")
			require.Nil(t, s)
		})
	}
}
