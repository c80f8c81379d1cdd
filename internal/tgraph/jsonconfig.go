package tgraph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// unitJSONFile is the JSON form of a unit's configuration, which Terragrunt
// reads when a directory has no terragrunt.hcl.
const unitJSONFile = "terragrunt.hcl.json"

// A JSON configuration (HCL's JSON syntax: blocks as nested objects, strings
// as templates) is translated to the native syntax and indexed like any
// other file. Each attribute and block starts a line of its own, and
// jsonLines maps those lines back to the JSON file's, so errors point into
// the file as written.

// jsonBlockLabels is how many labels each Terragrunt block type takes;
// include takes one or none (see labelCount). Nested blocks are those of
// jsonNestedBlocks.
var jsonBlockLabels = map[string]int{
	"locals": 0, "include": -1, "dependency": 1, "dependencies": 0, "terraform": 0,
	"remote_state": 0, "generate": 1, "feature": 1, "errors": 0, "exclude": 0, "engine": 0, "catalog": 0,
}

var jsonNestedBlocks = map[string]int{
	"extra_arguments": 1, "before_hook": 1, "after_hook": 1, "error_hook": 1, "retry": 1, "ignore": 1,
}

// jsonTranslation is a JSON configuration in native syntax.
type jsonTranslation struct {
	src   []byte
	lines []int // native line (1-based index) → JSON line
}

// translateJSON turns a JSON configuration into native syntax.
func translateJSON(src []byte) (*jsonTranslation, error) {
	lineStarts := []int{0}
	for i, b := range src {
		if b == '\n' {
			lineStarts = append(lineStarts, i+1)
		}
	}
	out := &jsonTranslation{lines: []int{0}}
	t := newJSONTranslator(src, 0, lineStarts, out)
	if err := t.body(0, true); err != nil {
		return nil, err
	}
	if _, err := t.dec.Token(); err != io.EOF {
		return nil, t.errorf("unexpected content after the configuration object")
	}
	return out, nil
}

// jsonTranslator translates a part of the file, which starts at base.
type jsonTranslator struct {
	dec        *json.Decoder
	base       int
	lineStarts []int // of the whole file
	out        *jsonTranslation
	buf        bytes.Buffer
}

func newJSONTranslator(part []byte, base int, lineStarts []int, out *jsonTranslation) *jsonTranslator {
	t := &jsonTranslator{dec: json.NewDecoder(bytes.NewReader(part)), base: base, lineStarts: lineStarts, out: out}
	t.dec.UseNumber()
	return t
}

