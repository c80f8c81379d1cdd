package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/smtp"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultTimeout bounds one Send when its ctx has no earlier deadline and
// SMTP.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// StartTLS says whether a smtp:// connection is upgraded to TLS.
type StartTLS string

// The values of the starttls URL parameter.
const (
	// StartTLSRequired refuses to send unless the server offers STARTTLS.
	StartTLSRequired StartTLS = "required"
	// StartTLSOpportunistic upgrades when the server offers STARTTLS and
	// sends in clear otherwise (never with a password, unless to localhost).
	StartTLSOpportunistic StartTLS = "opportunistic"
	// StartTLSOff never upgrades.
	StartTLSOff StartTLS = "off"
)

// SMTP sends email through an SMTP relay. Build it with ParseURL.
type SMTP struct {
	// TLSConfig, if set, is used for TLS (for example RootCAs for a relay
	// with a private CA). ServerName defaults to the URL's host.
	TLSConfig *tls.Config
	// Timeout bounds one Send when its ctx has no earlier deadline; zero
	// means DefaultTimeout.
	Timeout time.Duration
	// LocalName is the name Gantry gives in EHLO; empty means "localhost".
	LocalName string

	host        string
	port        string
	implicitTLS bool
	startTLS    StartTLS
	username    string
	password    string
	from        *mail.Address
}

var _ Sender = (*SMTP)(nil)

// ParseURL builds an SMTP sender from a URL and a From address:
//
//	smtp://user:pass@host:port?starttls=required|opportunistic|off
//	smtps://user:pass@host:port   (implicit TLS)
//
// The port defaults to 587 for smtp and 465 for smtps; starttls defaults to
// opportunistic. User and password are optional but go together; they are
// sent with AUTH PLAIN, only over TLS or to localhost, so smtp:// with
// credentials and starttls=off is refused for any other host. from is an
// address such as "Gantry <gantry@example.com>".
//
// Errors name what is wrong and never contain the password.
func ParseURL(raw, from string) (*SMTP, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes the whole URL, password included.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("mail: SMTP URL is malformed: %w", err)
	}
	s := &SMTP{startTLS: StartTLSOpportunistic}
	switch u.Scheme {
	case "smtp":
		s.port = "587"
	case "smtps":
		s.port = "465"
		s.implicitTLS = true
	default:
		return nil, fmt.Errorf("mail: SMTP URL has scheme %q, want smtp://host:port or smtps://host:port", u.Scheme)
	}
	if u.Opaque != "" {
		return nil, fmt.Errorf("mail: SMTP URL must look like %s://host:port", u.Scheme)
	}
	if s.host = u.Hostname(); s.host == "" {
		return nil, errors.New("mail: SMTP URL has no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("mail: SMTP URL port %q is not a number from 1 to 65535", p)
		}
		s.port = p
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("mail: SMTP URL has a path %q; only host, port, credentials and ?starttls= are allowed", u.Path)
	}
	if u.Fragment != "" {
		return nil, errors.New("mail: SMTP URL has a #fragment; only host, port, credentials and ?starttls= are allowed")
	}

	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("mail: SMTP URL query is malformed: %w", err)
	}
	for name, values := range query {
		if name != "starttls" {
			return nil, fmt.Errorf("mail: SMTP URL has unknown parameter %q (only starttls is known)", name)
		}
		if len(values) != 1 {
			return nil, errors.New("mail: SMTP URL gives starttls more than once")
		}
		if s.implicitTLS {
			return nil, errors.New("mail: starttls does not apply to smtps:// (TLS from the start); drop it or use smtp://")
		}
		switch mode := StartTLS(values[0]); mode {
		case StartTLSRequired, StartTLSOpportunistic, StartTLSOff:
			s.startTLS = mode
		default:
			return nil, fmt.Errorf("mail: SMTP URL starttls=%q, want required, opportunistic or off", values[0])
		}
	}

	if u.User != nil {
		s.username = u.User.Username()
		s.password, _ = u.User.Password()
		switch {
		case s.username == "":
			return nil, errors.New("mail: SMTP URL has a password but no user name")
		case s.password == "":
			return nil, fmt.Errorf("mail: SMTP URL has user %q but no password", s.username)
		case !s.implicitTLS && s.startTLS == StartTLSOff && !isLocalhost(s.host):
			return nil, fmt.Errorf("mail: refusing to send the SMTP password to %s unencrypted; use starttls=required or smtps://", s.host)
		}
	}

	if from == "" {
		return nil, errors.New("mail: From address is empty")
	}
	if s.from, err = parseAddress(from); err != nil {
		return nil, fmt.Errorf("mail: From: %w", err)
	}
	return s, nil
}

