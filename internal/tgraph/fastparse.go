package tgraph

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// The fast parser reads the common subset of HCL's native syntax about ten
// times faster than hclsyntax.ParseConfig, which dominates a scan
// otherwise. It builds hclsyntax nodes only for the expressions that decide
// dependencies and reads, and merely checks the syntax of the rest (inputs,
// generate, remote_state, mock_outputs...), unless they call a function
// that reads a file.
//
// It is deliberately strict: on anything outside its subset (for
// expressions, splats, template directives, single-line blocks, non-ASCII
// text, CRLF line ends...) and on any syntax error it gives up, and the
// caller parses the file with hclsyntax, which also words the errors. So it
// must never accept a file hclsyntax rejects, nor build a node hclsyntax
// would build differently; the differential tests and the fuzz test hold it
// to that.

// bailout is panicked to give up on the fast path.
type bailout struct{}

type fastParser struct {
	src       []byte
	file      string
	pos       int
	line      int
	lineStart int
	build     bool // construct nodes (else only check syntax)
	sawRead   bool // a file-reading function was called in the current expression
	guards    int  // try() and can() calls being built around the position
	depth     int  // expressions being parsed, nested
	c         *config
}

// maxDepth bounds expression nesting on the fast path; deeper files, which
// real configurations never are, go to hclsyntax.
const maxDepth = 64

// topBlocks are the top-level blocks whose attributes the index needs, and
// which of their attributes.
var topBlocks = map[string]map[string]bool{
	"locals":       nil, // every attribute
	"include":      {"path": true, "expose": true, "merge_strategy": true},
	"dependency":   {"config_path": true, "enabled": true},
	"dependencies": {"paths": true},
	"terraform":    {"source": true},
}

