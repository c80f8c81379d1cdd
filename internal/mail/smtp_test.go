package mail_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	netmail "net/mail"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	gosmtp "github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/mail"
)

// received is one message as the test server got it.
type received struct {
	From string
	To   []string
	Data []byte
	User string // who authenticated, if anyone
	TLS  bool
}

// backend is a go-smtp backend that keeps what it receives.
type backend struct {
	user, pass string // when set, AUTH PLAIN is offered and required

	mu       sync.Mutex
	messages []received
}

func (b *backend) NewSession(c *gosmtp.Conn) (gosmtp.Session, error) {
	return &session{b: b, conn: c}, nil
}

func (b *backend) received() []received {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.messages)
}

type session struct {
	b    *backend
	conn *gosmtp.Conn
	user string
	msg  received
}

func (s *session) AuthMechanisms() []string {
	if s.b.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.b.user || pass != s.b.pass {
			return gosmtp.ErrAuthFailed
		}
		s.user = user
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *gosmtp.MailOptions) error {
	if s.b.user != "" && s.user == "" {
		return gosmtp.ErrAuthRequired
	}
	s.msg = received{From: from, User: s.user}
	return nil
}

func (s *session) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	s.msg.To = append(s.msg.To, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.msg.Data = data
	_, s.msg.TLS = s.conn.TLSConnectionState()
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.messages = append(s.b.messages, s.msg)
	return nil
}

func (s *session) Reset()        { s.msg = received{} }
func (s *session) Logout() error { return nil }

// countingListener counts the connections accepted.
type countingListener struct {
	net.Listener
	accepted atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

type serverOptions struct {
	user, pass  string
	startTLS    bool // offer STARTTLS
	implicitTLS bool // TLS from the first byte (smtps)
}

type bundle struct {
	backend   *backend
	listener  *countingListener
	addr      string
	clientTLS *tls.Config
}

// setup starts a real SMTP server on localhost for one test.
func setup(t *testing.T, opts serverOptions) *bundle {
	t.Helper()
	be := &backend{user: opts.user, pass: opts.pass}
	srv := gosmtp.NewServer(be)
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true // the client refuses PLAIN without TLS except to localhost
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 10 * time.Second

	serverTLS, clientTLS := tlsPair(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	counted := &countingListener{Listener: l}
	var serve net.Listener = counted
	if opts.startTLS {
		srv.TLSConfig = serverTLS
	}
	if opts.implicitTLS {
		serve = tls.NewListener(counted, serverTLS)
	}
	go func() { _ = srv.Serve(serve) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &bundle{backend: be, listener: counted, addr: l.Addr().String(), clientTLS: clientTLS}
}

// sender builds a sender for the test server from a URL template with %s
// for host:port.
func (b *bundle) sender(t *testing.T, urlFormat string) *mail.SMTP {
	t.Helper()
	s, err := mail.ParseURL(fmt.Sprintf(urlFormat, b.addr), "Gantry <gantry@example.com>")
	require.NoError(t, err)
	s.TLSConfig = b.clientTLS
	return s
}

// only returns the single message the server received.
func (b *bundle) only(t *testing.T) received {
	t.Helper()
	msgs := b.backend.received()
	require.Len(t, msgs, 1)
	return msgs[0]
}

// tlsPair makes a self-signed certificate for 127.0.0.1 and a client config
// that trusts it.
func tlsPair(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: pool}
}

// parse reads a received message, checking it is CRLF throughout.
func parse(t *testing.T, data []byte) *netmail.Message {
	t.Helper()
	require.NotRegexp(t, regexp.MustCompile(`[^\r]\n`), string(data), "bare LF in message")
	msg, err := netmail.ReadMessage(bytes.NewReader(data))
	require.NoError(t, err)
	return msg
}

func decodeQP(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(quotedprintable.NewReader(r))
	require.NoError(t, err)
	return string(b)
}

func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

func TestSend_PlainText(t *testing.T) {
	t.Parallel()

	b := setup(t, serverOptions{})
	text := "Deployment #42 waits for your vote.\n.\n.leading dot\n" + strings.Repeat("long ", 40) + "\n"
	before := time.Now().Add(-time.Second)
	err := b.sender(t, "smtp://%s").Send(t.Context(), mail.Message{
		To:      []string{"Ada Lovelace <ada@example.com>"},
		Subject: "Approve deployment #42",
		Text:    text,
	})
	require.NoError(t, err)

	got := b.only(t)
	require.Equal(t, "gantry@example.com", got.From)
	require.Equal(t, []string{"ada@example.com"}, got.To)
	require.False(t, got.TLS, "opportunistic: the server offers no STARTTLS")

	msg := parse(t, got.Data)
	from, err := netmail.ParseAddress(msg.Header.Get("From"))
	require.NoError(t, err)
	require.Equal(t, &netmail.Address{Name: "Gantry", Address: "gantry@example.com"}, from)
	to, err := msg.Header.AddressList("To")
	require.NoError(t, err)
	require.Equal(t, []*netmail.Address{{Name: "Ada Lovelace", Address: "ada@example.com"}}, to)
	require.Equal(t, "Approve deployment #42", msg.Header.Get("Subject"))
	date, err := msg.Header.Date()
	require.NoError(t, err)
	require.WithinRange(t, date, before, time.Now().Add(time.Second))
	require.Regexp(t, `^<[A-Z2-7]{26}@example\.com>$`, msg.Header.Get("Message-ID"))
	require.Equal(t, "1.0", msg.Header.Get("MIME-Version"))
	require.Equal(t, "text/plain; charset=utf-8", msg.Header.Get("Content-Type"))
	require.Equal(t, "quoted-printable", msg.Header.Get("Content-Transfer-Encoding"))
	require.Equal(t, crlf(text), decodeQP(t, msg.Body))
	for line := range strings.Lines(string(got.Data)) {
		require.LessOrEqual(t, len(line), 78+2, "line too long: %q", line)
	}
}

func TestSend_HTMLAlternative(t *testing.T) {
	t.Parallel()

	b := setup(t, serverOptions{})
	text := "Open https://gantry.example.com/approvals/7 to vote.\n"
	html := `<p>Open <a href="https://gantry.example.com/approvals/7">the approval</a> to vote.</p>` + "\n"
	err := b.sender(t, "smtp://%s").Send(t.Context(), mail.Message{
		To: []string{"ada@example.com"}, Subject: "Vote", Text: text, HTML: html,
	})
	require.NoError(t, err)

	msg := parse(t, b.only(t).Data)
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
	}, parts, "plain text first: clients show the last part they understand")
}

