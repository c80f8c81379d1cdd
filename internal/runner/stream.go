package runner

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// mask replaces every secret in the output.
const mask = "****"

// redactor replaces secrets in a byte stream that arrives in pieces. It holds
// back a tail that could be the beginning of a secret until the next piece
// shows whether it is one, so a secret split across reads (or across the
// chunks the command's writes happen to produce) is still replaced whole.
type redactor struct {
	secrets [][]byte  // longest first, no duplicates, none empty
	first   [256]bool // first bytes of the secrets, to skip plain text fast
	held    []byte
}

func newRedactor(secrets []string) *redactor {
	r := &redactor{}
	seen := make(map[string]bool)
	for _, s := range secrets {
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		r.secrets = append(r.secrets, []byte(s))
		r.first[s[0]] = true
	}
	slices.SortStableFunc(r.secrets, func(a, b []byte) int { return len(b) - len(a) })
	return r
}

// write takes the next piece of the stream and returns the redacted text that
// is safe to pass on. With final set, nothing is held back.
func (r *redactor) write(p []byte, final bool) []byte {
	buf := append(r.held, p...)
	r.held = nil
	if len(r.secrets) == 0 {
		return buf
	}
	out := make([]byte, 0, len(buf))
	i := 0
	for i < len(buf) {
		j := i
		for j < len(buf) && !r.first[buf[j]] {
			j++
		}
		out = append(out, buf[i:j]...)
		i = j
		if i == len(buf) {
			break
		}
		rest := buf[i:]
		if !final && r.couldStart(rest) {
			r.held = append([]byte(nil), rest...)
			break
		}
		if n := r.match(rest); n > 0 {
			out = append(out, mask...)
			i += n
			continue
		}
		out = append(out, buf[i])
		i++
	}
	return out
}

// couldStart reports whether rest is a proper prefix of a secret, so that the
// next bytes decide whether it must be masked.
func (r *redactor) couldStart(rest []byte) bool {
	for _, s := range r.secrets {
		if len(s) > len(rest) && bytes.HasPrefix(s, rest) {
			return true
		}
	}
	return false
}

// match returns the length of the longest secret rest starts with, or 0.
func (r *redactor) match(rest []byte) int {
	for _, s := range r.secrets {
		if bytes.HasPrefix(rest, s) {
			return len(s)
		}
	}
	return 0
}

// redactString masks the secrets in a complete string.
func (r *redactor) redactString(s string) string {
	return string(r.write([]byte(s), true))
}

// stream cuts one output stream (stdout or stderr) into chunks: complete
// lines as soon as they arrive, a partial line once it has waited
// FlushInterval or reached MaxChunkSize.
type stream struct {
	name  string
	red   *redactor
	buf   []byte    // redacted, not yet emitted
	since time.Time // when the partial line in buf started waiting
}

// add takes bytes read from the command and returns the chunks ready to go.
func (s *stream) add(p []byte, now time.Time) []string {
	s.buf = append(s.buf, s.red.write(p, false)...)
	var out []string
	for len(s.buf) >= MaxChunkSize {
		cut := bytes.LastIndexByte(s.buf[:MaxChunkSize], '\n') + 1
		if cut == 0 {
			cut = runeStartBefore(s.buf, MaxChunkSize)
		}
		out = append(out, s.take(cut))
	}
	if nl := bytes.LastIndexByte(s.buf, '\n'); nl >= 0 {
		out = append(out, s.take(nl+1))
	}
	switch {
	case len(s.buf) == 0:
		s.since = time.Time{}
	case len(out) > 0 || s.since.IsZero():
		// The partial line left over started arriving with this read.
		s.since = now
	}
	return out
}

// due returns when the waiting partial line must be flushed, if there is one.
func (s *stream) due() (time.Time, bool) {
	if len(s.buf) == 0 {
		return time.Time{}, false
	}
	return s.since.Add(FlushInterval), true
}

// flushPartial returns the partial line if it has waited long enough. A
// rune whose bytes have not all arrived yet stays behind.
func (s *stream) flushPartial(now time.Time) (string, bool) {
	due, ok := s.due()
	if !ok || now.Before(due) {
		return "", false
	}
	cut := len(s.buf)
	if start := runeStartBefore(s.buf, len(s.buf)-1); start < len(s.buf) && !utf8.FullRune(s.buf[start:]) {
		cut = start
	}
	if cut == 0 {
		s.since = now
		return "", false
	}
	text := s.take(cut)
	if len(s.buf) > 0 {
		s.since = now
	} else {
		s.since = time.Time{}
	}
	return text, true
}

// finish returns everything left once the stream has ended.
func (s *stream) finish() []string {
	s.buf = append(s.buf, s.red.write(nil, true)...)
	var out []string
	for len(s.buf) > 0 {
		cut := len(s.buf)
		if cut > MaxChunkSize {
			cut = runeStartBefore(s.buf, MaxChunkSize)
		}
		out = append(out, s.take(cut))
	}
	s.since = time.Time{}
	return out
}

func (s *stream) take(n int) string {
	text := sanitize(s.buf[:n])
	s.buf = append(s.buf[:0], s.buf[n:]...)
	return text
}

// runeStartBefore returns the largest index <= n (and > n-utf8.UTFMax) at
// which a rune starts, so that cutting there splits no character. A cut never
// moves to 0 unless n is 0: invalid bytes are cut where they are.
func runeStartBefore(b []byte, n int) int {
	if n <= 0 || n >= len(b) {
		return max(n, 0)
	}
	for i := n; i > n-utf8.UTFMax && i > 0; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return n
}

// sanitize makes command output storable in a PostgreSQL text column:
// invalid UTF-8 and NUL bytes become U+FFFD.
func sanitize(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// cappedOutput keeps the first and the last half of OutputLimit bytes of the
// combined output and counts what falls in between.
type cappedOutput struct {
	limit    int
	head     []byte
	headFull bool
	tail     []byte
	omitted  int
}

func (c *cappedOutput) write(s string) {
	half := c.limit / 2
	if !c.headFull {
		n := min(half-len(c.head), len(s))
		if n < len(s) {
			n = runeStartIn(s, n)
			c.headFull = true
		}
		c.head = append(c.head, s[:n]...)
		s = s[n:]
	}
	c.tail = append(c.tail, s...)
	if len(c.tail) > 2*half {
		c.trimTail(half)
	}
}

func (c *cappedOutput) trimTail(keep int) {
	if len(c.tail) <= keep {
		return
	}
	drop := len(c.tail) - keep
	for drop < len(c.tail) && !utf8.RuneStart(c.tail[drop]) {
		drop++
	}
	c.omitted += drop
	c.tail = append(c.tail[:0], c.tail[drop:]...)
}

func (c *cappedOutput) String() string {
	if len(c.head)+len(c.tail) > c.limit {
		c.trimTail(c.limit / 2)
	}
	if c.omitted == 0 {
		return string(c.head) + string(c.tail)
	}
	return fmt.Sprintf("%s\n[… %d bytes omitted …]\n%s", c.head, c.omitted, c.tail)
}

// runeStartIn is runeStartBefore for strings, allowing a cut at 0.
func runeStartIn(s string, n int) int {
	for i := n; i > n-utf8.UTFMax && i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			return i
		}
	}
	if n < utf8.UTFMax {
		return 0
	}
	return n
}
