// Package mail sends Gantry's email (approval requests, notifications) over
// SMTP (smtp.go) or through Amazon SES (ses.go); both send the message
// compose renders.
package mail

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"strings"
	"time"
)

// Message is one email. To holds addresses such as "ada@example.com" or
// "Ada Lovelace <ada@example.com>"; everyone in To sees everyone else.
type Message struct {
	To      []string
	Subject string
	// Text is the plain-text body; it is required.
	Text string
	// HTML is an optional HTML version of Text; with it the email is
	// multipart/alternative and mail clients choose.
	HTML string
}

// Sender sends email.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// maxHeaderLine is where header lines are folded (RFC 5322 recommends 78).
const maxHeaderLine = 78

// compose validates m and renders it as an RFC 5322 message with CRLF line
// endings, returning the envelope recipients too. Nothing from m can end a
// header line: CR and LF in the subject or the addresses are refused.
func compose(from *mail.Address, m Message, now time.Time) (rcpts []string, msg []byte, err error) {
	if len(m.To) == 0 {
		return nil, nil, errors.New("mail: message has no recipients")
	}
	to := make([]string, 0, len(m.To))
	for _, raw := range m.To {
		addr, err := parseAddress(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("mail: recipient: %w", err)
		}
		rcpts = append(rcpts, addr.Address)
		to = append(to, addr.String())
	}
	if strings.ContainsAny(m.Subject, "\r\n") {
		return nil, nil, errors.New("mail: subject contains a line break")
	}
	if m.Text == "" {
		return nil, nil, errors.New("mail: message has no Text (the plain-text body is required, HTML is optional)")
	}

	var b bytes.Buffer
	writeHeader(&b, "From", from.String())
	writeHeader(&b, "To", strings.Join(to, ", "))
	writeHeader(&b, "Subject", mime.QEncoding.Encode("utf-8", m.Subject))
	writeHeader(&b, "Date", now.Format(time.RFC1123Z))
	writeHeader(&b, "Message-ID", "<"+rand.Text()+"@"+domainOf(from.Address)+">")
	writeHeader(&b, "MIME-Version", "1.0")

	if m.HTML == "" {
		writeHeader(&b, "Content-Type", "text/plain; charset=utf-8")
		writeHeader(&b, "Content-Transfer-Encoding", "quoted-printable")
		b.WriteString("\r\n")
		if err := writeQP(&b, m.Text); err != nil {
			return nil, nil, err
		}
		return rcpts, b.Bytes(), nil
	}

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, part := range []struct{ contentType, text string }{
		{"text/plain; charset=utf-8", m.Text},
		{"text/html; charset=utf-8", m.HTML},
	} {
		w, err := mw.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {part.contentType},
			"Content-Transfer-Encoding": {"quoted-printable"},
		})
		if err != nil {
			return nil, nil, fmt.Errorf("mail: writing %s part: %w", part.contentType, err)
		}
		if err := writeQP(w, part.text); err != nil {
			return nil, nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, nil, fmt.Errorf("mail: closing multipart body: %w", err)
	}
	writeHeader(&b, "Content-Type", mime.FormatMediaType("multipart/alternative", map[string]string{"boundary": mw.Boundary()}))
	b.WriteString("\r\n")
	b.Write(body.Bytes())
	return rcpts, b.Bytes(), nil
}

// parseAddress parses one address and refuses line breaks outright, whatever
// net/mail would make of them.
func parseAddress(raw string) (*mail.Address, error) {
	if strings.ContainsAny(raw, "\r\n") {
		return nil, fmt.Errorf("address %q contains a line break", raw)
	}
	addr, err := mail.ParseAddress(raw)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", raw, err)
	}
	return addr, nil
}

// writeQP writes text quoted-printable; its line breaks become CRLF and no
// line is longer than 76 characters.
func writeQP(w interface{ Write([]byte) (int, error) }, text string) error {
	qp := quotedprintable.NewWriter(w)
	if _, err := qp.Write([]byte(text)); err != nil {
		return fmt.Errorf("mail: encoding body: %w", err)
	}
	if err := qp.Close(); err != nil {
		return fmt.Errorf("mail: encoding body: %w", err)
	}
	return nil
}

// writeHeader writes "Name: value" folded at spaces so that lines stay near
// maxHeaderLine characters. value holds no CR or LF (checked by the caller).
func writeHeader(b *bytes.Buffer, name, value string) {
	b.WriteString(name)
	b.WriteString(":")
	col := len(name) + 1
	for i, word := range strings.Split(value, " ") {
		if i > 0 && col+1+len(word) > maxHeaderLine {
			b.WriteString("\r\n")
			col = 0
		}
		b.WriteString(" ")
		b.WriteString(word)
		col += 1 + len(word)
	}
	b.WriteString("\r\n")
}

// domainOf returns the domain of an address, for Message-ID.
func domainOf(addr string) string {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 && i < len(addr)-1 {
		return addr[i+1:]
	}
	return "localhost"
}
