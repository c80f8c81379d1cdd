// Package mailtest runs a real SMTP server (go-smtp), or a small Amazon SES
// (see NewSES), inside a test and keeps what it receives, so tests check the
// emails Gantry sends as a mail server sees them.
package mailtest

import (
	"bytes"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"
)

// Message is one email as received.
type Message struct {
	From    string
	To      []string
	Subject string
	Body    string // the raw body after the headers (still transfer-encoded)
	Text    string // the body decoded, for a quoted-printable plain-text message
	Raw     []byte
}

// Server is a running SMTP server.
type Server struct {
	Addr string

	inbox
}

// inbox keeps what a server received.
type inbox struct {
	mu       sync.Mutex
	messages []Message
	arrived  chan struct{}
}

func newInbox() inbox { return inbox{arrived: make(chan struct{}, 1)} }

// New starts a server on localhost that accepts any sender and recipient,
// and stops it when t ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{inbox: newInbox()}
	srv := gosmtp.NewServer(backend{s})
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("mailtest: %v", err)
	}
	s.Addr = l.Addr().String()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// URL is a GANTRY_SMTP_URL for the server.
func (s *Server) URL() string { return "smtp://" + s.Addr + "?starttls=off" }

// Messages returns what arrived so far.
func (s *inbox) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// Wait returns the first message for which match is true, failing t when
// none arrives within timeout.
func (s *inbox) Wait(t testing.TB, timeout time.Duration, match func(Message) bool) Message {
	t.Helper()
	deadline := time.After(timeout)
	for {
		for _, m := range s.Messages() {
			if match(m) {
				return m
			}
		}
		select {
		case <-s.arrived:
		case <-deadline:
			t.Fatalf("mailtest: no matching email within %s; received %d", timeout, len(s.Messages()))
		}
	}
}

type backend struct{ s *Server }

func (b backend) NewSession(*gosmtp.Conn) (gosmtp.Session, error) { return &session{s: b.s}, nil }

type session struct {
	s   *Server
	msg Message
}

func (se *session) Mail(from string, _ *gosmtp.MailOptions) error {
	se.msg = Message{From: from}
	return nil
}

func (se *session) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	se.msg.To = append(se.msg.To, to)
	return nil
}

func (se *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	se.s.add(received(se.msg.From, se.msg.To, raw))
	return nil
}

// received is a message as it arrived from an envelope sender to envelope
// recipients, with Subject and Body read from raw where it parses.
func received(from string, to []string, raw []byte) Message {
	m := Message{From: from, To: to, Raw: raw}
	if parsed, err := mail.ReadMessage(bytes.NewReader(raw)); err == nil {
		m.Subject = parsed.Header.Get("Subject")
		if decoded, err := new(mime.WordDecoder).DecodeHeader(m.Subject); err == nil {
			m.Subject = decoded
		}
		body, _ := io.ReadAll(parsed.Body)
		m.Body = strings.ReplaceAll(string(body), "=\r\n", "")
		if strings.EqualFold(parsed.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
			text, _ := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(body)))
			m.Text = strings.ReplaceAll(string(text), "\r\n", "\n")
		}
	}
	return m
}

func (s *inbox) add(m Message) {
	s.mu.Lock()
	s.messages = append(s.messages, m)
	s.mu.Unlock()
	select {
	case s.arrived <- struct{}{}:
	default:
	}
}

func (se *session) Reset()        { se.msg = Message{} }
func (se *session) Logout() error { return nil }