// line is the file's line at offset off of the part.
func (t *jsonTranslator) lineAt(off int) int {
	off += t.base
	lo, hi := 0, len(t.lineStarts)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if t.lineStarts[mid] <= off {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo + 1
}

// line is the file's line the decoder is at.
func (t *jsonTranslator) line() int { return t.lineAt(int(t.dec.InputOffset())) }

func (t *jsonTranslator) errorf(format string, args ...any) error {
	return &Error{Line: t.line(), Message: fmt.Sprintf(format, args...)}
}

// emit writes one native line for JSON line jl.
func (t *jsonTranslator) emit(jl int, text string) {
	t.out.src = append(t.out.src, text...)
	t.out.src = append(t.out.src, '\n')
	t.out.lines = append(t.out.lines, jl)
}

func (t *jsonTranslator) delim(want json.Delim) error {
	tok, err := t.dec.Token()
	if err != nil {
		return t.errorf("invalid JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return t.errorf("expected %q, found %v", string(want), tok)
	}
	return nil
}

// part is a JSON value inside the file, where it starts, and under which
// key, if any.
type part struct {
	key string
	raw json.RawMessage
	off int // in the file
}

// decodePart reads the next value of t's decoder as a part.
func (t *jsonTranslator) decodePart(key string) (part, error) {
	var raw json.RawMessage
	if err := t.dec.Decode(&raw); err != nil {
		return part{}, t.errorf("invalid JSON: %v", err)
	}
	return part{key: key, raw: raw, off: t.base + int(t.dec.InputOffset()) - len(raw)}, nil
}

// elements splits p, an array or an object, into its values; anything
// else is one element.
func (t *jsonTranslator) elements(p part) ([]part, error) {
	trimmed := bytes.TrimSpace(p.raw)
	if len(trimmed) == 0 || trimmed[0] != '[' && trimmed[0] != '{' {
		return []part{p}, nil
	}
	s := newJSONTranslator(p.raw, p.off, t.lineStarts, t.out)
	open, _ := s.dec.Token()
	var out []part
	for s.dec.More() {
		key := ""
		if open == json.Delim('{') {
			tok, err := s.dec.Token()
			if err != nil {
				return nil, s.errorf("invalid JSON: %v", err)
			}
			key = tok.(string)
		}
		e, err := s.decodePart(key)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// body translates the object the decoder is at into a body's items.
func (t *jsonTranslator) body(depth int, top bool) error {
	if err := t.delim('{'); err != nil {
		return err
	}
	for t.dec.More() {
		tok, err := t.dec.Token()
		if err != nil {
			return t.errorf("invalid JSON: %v", err)
		}
		key := tok.(string)
		jl := t.line()
		labels, isBlock := jsonNestedBlocks[key]
		if top {
			labels, isBlock = jsonBlockLabels[key]
		}
		switch {
		case key == "//": // a comment, in HCL's JSON syntax
			if _, err := t.decodePart(key); err != nil {
				return err
			}
		case isBlock:
			p, err := t.decodePart(key)
			if err != nil {
				return err
			}
			items := []part{p}
			if bytes.HasPrefix(bytes.TrimSpace(p.raw), []byte("[")) {
				if items, err = t.elements(p); err != nil {
					return err
				}
			}
			for _, item := range items {
				n := labels
				if n < 0 {
					n = labelCount(item.raw)
				}
				if err := t.block(key, n, nil, item, depth, jl); err != nil {
					return err
				}
			}
		default:
			t.buf.Reset()
			if err := t.value(); err != nil {
				return err
			}
			t.emit(jl, strings.Repeat("  ", depth)+key+" = "+t.buf.String())
		}
	}
	return t.delim('}')
}

// block translates one block of type typ, p, nested once per label still
// to read.
func (t *jsonTranslator) block(typ string, labels int, got []string, p part, depth, jl int) error {
	if len(got) < labels {
		byLabel, err := t.elements(p)
		if err != nil {
			return err
		}
		for _, e := range byLabel {
			if e.key == "" {
				return &Error{Line: t.lineAt(e.off - t.base), Message: fmt.Sprintf("%s block needs %d label(s), as object keys", typ, labels)}
			}
			if err := t.block(typ, labels, append(got, e.key), e, depth, t.lineAt(e.off-t.base)); err != nil {
				return err
			}
		}
		return nil
	}
	header := strings.Repeat("  ", depth) + typ
	for _, l := range got {
		header += " " + strconv.Quote(l)
	}
	t.emit(jl, header+" {")
	if err := newJSONTranslator(p.raw, p.off, t.lineStarts, t.out).body(depth+1, false); err != nil {
		return err
	}
	t.emit(jl, strings.Repeat("  ", depth)+"}")
	return nil
}

// labelCount tells a labelled include ({"root": {"path": ...}}) from a bare
// one ({"path": ...}).
func labelCount(item json.RawMessage) int {
	var m map[string]json.RawMessage
	if json.Unmarshal(item, &m) == nil {
		if _, bare := m["path"]; bare {
			return 0
		}
	}
	return 1
}

// value translates the JSON value at the decoder into an expression, into
// t.buf.
func (t *jsonTranslator) value() error {
	tok, err := t.dec.Token()
	if err != nil {
		return t.errorf("invalid JSON: %v", err)
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '[':
			t.buf.WriteByte('[')
			for i := 0; t.dec.More(); i++ {
				if i > 0 {
					t.buf.WriteString(", ")
				}
				if err := t.value(); err != nil {
					return err
				}
			}
			t.buf.WriteByte(']')
			return t.delim(']')
		case '{':
			t.buf.WriteByte('{')
			for i := 0; t.dec.More(); i++ {
				if i > 0 {
					t.buf.WriteString(", ")
				}
				k, err := t.dec.Token()
				if err != nil {
					return t.errorf("invalid JSON: %v", err)
				}
				t.buf.WriteString(template(k.(string)) + " = ")
				if err := t.value(); err != nil {
					return err
				}
			}
			t.buf.WriteByte('}')
			return t.delim('}')
		}
		return t.errorf("unexpected %v", v)
	case string:
		t.buf.WriteString(template(v))
	case json.Number:
		t.buf.WriteString(v.String())
	case bool:
		t.buf.WriteString(strconv.FormatBool(v))
	case nil:
		t.buf.WriteString("null")
	}
	return nil
}

// template writes a JSON string, which HCL reads as a template, as a quoted
// native template: escaped outside ${...} and %{...}, verbatim inside.
func template(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c == '$' || c == '%') && strings.HasPrefix(s[i+1:], string(c)+"{") {
			b.WriteString(s[i : i+3]) // $${ and %%{ are literal, escaped alike in both syntaxes
			i += 2
			continue
		}
		if (c == '$' || c == '%') && i+1 < len(s) && s[i+1] == '{' {
			end := interpolationEnd(s, i+2)
			b.WriteString(s[i:end])
			i = end - 1
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// interpolationEnd is the index just past the } closing the interpolation
// whose content starts at i, skipping braces inside quoted strings.
func interpolationEnd(s string, i int) int {
	depth, quoted := 1, false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == '{':
			depth++
		case !quoted && c == '}':
			if depth--; depth == 0 {
				return i + 1
			}
		}
	}
	return len(s)
}
