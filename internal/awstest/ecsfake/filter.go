package ecsfake

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The cluster query language, as far as ListContainerInstances' filter
// needs it:
//
//	expr       = term { ("or" | "||") term }
//	term       = factor { ("and" | "&&") factor }
//	factor     = ("not" | "!") factor | "(" expr ")" | comparison
//	comparison = subject ("==" | "equals" | "!=" | "not_equals") literal
//	           | subject ("in" | "!in" | "not_in") "[" literal { "," literal } "]"
//	           | subject ("exists" | "!exists" | "not_exists")
//	subject    = "attribute:" NAME | "ec2InstanceId" | "agentConnected"
//
// Literals are bare words: the language has no quoting, so a value with a
// space or one of ()[],=!&|~<> cannot be written (ECS attribute values hold
// none of them but the space). Other subjects and
// operators of ECS's language (registeredAt, task:group, =~, >, …) are
// refused as not implemented, so a client using them fails loudly here
// rather than matching wrongly.

// predicate tells whether an instance matches.
type predicate func(*instance) bool

type filterParser struct {
	toks []string
	pos  int
}

func parseFilter(src string) (predicate, error) {
	toks, err := tokenize(src)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("the filter is empty")
	}
	p := &filterParser{toks: toks}
	pred, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, fmt.Errorf("unexpected %q at token %d", p.toks[p.pos], p.pos+1)
	}
	return pred, nil
}

// filterPunct are the language's punctuation, and quotes, which it has no
// use for and no ECS attribute value holds.
const filterPunct = "()[],=!&|~<>\"'"

func tokenize(src string) ([]string, error) {
	var toks []string
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '(' || c == ')' || c == '[' || c == ']' || c == ',':
			toks = append(toks, string(c))
			i++
		case strings.HasPrefix(src[i:], "=="), strings.HasPrefix(src[i:], "!="),
			strings.HasPrefix(src[i:], "=~"), strings.HasPrefix(src[i:], "!~"),
			strings.HasPrefix(src[i:], "&&"), strings.HasPrefix(src[i:], "||"),
			strings.HasPrefix(src[i:], ">="), strings.HasPrefix(src[i:], "<="):
			toks = append(toks, src[i:i+2])
			i += 2
		case c == '!' && i+1 < len(src) && isWordChar(src[i+1]):
			j := i + 1
			for j < len(src) && isWordChar(src[j]) {
				j++
			}
			toks = append(toks, src[i:j])
			i = j
		case c == '!' || c == '<' || c == '>':
			toks = append(toks, string(c))
			i++
		case isWordChar(c):
			j := i
			for j < len(src) && isWordChar(src[j]) {
				j++
			}
			toks = append(toks, src[i:j])
			i = j
		default:
			return nil, fmt.Errorf("unexpected %q at offset %d", c, i)
		}
	}
	return toks, nil
}

func isWordChar(c byte) bool {
	return c > ' ' && c < 0x7f && !strings.ContainsRune(filterPunct, rune(c))
}

func (p *filterParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *filterParser) next() string {
	t := p.peek()
	if p.pos < len(p.toks) {
		p.pos++
	}
	return t
}

func (p *filterParser) expr() (predicate, error) {
	left, err := p.term()
	if err != nil {
		return nil, err
	}
	for p.peek() == "or" || p.peek() == "||" {
		p.next()
		right, err := p.term()
		if err != nil {
			return nil, err
		}
		l := left
		left = func(in *instance) bool { return l(in) || right(in) }
	}
	return left, nil
}

func (p *filterParser) term() (predicate, error) {
	left, err := p.factor()
	if err != nil {
		return nil, err
	}
	for p.peek() == "and" || p.peek() == "&&" {
		p.next()
		right, err := p.factor()
		if err != nil {
			return nil, err
		}
		l := left
		left = func(in *instance) bool { return l(in) && right(in) }
	}
	return left, nil
}

func (p *filterParser) factor() (predicate, error) {
	switch p.peek() {
	case "not", "!":
		p.next()
		inner, err := p.factor()
		if err != nil {
			return nil, err
		}
		return func(in *instance) bool { return !inner(in) }, nil
	case "(":
		p.next()
		inner, err := p.expr()
		if err != nil {
			return nil, err
		}
		if p.next() != ")" {
			return nil, fmt.Errorf("missing )")
		}
		return inner, nil
	}
	return p.comparison()
}

// subjectValue reads a subject of an instance: its value and whether it has it.
type subjectValue func(*instance) (string, bool)

func (p *filterParser) subject() (subjectValue, error) {
	tok := p.next()
	if name, ok := strings.CutPrefix(tok, "attribute:"); ok && name != "" {
		return func(in *instance) (string, bool) {
			v, has := in.attributes[name]
			return v, has
		}, nil
	}
	switch tok {
	case "ec2InstanceId":
		return func(in *instance) (string, bool) { return in.ec2ID, true }, nil
	case "agentConnected":
		return func(in *instance) (string, bool) { return strconv.FormatBool(in.agentConnected), true }, nil
	case "":
		return nil, fmt.Errorf("the filter ends where a subject belongs")
	}
	return nil, fmt.Errorf("subject %q is not attribute:NAME, ec2InstanceId or agentConnected (the only ones ecsfake implements)", tok)
}

func (p *filterParser) literal() (string, error) {
	tok := p.next()
	if tok == "" || !isWordChar(tok[0]) {
		return "", fmt.Errorf("expected a value, found %q", tok)
	}
	return tok, nil
}

func (p *filterParser) list() ([]string, error) {
	if p.next() != "[" {
		return nil, fmt.Errorf("in and not_in take a list: [a, b]")
	}
	var vals []string
	for {
		v, err := p.literal()
		if err != nil {
			return nil, err
		}
		vals = append(vals, v)
		switch p.next() {
		case ",":
		case "]":
			return vals, nil
		default:
			return nil, fmt.Errorf("a list is [a, b, …]")
		}
	}
}

func (p *filterParser) comparison() (predicate, error) {
	subj, err := p.subject()
	if err != nil {
		return nil, err
	}
	op := p.next()
	switch op {
	case "==", "equals", "!=", "not_equals":
		want, err := p.literal()
		if err != nil {
			return nil, err
		}
		eq := op == "==" || op == "equals"
		return func(in *instance) bool {
			v, has := subj(in)
			return (has && v == want) == eq
		}, nil
	case "in", "!in", "not_in":
		vals, err := p.list()
		if err != nil {
			return nil, err
		}
		return func(in *instance) bool {
			v, has := subj(in)
			return (has && slices.Contains(vals, v)) == (op == "in")
		}, nil
	case "exists", "!exists", "not_exists":
		return func(in *instance) bool {
			_, has := subj(in)
			return has == (op == "exists")
		}, nil
	case "":
		return nil, fmt.Errorf("the filter ends where an operator belongs")
	}
	return nil, fmt.Errorf("operator %q is not ==, !=, in, !in, exists or !exists (the only ones ecsfake implements)", op)
}