func TestSend_NonASCIISubject(t *testing.T) {
	t.Parallel()

	b := setup(t, serverOptions{})
	subject := "Freigabe für Zürich ✓ — " + strings.Repeat("Änderung ", 12)
	err := b.sender(t, "smtp://%s").Send(t.Context(), mail.Message{
		To: []string{"Zoë Müller <zoe@example.com>"}, Subject: subject, Text: "Grüße\n",
	})
	require.NoError(t, err)

	got := b.only(t)
	headers, _, _ := bytes.Cut(got.Data, []byte("\r\n\r\n"))
	for _, c := range headers {
		require.Less(t, c, byte(0x80), "headers must be ASCII")
	}
	msg := parse(t, got.Data)
	decoded, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	require.NoError(t, err)
	require.Equal(t, subject, decoded)
	to, err := msg.Header.AddressList("To")
	require.NoError(t, err)
	require.Equal(t, "Zoë Müller", to[0].Name)
	require.Equal(t, "Grüße\r\n", decodeQP(t, msg.Body))
}

func TestSend_SeveralRecipients(t *testing.T) {
	t.Parallel()

	b := setup(t, serverOptions{})
	err := b.sender(t, "smtp://%s").Send(t.Context(), mail.Message{
		To:      []string{"ada@example.com", "Grace Hopper <grace@example.com>", "linus@example.org"},
		Subject: "Pipeline gate", Text: "Vote please.\n",
	})
	require.NoError(t, err)

	got := b.only(t)
	require.Equal(t, []string{"ada@example.com", "grace@example.com", "linus@example.org"}, got.To)
	to, err := parse(t, got.Data).Header.AddressList("To")
	require.NoError(t, err)
	require.Len(t, to, 3)
	require.Equal(t, "grace@example.com", to[1].Address)
}

func TestSend_Auth(t *testing.T) {
	t.Parallel()

	b := setup(t, serverOptions{user: "gantry", pass: "p4ss/w:rd"})

	t.Run("right password", func(t *testing.T) {
		err := b.sender(t, "smtp://gantry:p4ss%%2Fw%%3Ard@%s").Send(t.Context(), mail.Message{
			To: []string{"ada@example.com"}, Subject: "s", Text: "t\n",
		})
		require.NoError(t, err)
		require.Equal(t, "gantry", b.only(t).User)
	})

	t.Run("wrong password", func(t *testing.T) {
		err := b.sender(t, "smtp://gantry:nope@%s").Send(t.Context(), mail.Message{
			To: []string{"ada@example.com"}, Subject: "s", Text: "t\n",
		})
		require.ErrorContains(t, err, "authenticating as gantry")
		require.ErrorContains(t, err, "535")
		require.NotContains(t, err.Error(), "nope")
	})

	t.Run("no credentials", func(t *testing.T) {
		err := b.sender(t, "smtp://%s").Send(t.Context(), mail.Message{
			To: []string{"ada@example.com"}, Subject: "s", Text: "t\n",
		})
		require.ErrorContains(t, err, "MAIL FROM")
	})
}