// parseFast parses src into a config, or reports ok=false when the caller
// must fall back to hclsyntax. withInputs builds the top-level inputs
// attribute too, for files whose inputs may be read.
func parseFast(rel string, src []byte, withInputs bool) (c *config, errs []*Error, ok bool) {
	b := newIndexer(rel, src)
	p := &fastParser{src: src, file: rel, line: 1, c: b.c}
	defer func() {
		if r := recover(); r != nil {
			if _, isBail := r.(bailout); !isBail {
				panic(r)
			}
			c, errs, ok = nil, nil, false
		}
	}()
	var topAttrs []string
	for {
		p.ws(false)
		switch ch := p.peek(); {
		case ch == 0 && p.pos >= len(p.src):
			c, errs = b.finish()
			return c, errs, true
		case ch == '\n':
			p.newline()
		case isIdentStart(ch):
			name, nameRng := p.ident()
			p.ws(false)
			if p.peek() == '=' && p.peekAt(1) != '=' {
				if containsString(topAttrs, name) {
					p.bail()
				}
				topAttrs = append(topAttrs, name)
				if a := p.attribute(name, nameRng, name == "inputs" && withInputs); a != nil {
					b.attr(a)
				}
				continue
			}
			want, interesting := topBlocks[name]
			labels, labelRngs := p.labels()
			attrs, nested := p.blockBody(func(attr []byte) bool {
				return interesting && (want == nil || want[string(attr)])
			}, name == "terraform")
			b.block(name, labels, labelRngs, attrs, nameRng)
			b.varFiles(nested)
		default:
			p.bail()
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (p *fastParser) bail() { panic(bailout{}) }

func (p *fastParser) peek() byte {
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

func (p *fastParser) peekAt(n int) byte {
	if p.pos+n < len(p.src) {
		return p.src[p.pos+n]
	}
	return 0
}

func (p *fastParser) at() hcl.Pos {
	return hcl.Pos{Line: p.line, Column: p.pos - p.lineStart + 1, Byte: p.pos}
}

func (p *fastParser) rng(start hcl.Pos) hcl.Range {
	return hcl.Range{Filename: p.file, Start: start, End: p.at()}
}

func (p *fastParser) newline() {
	p.pos++
	p.line++
	p.lineStart = p.pos
}

// ws skips spaces and comments, and newlines too when nl is set. A line
// comment ends at its newline, which is left for the caller unless nl.
func (p *fastParser) ws(nl bool) {
	for p.pos < len(p.src) {
		switch ch := p.src[p.pos]; {
		case ch == ' ' || ch == '\t':
			p.pos++
		case ch == '\n':
			if !nl {
				return
			}
			p.newline()
		case ch == '#' || ch == '/' && p.peekAt(1) == '/':
			i := bytes.IndexByte(p.src[p.pos:], '\n')
			if i < 0 {
				if !utf8.Valid(p.src[p.pos:]) {
					p.bail()
				}
				p.pos = len(p.src)
				return
			}
			if bytes.IndexByte(p.src[p.pos:p.pos+i], '\r') >= 0 || !utf8.Valid(p.src[p.pos:p.pos+i]) {
				p.bail()
			}
			p.pos += i
		case ch == '/' && p.peekAt(1) == '*':
			i := bytes.Index(p.src[p.pos+2:], []byte("*/"))
			if i < 0 || bytes.IndexByte(p.src[p.pos:p.pos+2+i], '\n') >= 0 || !utf8.Valid(p.src[p.pos:p.pos+2+i]) {
				p.bail()
			}
			p.pos += i + 4
		default:
			return
		}
	}
}

func isIdentStart(ch byte) bool {
	return ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch == '_'
}

func isIdentContinue(ch byte) bool {
	return isIdentStart(ch) || ch >= '0' && ch <= '9' || ch == '-'
}

func isDigit(ch byte) bool { return ch >= '0' && ch <= '9' }

func (p *fastParser) ident() (string, hcl.Range) {
	b, rng := p.identBytes()
	return string(b), rng
}

// identBytes is ident without a copy, for names only compared or looked
// up.
func (p *fastParser) identBytes() ([]byte, hcl.Range) {
	start := p.at()
	i := p.pos
	for i < len(p.src) && isIdentContinue(p.src[i]) {
		i++
	}
	if i < len(p.src) && p.src[i] >= 0x80 {
		p.bail()
	}
	b := p.src[p.pos:i]
	p.pos = i
	return b, p.rng(start)
}

// labels reads block labels up to the opening brace and the newline after
// it. Single-line blocks are left to hclsyntax.
func (p *fastParser) labels() ([]string, []hcl.Range) {
	var labels []string
	var rngs []hcl.Range
	for {
		p.ws(false)
		switch ch := p.peek(); {
		case ch == '{':
			p.pos++
			p.ws(false)
			if p.peek() != '\n' {
				p.bail()
			}
			return labels, rngs
		case ch == '"':
			start := p.at()
			e := p.label()
			labels = append(labels, e)
			rngs = append(rngs, p.rng(start))
		case isIdentStart(ch):
			name, r := p.ident()
			labels = append(labels, name)
			rngs = append(rngs, r)
		default:
			p.bail()
		}
	}
}

// blockBody reads a block body after its opening line, through the closing
// brace and the newline or end of file after it. It returns the attributes
// keep asks for, built, and with varFiles the var file lists of nested
// extra_arguments blocks; other nested blocks are only checked.
func (p *fastParser) blockBody(keep func([]byte) bool, varFiles bool) (attrs, nested []*hclsyntax.Attribute) {
	var names [][]byte
	for {
		p.ws(false)
		switch ch := p.peek(); {
		case ch == '\n':
			p.newline()
		case ch == '}':
			p.pos++
			p.ws(false)
			if p.peek() != '\n' && p.pos < len(p.src) {
				p.bail()
			}
			return attrs, nested
		case isIdentStart(ch):
			name, nameRng := p.identBytes()
			p.ws(false)
			if p.peek() == '=' && p.peekAt(1) != '=' {
				for _, n := range names {
					if bytes.Equal(n, name) {
						p.bail()
					}
				}
				names = append(names, name)
				build := keep(name)
				attrName := ""
				if build {
					attrName = string(name)
				}
				if a := p.attribute(attrName, nameRng, build); a != nil {
					attrs = append(attrs, a)
				}
				continue
			}
			p.labels()
			extra := varFiles && string(name) == "extra_arguments"
			kept, _ := p.blockBody(func(attr []byte) bool { return extra && varFileAttrs[string(attr)] }, false)
			nested = append(nested, kept...)
		default:
			p.bail()
		}
	}
}

// attribute reads "= expression" and the newline (or end of file) after it.
// It builds the attribute when build is set; otherwise it only checks the
// expression, building it after all if it reads a file, so that the read
// is collected.
func (p *fastParser) attribute(name string, nameRng hcl.Range, build bool) *hclsyntax.Attribute {
	eq := p.at()
	p.pos++
	eqRng := p.rng(eq)
	save, saveLine, saveLineStart := p.pos, p.line, p.lineStart
	p.build, p.sawRead = build, false
	expr := p.expr(false)
	if !build && p.sawRead {
		p.pos, p.line, p.lineStart = save, saveLine, saveLineStart
		p.build = true
		p.expr(false)
	}
	p.build = false
	p.ws(false)
	if p.peek() != '\n' && p.pos < len(p.src) {
		p.bail()
	}
	if !build {
		return nil
	}
	return &hclsyntax.Attribute{
		Name:        name,
		Expr:        expr,
		SrcRange:    hcl.Range{Filename: p.file, Start: nameRng.Start, End: expr.Range().End},
		NameRange:   nameRng,
		EqualsRange: eqRng,
	}
}

// Expressions, mirroring hclsyntax's parser. nl is set where newlines are
// skipped (inside parentheses, brackets and interpolations); elsewhere a
// newline ends the expression.

var binaryLevels = [][]struct {
	tok string
	op  *hclsyntax.Operation
}{
	{{"||", hclsyntax.OpLogicalOr}},
	{{"&&", hclsyntax.OpLogicalAnd}},
	{{"==", hclsyntax.OpEqual}, {"!=", hclsyntax.OpNotEqual}},
	{{">=", hclsyntax.OpGreaterThanOrEqual}, {"<=", hclsyntax.OpLessThanOrEqual}, {">", hclsyntax.OpGreaterThan}, {"<", hclsyntax.OpLessThan}},
	{{"+", hclsyntax.OpAdd}, {"-", hclsyntax.OpSubtract}},
	{{"*", hclsyntax.OpMultiply}, {"/", hclsyntax.OpDivide}, {"%", hclsyntax.OpModulo}},
}

func (p *fastParser) expr(nl bool) hclsyntax.Expression {
	cond := p.binary(0, nl)
	p.ws(nl)
	if p.peek() != '?' {
		return cond
	}
	p.pos++
	t := p.expr(nl)
	p.ws(nl)
	if p.peek() != ':' {
		p.bail()
	}
	p.pos++
	f := p.expr(nl)
	if !p.build {
		return nil
	}
	return &hclsyntax.ConditionalExpr{Condition: cond, TrueResult: t, FalseResult: f,
		SrcRange: hcl.RangeBetween(cond.Range(), f.Range())}
}

// opStart marks the bytes that can begin a binary operator.
var opStart = [256]bool{'|': true, '&': true, '=': true, '!': true, '<': true, '>': true, '+': true, '-': true, '*': true, '/': true, '%': true}

func (p *fastParser) binaryOp(level int) *hclsyntax.Operation {
	if !opStart[p.peek()] {
		return nil
	}
	for _, o := range binaryLevels[level] {
		if !bytes.HasPrefix(p.src[p.pos:], []byte(o.tok)) {
			continue
		}
		// "<<" opens a heredoc, "=" alone and "!" alone are not binary.
		next := p.peekAt(len(o.tok))
		switch o.tok {
		case "<":
			if next == '<' || next == '=' {
				continue
			}
		case ">", "!":
			if next == '=' {
				continue
			}
		}
		p.pos += len(o.tok)
		return o.op
	}
	// A lone & or | is no operator at all.
	if ch := p.peek(); (ch == '&' || ch == '|') && p.peekAt(1) != ch {
		p.bail()
	}
	return nil
}

func (p *fastParser) binary(level int, nl bool) hclsyntax.Expression {
	if level == len(binaryLevels) {
		return p.withTraversals(nl)
	}
	lhs := p.binary(level+1, nl)
	var op *hclsyntax.Operation
	var rhs hclsyntax.Expression
	for {
		p.ws(nl)
		newOp := p.binaryOp(level)
		if newOp == nil {
			break
		}
		if op != nil && p.build {
			lhs = &hclsyntax.BinaryOpExpr{LHS: lhs, Op: op, RHS: rhs, SrcRange: hcl.RangeBetween(lhs.Range(), rhs.Range())}
		}
		op = newOp
		rhs = p.binary(level+1, nl)
	}
	if op == nil || !p.build {
		return lhs
	}
	return &hclsyntax.BinaryOpExpr{LHS: lhs, Op: op, RHS: rhs, SrcRange: hcl.RangeBetween(lhs.Range(), rhs.Range())}
}

func (p *fastParser) withTraversals(nl bool) hclsyntax.Expression {
	return p.traversals(p.term(nl), nl)
}

func (p *fastParser) term(nl bool) hclsyntax.Expression {
	if p.depth++; p.depth > maxDepth {
		p.bail()
	}
	e := p.term1(nl)
	p.depth--
	return e
}

func (p *fastParser) term1(nl bool) hclsyntax.Expression {
	p.ws(nl)
	start := p.at()
	switch ch := p.peek(); {
	case ch == '(':
		p.pos++
		e := p.expr(true)
		p.ws(true)
		if p.peek() != ')' {
			p.bail()
		}
		p.pos++
		if !p.build {
			return nil
		}
		return &hclsyntax.ParenthesesExpr{Expression: e, SrcRange: p.rng(start)}
	case isDigit(ch):
		return p.number()
	case isIdentStart(ch):
		nameB, nameRng := p.identBytes()
		p.ws(nl)
		switch p.peek() {
		case '(':
			return p.call(nameB, nameRng)
		case ':':
			if p.peekAt(1) == ':' {
				p.bail()
			}
		}
		if !p.build {
			return nil
		}
		switch name := string(nameB); name {
		case "true":
			return &hclsyntax.LiteralValueExpr{Val: cty.True, SrcRange: nameRng}
		case "false":
			return &hclsyntax.LiteralValueExpr{Val: cty.False, SrcRange: nameRng}
		case "null":
			return &hclsyntax.LiteralValueExpr{Val: cty.NullVal(cty.DynamicPseudoType), SrcRange: nameRng}
		default:
			return &hclsyntax.ScopeTraversalExpr{
				Traversal: hcl.Traversal{hcl.TraverseRoot{Name: name, SrcRange: nameRng}},
				SrcRange:  nameRng,
			}
		}
	case ch == '"':
		return p.template()
	case ch == '<' && p.peekAt(1) == '<':
		if p.build {
			p.bail()
		}
		p.heredoc()
		return nil
	case ch == '-' || ch == '!':
		p.pos++
		symbol := p.rng(start)
		operand := p.withTraversals(nl)
		if !p.build {
			return nil
		}
		op := hclsyntax.OpNegate
		if ch == '!' {
			op = hclsyntax.OpLogicalNot
		}
		return &hclsyntax.UnaryOpExpr{Op: op, Val: operand, SrcRange: hcl.RangeBetween(symbol, operand.Range()), SymbolRange: symbol}
	case ch == '[':
		return p.tuple()
	case ch == '{':
		return p.object()
	}
	p.bail()
	return nil
}

// number reads a number literal the way hclsyntax's scanner delimits one:
// digits, dots and exponents, not ending in a dot.
func (p *fastParser) number() hclsyntax.Expression {
	start := p.at()
	i := p.pos
	for more := true; more && i < len(p.src); {
		ch := p.src[i]
		switch {
		case isDigit(ch) || ch == '.':
			i++
		case (ch == 'e' || ch == 'E') && i+1 < len(p.src) && isDigit(p.src[i+1]):
			i += 2
		case (ch == 'e' || ch == 'E') && i+2 < len(p.src) && (p.src[i+1] == '+' || p.src[i+1] == '-') && isDigit(p.src[i+2]):
			i += 3
		default:
			more = false
		}
	}
	for p.src[i-1] == '.' {
		i--
	}
	lit := string(p.src[p.pos:i])
	p.pos = i
	if isIdentStart(p.peek()) {
		p.bail()
	}
	v, err := cty.ParseNumberVal(lit)
	if err != nil {
		p.bail()
	}
	if !p.build {
		return nil
	}
	return &hclsyntax.LiteralValueExpr{Val: v, SrcRange: p.rng(start)}
}

func (p *fastParser) call(nameB []byte, nameRng hcl.Range) hclsyntax.Expression {
	if readFuncs[string(nameB)] || string(nameB) == "get_original_terragrunt_dir" {
		p.sawRead = true
	}
	guard := string(nameB) == "try" || string(nameB) == "can"
	if guard {
		p.guards++
	}
	open := p.at()
	p.pos++
	openRng := p.rng(open)
	var args []hclsyntax.Expression
	for {
		p.ws(true)
		if p.peek() == ')' {
			break
		}
		a := p.expr(true)
		if p.build {
			args = append(args, a)
		}
		p.ws(true)
		if p.peek() == ')' {
			break
		}
		if p.peek() != ',' {
			p.bail()
		}
		p.pos++
	}
	closeStart := p.at()
	p.pos++
	if guard {
		p.guards--
	}
	if !p.build {
		return nil
	}
	call := &hclsyntax.FunctionCallExpr{Name: string(nameB), Args: args, NameRange: nameRng, OpenParenRange: openRng, CloseParenRange: p.rng(closeStart)}
	p.c.noteCall(call, p.guards > 0, nil) // the fast path gives up on for expressions
	return call
}

func (p *fastParser) traversals(from hclsyntax.Expression, nl bool) hclsyntax.Expression {
	ret := from
	for {
		p.ws(nl)
		start := p.at()
		switch p.peek() {
		case '.':
			if p.peekAt(1) == '.' {
				p.bail()
			}
			p.pos++
			p.ws(nl)
			if !isIdentStart(p.peek()) {
				p.bail()
			}
			name, _ := p.identBytes()
			if p.build {
				ret = appendTraversal(ret, hcl.TraverseAttr{Name: string(name), SrcRange: p.rng(start)}, p.rng(start))
			}
		case '[':
			p.pos++
			p.ws(true)
			if p.peek() == '*' {
				p.bail()
			}
			key := p.expr(true)
			p.ws(true)
			if p.peek() != ']' {
				p.bail()
			}
			p.pos++
			if !p.build {
				continue
			}
			rng := p.rng(start)
			if lit, ok := key.(*hclsyntax.LiteralValueExpr); ok {
				ret = appendTraversal(ret, hcl.TraverseIndex{Key: lit.Val, SrcRange: rng}, rng)
			} else if tmpl, ok := key.(*hclsyntax.TemplateExpr); ok && tmpl.IsStringLiteral() {
				v, _ := tmpl.Value(nil)
				ret = appendTraversal(ret, hcl.TraverseIndex{Key: v, SrcRange: rng}, rng)
			} else {
				ret = &hclsyntax.IndexExpr{Collection: ret, Key: key, SrcRange: hcl.RangeBetween(ret.Range(), rng),
					OpenRange:    hcl.Range{Filename: p.file, Start: start, End: hcl.Pos{Line: start.Line, Column: start.Column + 1, Byte: start.Byte + 1}},
					BracketRange: rng}
			}
		default:
			return ret
		}
	}
}

// appendTraversal mirrors hclsyntax's makeRelativeTraversal.
func appendTraversal(expr hclsyntax.Expression, next hcl.Traverser, rng hcl.Range) hclsyntax.Expression {
	switch t := expr.(type) {
	case *hclsyntax.ScopeTraversalExpr:
		t.Traversal = append(t.Traversal, next)
		t.SrcRange = hcl.RangeBetween(t.SrcRange, rng)
		return t
	case *hclsyntax.RelativeTraversalExpr:
		t.Traversal = append(t.Traversal, next)
		t.SrcRange = hcl.RangeBetween(t.SrcRange, rng)
		return t
	}
	return &hclsyntax.RelativeTraversalExpr{Source: expr, Traversal: hcl.Traversal{next}, SrcRange: hcl.RangeBetween(expr.Range(), rng)}
}

func (p *fastParser) tuple() hclsyntax.Expression {
	start := p.at()
	p.pos++
	p.ws(true)
	p.notFor()
	var exprs []hclsyntax.Expression
	for {
		p.ws(true)
		if p.peek() == ']' {
			break
		}
		e := p.expr(true)
		if p.build {
			exprs = append(exprs, e)
		}
		p.ws(true)
		if p.peek() == ']' {
			break
		}
		if p.peek() != ',' {
			p.bail()
		}
		p.pos++
	}
	p.pos++
	if !p.build {
		return nil
	}
	return &hclsyntax.TupleConsExpr{Exprs: exprs, SrcRange: p.rng(start),
		OpenRange: hcl.Range{Filename: p.file, Start: start, End: hcl.Pos{Line: start.Line, Column: start.Column + 1, Byte: start.Byte + 1}}}
}

// notFor gives up on for expressions.
func (p *fastParser) notFor() {
	if bytes.HasPrefix(p.src[p.pos:], []byte("for")) && !isIdentContinue(p.peekAt(3)) {
		p.bail()
	}
}

func (p *fastParser) object() hclsyntax.Expression {
	start := p.at()
	p.pos++
	save, saveLine, saveLineStart := p.pos, p.line, p.lineStart
	p.ws(true)
	p.notFor()
	p.pos, p.line, p.lineStart = save, saveLine, saveLineStart
	var items []hclsyntax.ObjectConsItem
	for {
		p.ws(false)
		switch p.peek() {
		case '\n':
			p.newline()
			continue
		case '}':
			p.pos++
			if !p.build {
				return nil
			}
			return &hclsyntax.ObjectConsExpr{Items: items, SrcRange: p.rng(start),
				OpenRange: hcl.Range{Filename: p.file, Start: start, End: hcl.Pos{Line: start.Line, Column: start.Column + 1, Byte: start.Byte + 1}}}
		}
		force := p.peek() == '('
		key := p.expr(false)
		p.ws(false)
		switch {
		case p.peek() == ':' || p.peek() == '=' && p.peekAt(1) != '=':
			p.pos++
		default:
			p.bail()
		}
		val := p.expr(false)
		if p.build {
			items = append(items, hclsyntax.ObjectConsItem{KeyExpr: &hclsyntax.ObjectConsKeyExpr{Wrapped: key, ForceNonLiteral: force}, ValueExpr: val})
		}
		p.ws(false)
		switch p.peek() {
		case '}':
		case ',':
			p.pos++
		case '\n':
			p.newline()
		default:
			p.bail()
		}
	}
}

// template reads a quoted template.
func (p *fastParser) template() hclsyntax.Expression {
	start := p.at()
	var parts []hclsyntax.Expression
	var lit []byte
	litStart := p.at()
	interps, lits := 0, 0
	p.pos++
	flush := func() {
		if len(lit) > 0 {
			lits++
			if p.build {
				parts = append(parts, &hclsyntax.LiteralValueExpr{Val: cty.StringVal(string(lit)), SrcRange: p.rng(litStart)})
			}
		}
		lit = lit[:0]
	}
	for {
		ch := p.peek()
		switch {
		case p.pos >= len(p.src) || ch == '\n' || ch == '\r' || ch >= 0x80:
			p.bail()
		case ch == '"':
			flush()
			p.pos++
			if !p.build {
				return nil
			}
			if interps == 1 && lits == 0 {
				return &hclsyntax.TemplateWrapExpr{Wrapped: parts[0], SrcRange: p.rng(start)}
			}
			if len(parts) == 0 {
				// hclsyntax keeps an empty literal for "".
				end := p.at()
				end.Column, end.Byte = end.Column-1, end.Byte-1
				parts = append(parts, &hclsyntax.LiteralValueExpr{Val: cty.StringVal(""), SrcRange: hcl.Range{Filename: p.file, Start: end, End: end}})
			}
			return &hclsyntax.TemplateExpr{Parts: parts, SrcRange: p.rng(start)}
		case ch == '\\':
			lit = p.escape(lit)
			if !p.build {
				lits, lit = lits+1, lit[:0]
			}
		case ch == '$' && p.peekAt(1) == '{':
			flush()
			p.pos += 2
			if p.peek() == '~' {
				p.bail()
			}
			e := p.expr(true)
			p.ws(true)
			if p.peek() != '}' {
				p.bail()
			}
			p.pos++
			interps++
			if p.build {
				parts = append(parts, e)
			}
			litStart = p.at()
		case ch == '$' && p.peekAt(1) == '$' && p.peekAt(2) == '{':
			lit = append(lit, "${"...)
			p.pos += 3
		case ch == '%' && p.peekAt(1) == '{':
			p.bail()
		case ch == '%' && p.peekAt(1) == '%' && p.peekAt(2) == '{':
			lit = append(lit, "%{"...)
			p.pos += 3
		default:
			if p.build {
				lit = append(lit, ch)
			} else {
				lits++
			}
			p.pos++
		}
	}
}

// label reads a quoted block label, which allows no template sequences.
func (p *fastParser) label() string {
	p.pos++
	var lit []byte
	for {
		ch := p.peek()
		switch {
		case p.pos >= len(p.src) || ch == '\n' || ch == '\r' || ch >= 0x80:
			p.bail()
		case ch == '"':
			p.pos++
			return string(lit)
		case ch == '\\':
			lit = p.escape(lit)
		case ch == '$' && (p.peekAt(1) == '{' || p.peekAt(1) == '$'):
			p.bail()
		case ch == '%' && (p.peekAt(1) == '{' || p.peekAt(1) == '%'):
			p.bail()
		default:
			lit = append(lit, ch)
			p.pos++
		}
	}
}

func (p *fastParser) escape(lit []byte) []byte {
	switch p.peekAt(1) {
	case 'n':
		lit = append(lit, '\n')
	case 'r':
		lit = append(lit, '\r')
	case 't':
		lit = append(lit, '\t')
	case '"':
		lit = append(lit, '"')
	case '\\':
		lit = append(lit, '\\')
	case 'u', 'U':
		n := 4
		if p.peekAt(1) == 'U' {
			n = 8
		}
		if p.pos+2+n > len(p.src) {
			p.bail()
		}
		r, err := strconv.ParseUint(string(p.src[p.pos+2:p.pos+2+n]), 16, 32)
		if err != nil || r >= 0x80 {
			p.bail()
		}
		lit = append(lit, byte(r))
		p.pos += 2 + n
		return lit
	default:
		p.bail()
	}
	p.pos += 2
	return lit
}

// heredoc checks a heredoc template; its value is never needed.
func (p *fastParser) heredoc() {
	p.pos += 2
	if p.peek() == '-' {
		p.pos++
	}
	if !isIdentStart(p.peek()) {
		p.bail()
	}
	marker, _ := p.ident()
	if p.peek() != '\n' {
		p.bail()
	}
	p.newline()
	for {
		// At the start of a line: the closing marker?
		end := bytes.IndexByte(p.src[p.pos:], '\n')
		lineEnd := len(p.src)
		if end >= 0 {
			lineEnd = p.pos + end
		}
		if string(bytes.TrimSpace(p.src[p.pos:lineEnd])) == marker {
			if end < 0 {
				p.bail()
			}
			p.pos = lineEnd
			return
		}
		for {
			ch := p.peek()
			switch {
			case p.pos >= len(p.src) || ch == '\r' || ch >= 0x80:
				p.bail()
			case ch == '\n':
				p.newline()
			case ch == '$' && p.peekAt(1) == '{':
				p.pos += 2
				if p.peek() == '~' {
					p.bail()
				}
				p.expr(true)
				p.ws(true)
				if p.peek() != '}' {
					p.bail()
				}
				p.pos++
				continue
			case ch == '%' && p.peekAt(1) == '{':
				p.bail()
			case (ch == '$' || ch == '%') && p.peekAt(1) == ch && p.peekAt(2) == '{':
				p.pos += 3
				continue
			default:
				p.pos++
				continue
			}
			break
		}
	}
}