// String returns the URL with the password masked.
func (s *SMTP) String() string {
	u := url.URL{Scheme: "smtp", Host: net.JoinHostPort(s.host, s.port)}
	if s.implicitTLS {
		u.Scheme = "smtps"
	} else {
		u.RawQuery = "starttls=" + string(s.startTLS)
	}
	if s.username != "" {
		u.User = url.UserPassword(s.username, "****")
	}
	return strings.Replace(u.String(), "%2A%2A%2A%2A", "****", 1)
}

// Send delivers m through the relay. It honours ctx's deadline and
// cancellation for the whole conversation. An invalid message is refused
// before any connection is made.
func (s *SMTP) Send(ctx context.Context, m Message) error {
	rcpts, msg, err := compose(s.from, m, time.Now())
	if err != nil {
		return err
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	fail := func(op string, err error) error {
		ctxErr := ctx.Err()
		if ctxErr == nil && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(deadline) {
			ctxErr = context.DeadlineExceeded // the connection's deadline beat ctx's timer
		}
		if ctxErr != nil {
			return fmt.Errorf("mail: %s: %w: %w", op, ctxErr, err)
		}
		return fmt.Errorf("mail: %s: %w", op, err)
	}

	addr := net.JoinHostPort(s.host, s.port)
	var conn net.Conn
	if s.implicitTLS {
		conn, err = (&tls.Dialer{Config: s.tlsConfig()}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return fail("connecting to "+addr, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return fail("setting deadline", err)
	}
	// Cancellation interrupts whatever read or write is under way.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		return fail("reading greeting from "+addr, err)
	}
	if s.LocalName != "" {
		if err := c.Hello(s.LocalName); err != nil {
			return fail("EHLO", err)
		}
	}
	if !s.implicitTLS && s.startTLS != StartTLSOff {
		offered, _ := c.Extension("STARTTLS")
		switch {
		case offered:
			if err := c.StartTLS(s.tlsConfig()); err != nil {
				return fail("STARTTLS", err)
			}
		case s.startTLS == StartTLSRequired:
			return fmt.Errorf("mail: %s does not offer STARTTLS and the URL says starttls=required", addr)
		}
	}
	if s.username != "" {
		offered, mechs := c.Extension("AUTH")
		if !offered || !slices.Contains(strings.Fields(strings.ToUpper(mechs)), "PLAIN") {
			return fmt.Errorf("mail: %s does not offer AUTH PLAIN (offers %q)", addr, mechs)
		}
		if err := c.Auth(smtp.PlainAuth("", s.username, s.password, s.host)); err != nil {
			return fail("authenticating as "+s.username, err)
		}
	}
	if err := c.Mail(s.from.Address); err != nil {
		return fail("MAIL FROM", err)
	}
	for _, rcpt := range rcpts {
		if err := c.Rcpt(rcpt); err != nil {
			return fail("RCPT TO "+rcpt, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fail("DATA", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fail("writing message", err)
	}
	if err := w.Close(); err != nil {
		return fail("finishing message", err)
	}
	// The relay has accepted the message; a failed QUIT changes nothing.
	_ = c.Quit()
	return nil
}

func (s *SMTP) tlsConfig() *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.TLSConfig != nil {
		cfg = s.TLSConfig.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName = s.host
	}
	return cfg
}

// isLocalhost matches net/smtp's rule for sending PLAIN credentials without
// TLS.
func isLocalhost(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}