func TestSend_TLS(t *testing.T) {
	t.Parallel()

	msg := mail.Message{To: []string{"ada@example.com"}, Subject: "s", Text: "t\n"}

	t.Run("STARTTLS required and offered", func(t *testing.T) {
		t.Parallel()

		b := setup(t, serverOptions{startTLS: true, user: "gantry", pass: "secret"})
		require.NoError(t, b.sender(t, "smtp://gantry:secret@%s?starttls=required").Send(t.Context(), msg))
		got := b.only(t)
		require.True(t, got.TLS)
		require.Equal(t, "gantry", got.User)
	})

	t.Run("STARTTLS opportunistic and offered", func(t *testing.T) {
		t.Parallel()

		b := setup(t, serverOptions{startTLS: true})
		require.NoError(t, b.sender(t, "smtp://%s").Send(t.Context(), msg))
		require.True(t, b.only(t).TLS)
	})

	t.Run("STARTTLS required but not offered", func(t *testing.T) {
		t.Parallel()

		b := setup(t, serverOptions{})
		err := b.sender(t, "smtp://%s?starttls=required").Send(t.Context(), msg)
		require.ErrorContains(t, err, "does not offer STARTTLS")
		require.Empty(t, b.backend.received())
	})

	t.Run("STARTTLS with an untrusted certificate", func(t *testing.T) {
		t.Parallel()

		b := setup(t, serverOptions{startTLS: true})
		s := b.sender(t, "smtp://%s?starttls=required")
		s.TLSConfig = nil // the system roots do not know the test CA
		err := s.Send(t.Context(), msg)
		require.ErrorContains(t, err, "STARTTLS")
		require.Empty(t, b.backend.received())
	})

	t.Run("smtps", func(t *testing.T) {
		t.Parallel()

		b := setup(t, serverOptions{implicitTLS: true, user: "gantry", pass: "secret"})
		require.NoError(t, b.sender(t, "smtps://gantry:secret@%s").Send(t.Context(), msg))
		got := b.only(t)
		require.True(t, got.TLS)
		require.Equal(t, "gantry", got.User)
	})
}

func TestSend_ServerDown(t *testing.T) {
	t.Parallel()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	s, err := mail.ParseURL("smtp://"+addr, "gantry@example.com")
	require.NoError(t, err)
	err = s.Send(t.Context(), mail.Message{To: []string{"ada@example.com"}, Subject: "s", Text: "t\n"})
	require.ErrorContains(t, err, "connecting to "+addr)
	require.ErrorContains(t, err, "refused")
}

func TestSend_RefusesBadMessagesBeforeConnecting(t *testing.T) {
	t.Parallel()

	b := setup(t, serverOptions{})
	s := b.sender(t, "smtp://%s")
	ok := mail.Message{To: []string{"ada@example.com"}, Subject: "s", Text: "t\n"}

	tests := []struct {
		name   string
		modify func(*mail.Message)
		want   string
	}{
		{"CRLF in subject", func(m *mail.Message) { m.Subject = "Hi\r\nBcc: evil@example.net" }, "subject contains a line break"},
		{"LF in subject", func(m *mail.Message) { m.Subject = "Hi\nBcc: evil@example.net" }, "subject contains a line break"},
		{"CRLF in recipient", func(m *mail.Message) { m.To = []string{"ada@example.com\r\nBcc: evil@example.net"} }, "line break"},
		{"CRLF in display name", func(m *mail.Message) { m.To = []string{"\"Ada\r\nBcc: evil@example.net\" <ada@example.com>"} }, "line break"},
		{"not an address", func(m *mail.Message) { m.To = []string{"ada at example.com"} }, `"ada at example.com"`},
		{"no recipients", func(m *mail.Message) { m.To = nil }, "no recipients"},
		{"no text", func(m *mail.Message) { m.Text = ""; m.HTML = "<p>hi</p>" }, "no Text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ok
			tt.modify(&m)
			err := s.Send(t.Context(), m)
			require.ErrorContains(t, err, tt.want)
		})
	}
	require.Zero(t, b.listener.accepted.Load(), "no connection for a refused message")
	require.Empty(t, b.backend.received())
}

// silentServer accepts connections and never says anything.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

func TestSend_Deadlines(t *testing.T) {
	t.Parallel()

	msg := mail.Message{To: []string{"ada@example.com"}, Subject: "s", Text: "t\n"}

	t.Run("ctx deadline", func(t *testing.T) {
		t.Parallel()

		s, err := mail.ParseURL("smtp://"+silentServer(t), "gantry@example.com")
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		err = s.Send(ctx, msg)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "reading greeting")
		require.Less(t, time.Since(start), 2*time.Second)
	})

	t.Run("ctx cancelled", func(t *testing.T) {
		t.Parallel()

		s, err := mail.ParseURL("smtp://"+silentServer(t), "gantry@example.com")
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(300*time.Millisecond, cancel)
		start := time.Now()
		err = s.Send(ctx, msg)
		require.ErrorIs(t, err, context.Canceled)
		require.Less(t, time.Since(start), 2*time.Second)
	})

	t.Run("sender timeout without a ctx deadline", func(t *testing.T) {
		t.Parallel()

		s, err := mail.ParseURL("smtp://"+silentServer(t), "gantry@example.com")
		require.NoError(t, err)
		s.Timeout = 300 * time.Millisecond
		start := time.Now()
		err = s.Send(t.Context(), msg)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Less(t, time.Since(start), 2*time.Second)
	})
}
