package tgraph

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// cfgCtx is the configuration from whose point of view Terragrunt's functions
// answer: a unit's terragrunt.hcl, or a read_terragrunt_config target, which
// Terragrunt evaluates as if it were the configuration being run. Files
// included by a configuration share its cfgCtx.
type cfgCtx struct {
	path string // absolute path of the configuration file
	dir  string // absolute directory of the configuration file
	// orig is get_original_terragrunt_dir(): the unit that started the
	// evaluation, or "" for a cached read target that does not use it.
	orig string
	// stack lists the read_terragrunt_config targets being evaluated, to
	// stop cycles.
	stack []string
	// searches records the find_in_parent_folders calls made: a pull
	// request deleting a file that one of them used to find changes what
	// the configuration resolves to.
	searches []*search
	// funcs are the goroutine's context functions.
	funcs *funcTable
	// values is the values variable of a unit (or stack) a stack
	// generates; cty.NilVal elsewhere.
	values cty.Value
}

// frame evaluates one file within a cfgCtx. Locals are per file and
// evaluated lazily, only when an expression that decides a dependency or a
// read needs them. A frame belongs to one goroutine.
type frame struct {
	s      *scanner
	c      *config
	cfg    *cfgCtx
	abs    string // absolute path of c
	parent *frame // the including frame; nil for the configuration itself
	incs   []*incFrame
	locals map[string]cty.Value
	busy   map[string]bool
}

// incFrame is a resolved include block.
type incFrame struct {
	blk      *includeBlock
	fr       *frame
	expose   bool
	strategy string
}

func (s *scanner) newFrame(c *config, cfg *cfgCtx, parent *frame) *frame {
	return &frame{s: s, c: c, cfg: cfg, abs: s.abs(c.path), parent: parent}
}

// problem marks an unknown value that stands for an expression that could
// not be evaluated. cty carries marks through operations and function
// calls, so an expression using it ends up unknown and marked, and the
// error reported is the original one rather than a vague "unknown".
type problem struct{ err *Error }

func failed(err *Error) cty.Value { return cty.DynamicVal.Mark(&problem{err: err}) }

// eval evaluates expr to a wholly known value, or returns an Error naming
// what could not be evaluated.
func (fr *frame) eval(expr hclsyntax.Expression) (cty.Value, *Error) {
	if lit, ok := literal(expr); ok {
		return lit, nil
	}
	vars, err := fr.variables(expr)
	if err != nil {
		return cty.NilVal, err
	}
	tab := fr.cfg.funcs
	ctx := tab.ctx
	if vars != nil {
		ctx = tab.ctx.NewChild()
		ctx.Variables = vars
	}
	prev := tab.cur
	tab.cur = fr
	v, diags := expr.Value(ctx)
	tab.cur = prev
	if diags.HasErrors() {
		return cty.NilVal, diagError(diags)
	}
	if v.IsWhollyKnown() {
		if v.Type().IsPrimitiveType() {
			if v.IsMarked() {
				v, _ = v.Unmark()
			}
		} else {
			v, _ = v.UnmarkDeep()
		}
		return v, nil
	}
	_, marks := v.UnmarkDeep()
	var probs []*Error
	for m := range marks {
		if p, ok := m.(*problem); ok {
			probs = append(probs, p.err)
		}
	}
	if len(probs) == 0 {
		return cty.NilVal, errorAt(expr.Range(), "cannot evaluate %s", fr.text(expr.Range()))
	}
	return cty.NilVal, slices.MinFunc(probs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Message, b.Message))
	})
}

// quick evaluates the common string expressions (literals, templates,
// local.NAME, and Terragrunt's string functions of those) directly,
// calling the same function implementations hcl would, without cty's
// machinery. Anything else, and any failure, it leaves to eval, which also
// words the errors.
func (fr *frame) quick(expr hclsyntax.Expression) (string, bool) {
	switch e := expr.(type) {
	case *hclsyntax.LiteralValueExpr:
		if e.Val.Type() == cty.String && e.Val.IsKnown() && !e.Val.IsNull() && !e.Val.IsMarked() {
			return e.Val.AsString(), true
		}
	case *hclsyntax.TemplateExpr:
		if len(e.Parts) == 1 {
			return fr.quick(e.Parts[0])
		}
		var b strings.Builder
		for _, p := range e.Parts {
			s, ok := fr.quick(p)
			if !ok {
				return "", false
			}
			b.WriteString(s)
		}
		return b.String(), true
	case *hclsyntax.TemplateWrapExpr:
		return fr.quick(e.Wrapped)
	case *hclsyntax.ScopeTraversalExpr:
		if len(e.Traversal) != 2 || e.Traversal.RootName() != "local" {
			return "", false
		}
		a, ok := e.Traversal[1].(hcl.TraverseAttr)
		if !ok || fr.c.locals[a.Name] == nil {
			return "", false
		}
		v := fr.local(a.Name)
		if !v.IsKnown() || v.IsMarked() || v.IsNull() || v.Type() != cty.String {
			return "", false
		}
		return v.AsString(), true
	case *hclsyntax.FunctionCallExpr:
		f, ok := stringFuncs[e.Name]
		if !ok || e.ExpandFinal || len(e.Args) < f.min || len(e.Args) > f.max {
			return "", false
		}
		var buf [2]string
		args := buf[:0]
		for _, a := range e.Args {
			s, ok := fr.quick(a)
			if !ok {
				return "", false
			}
			args = append(args, s)
		}
		s, err := f.impl(fr, args)
		return s, err == nil
	}
	return "", false
}

// literal short-cuts the common constant expressions.
func literal(expr hclsyntax.Expression) (cty.Value, bool) {
	switch e := expr.(type) {
	case *hclsyntax.LiteralValueExpr:
		return e.Val, e.Val.IsKnown() && !e.Val.IsNull()
	case *hclsyntax.TemplateExpr:
		if len(e.Parts) == 1 {
			if l, ok := e.Parts[0].(*hclsyntax.LiteralValueExpr); ok && l.Val.Type() == cty.String {
				return l.Val, true
			}
		}
	}
	return cty.NilVal, false
}

// text is the source text at rng, shortened for messages.
func (fr *frame) text(rng hcl.Range) string {
	src := fr.c.src
	if rng.Start.Byte < 0 || rng.End.Byte > len(src) || rng.Start.Byte >= rng.End.Byte {
		return "expression"
	}
	t := string(src[rng.Start.Byte:rng.End.Byte])
	if len(t) > 80 {
		t = t[:77] + "..."
	}
	return t
}

func (fr *frame) evalString(expr hclsyntax.Expression) (string, *Error) {
	if s, ok := fr.quick(expr); ok {
		return s, nil
	}
	v, err := fr.eval(expr)
	if err != nil {
		return "", err
	}
	s, cerr := convert.Convert(v, cty.String)
	if cerr != nil || s.IsNull() {
		return "", errorAt(expr.Range(), "%s must be a string", fr.text(expr.Range()))
	}
	return s.AsString(), nil
}

func (fr *frame) evalBool(expr hclsyntax.Expression) (bool, *Error) {
	v, err := fr.eval(expr)
	if err != nil {
		return false, err
	}
	b, cerr := convert.Convert(v, cty.Bool)
	if cerr != nil || b.IsNull() {
		return false, errorAt(expr.Range(), "%s must be true or false", fr.text(expr.Range()))
	}
	return b.True(), nil
}

func (fr *frame) evalStrings(expr hclsyntax.Expression) ([]string, *Error) {
	if t, ok := expr.(*hclsyntax.TupleConsExpr); ok {
		out := make([]string, 0, len(t.Exprs))
		for _, e := range t.Exprs {
			s, ok := fr.quick(e)
			if !ok {
				break
			}
			out = append(out, s)
		}
		if len(out) == len(t.Exprs) {
			return out, nil
		}
	}
	v, err := fr.eval(expr)
	if err != nil {
		return nil, err
	}
	l, cerr := convert.Convert(v, cty.List(cty.String))
	if cerr != nil || l.IsNull() {
		return nil, errorAt(expr.Range(), "%s must be a list of strings", fr.text(expr.Range()))
	}
	out := make([]string, 0, l.LengthInt())
	for it := l.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() {
			return nil, errorAt(expr.Range(), "%s must not contain null", fr.text(expr.Range()))
		}
		out = append(out, e.AsString())
	}
	return out, nil
}

// variables builds the variables expr refers to, evaluating only the locals
// and include values it uses.
func (fr *frame) variables(expr hclsyntax.Expression) (map[string]cty.Value, *Error) {
	trs := traversals(expr, nil)
	if len(trs) == 0 {
		return nil, nil
	}
	var (
		localNames []string
		allLocals  bool
		incNeeds   map[*incFrame]*incNeed
		bare       bool
		depRange   *hcl.Range
		valuesUsed bool
	)
	for _, t := range trs {
		switch t.RootName() {
		case "local":
			if a, ok := step(t, 1); ok {
				localNames = append(localNames, a)
			} else {
				allLocals = true
			}
		case "include":
			inc, need, isBare, err := fr.includeNeed(t)
			if err != nil {
				return nil, err
			}
			if isBare {
				bare = true
			}
			if incNeeds == nil {
				incNeeds = map[*incFrame]*incNeed{}
			}
			if prev := incNeeds[inc]; prev != nil {
				prev.merge(need)
			} else {
				incNeeds[inc] = need
			}
		case "dependency":
			if depRange == nil {
				r := t.SourceRange()
				depRange = &r
			}
		case "feature":
			r := t.SourceRange()
			return nil, errorAt(r, "%s: feature flags are not evaluated when discovering dependencies, so dependencies and the files a unit reads must not depend on them", fr.text(r))
		case "each", "count":
			r := t.SourceRange()
			return nil, errorAt(r, "%s: Terragrunt's blocks take no for_each or count, so %s is not defined", fr.text(r), t.RootName())
		case "values":
			if fr.cfg.values == cty.NilVal {
				r := t.SourceRange()
				return nil, errorAt(r, "%s: values are set only in units a %s generates", fr.text(r), stackFile)
			}
			valuesUsed = true
		}
	}
	vars := map[string]cty.Value{}
	if allLocals || len(localNames) > 0 {
		if allLocals {
			localNames = localNames[:0]
			for name := range fr.c.locals {
				localNames = append(localNames, name)
			}
		}
		m := make(map[string]cty.Value, len(localNames))
		for _, name := range localNames {
			if _, ok := fr.c.locals[name]; ok {
				m[name] = fr.local(name)
			}
		}
		vars["local"] = cty.ObjectVal(m)
	}
	if incNeeds != nil {
		if bare {
			for inc, need := range incNeeds {
				vars["include"] = inc.fr.exposed(need)
			}
		} else {
			m := make(map[string]cty.Value, len(incNeeds))
			for inc, need := range incNeeds {
				m[inc.blk.name] = inc.fr.exposed(need)
			}
			vars["include"] = cty.ObjectVal(m)
		}
	}
	if valuesUsed {
		vars["values"] = fr.cfg.values
	}
	if depRange != nil {
		vars["dependency"] = failed(errorAt(*depRange,
			"%s: dependency outputs are not known when discovering dependencies", fr.text(*depRange)))
	}
	return vars, nil
}

// traversals appends the variables expr refers to, as expr.Variables()
// would, but without its generic walk for the common node types.
func traversals(expr hclsyntax.Expression, out []hcl.Traversal) []hcl.Traversal {
	switch e := expr.(type) {
	case *hclsyntax.LiteralValueExpr:
	case *hclsyntax.ScopeTraversalExpr:
		out = append(out, e.Traversal)
	case *hclsyntax.TemplateExpr:
		for _, p := range e.Parts {
			out = traversals(p, out)
		}
	case *hclsyntax.TemplateWrapExpr:
		out = traversals(e.Wrapped, out)
	case *hclsyntax.FunctionCallExpr:
		for _, a := range e.Args {
			out = traversals(a, out)
		}
	case *hclsyntax.RelativeTraversalExpr:
		out = traversals(e.Source, out)
	case *hclsyntax.ParenthesesExpr:
		out = traversals(e.Expression, out)
	case *hclsyntax.ConditionalExpr:
		out = traversals(e.Condition, out)
		out = traversals(e.TrueResult, out)
		out = traversals(e.FalseResult, out)
	case *hclsyntax.BinaryOpExpr:
		out = traversals(e.LHS, out)
		out = traversals(e.RHS, out)
	case *hclsyntax.UnaryOpExpr:
		out = traversals(e.Val, out)
	case *hclsyntax.IndexExpr:
		out = traversals(e.Collection, out)
		out = traversals(e.Key, out)
	case *hclsyntax.TupleConsExpr:
		for _, x := range e.Exprs {
			out = traversals(x, out)
		}
	case *hclsyntax.ObjectConsExpr:
		for _, item := range e.Items {
			out = traversals(item.KeyExpr, out)
			out = traversals(item.ValueExpr, out)
		}
	case *hclsyntax.ObjectConsKeyExpr:
		if e.ForceNonLiteral || hcl.ExprAsKeyword(e.Wrapped) == "" {
			out = traversals(e.Wrapped, out)
		}
	default:
		out = append(out, expr.Variables()...)
	}
	return out
}

// step returns the attribute name at t[i].
func step(t hcl.Traversal, i int) (string, bool) {
	if len(t) <= i {
		return "", false
	}
	a, ok := t[i].(hcl.TraverseAttr)
	return a.Name, ok
}

// incNeed is what an expression reads of an exposed include.
type incNeed struct {
	allLocals bool
	locals    []string
	inputs    bool
}

func (n *incNeed) merge(o *incNeed) {
	n.allLocals = n.allLocals || o.allLocals
	n.locals = append(n.locals, o.locals...)
	n.inputs = n.inputs || o.inputs
}

// includeNeed resolves an include.NAME... traversal to the exposed include
// it reads.
func (fr *frame) includeNeed(t hcl.Traversal) (*incFrame, *incNeed, bool, *Error) {
	rng := t.SourceRange()
	name, ok := step(t, 1)
	if !ok {
		return nil, nil, false, errorAt(rng, "%s: refer to one include, as include.NAME", fr.text(rng))
	}
	rest := 2
	var inc *incFrame
	bare := false
	for _, i := range fr.incs {
		if i.blk.name == name {
			inc = i
		}
	}
	if inc == nil && (name == "locals" || name == "inputs") {
		for _, i := range fr.incs {
			if i.blk.name == "" {
				inc, bare, rest = i, true, 1
			}
		}
	}
	switch {
	case inc == nil:
		return nil, nil, false, errorAt(rng, "%s: there is no include block named %q", fr.text(rng), name)
	case !inc.expose:
		return nil, nil, false, errorAt(rng, "%s: include %q is not exposed (set expose = true)", fr.text(rng), inc.blk.name)
	}
	need := &incNeed{}
	switch part, _ := step(t, rest); part {
	case "dependency":
		return nil, nil, false, errorAt(rng, "%s: dependency discovery does not read a dependency block through an include; declare the dependency in the unit, or its path in a local of the included file", fr.text(rng))
	case "locals":
		if l, ok := step(t, rest+1); ok {
			need.locals = []string{l}
		} else {
			need.allLocals = true
		}
	case "inputs":
		need.inputs = true
	default:
		need.allLocals, need.inputs = true, true
	}
	return inc, need, bare, nil
}

// exposed is the value of an exposed include: its locals and inputs, as far
// as need asks.
func (fr *frame) exposed(need *incNeed) cty.Value {
	names := need.locals
	if need.allLocals {
		names = names[:0:0]
		for name := range fr.c.locals {
			names = append(names, name)
		}
	}
	locals := make(map[string]cty.Value, len(names))
	for _, name := range names {
		if _, ok := fr.c.locals[name]; ok {
			locals[name] = fr.local(name)
		}
	}
	obj := map[string]cty.Value{"locals": cty.ObjectVal(locals)}
	if need.inputs && fr.c.inputs != nil {
		obj["inputs"] = fr.attrValue(fr.c.inputs, "inputs")
	}
	return cty.ObjectVal(obj)
}

// attrValue evaluates a, standing in a marked unknown when it cannot be.
func (fr *frame) attrValue(a *hclsyntax.Attribute, what string) cty.Value {
	v, err := fr.eval(a.Expr)
	if err != nil {
		return failed(wrap(err, a.NameRange, what))
	}
	return v
}

// local evaluates local.name once per frame.
func (fr *frame) local(name string) cty.Value {
	if v, ok := fr.locals[name]; ok {
		return v
	}
	a := fr.c.locals[name]
	if fr.busy[name] {
		return failed(errorAt(a.NameRange, "is part of a cycle of locals"))
	}
	if fr.busy == nil {
		fr.busy = map[string]bool{}
		fr.locals = map[string]cty.Value{}
	}
	fr.busy[name] = true
	var v cty.Value
	if s, ok := fr.quick(a.Expr); ok {
		v = cty.StringVal(s)
	} else {
		v = fr.attrValue(a, "local."+name)
	}
	delete(fr.busy, name)
	fr.locals[name] = v
	return v
}

// allLocals evaluates every local, for a read_terragrunt_config result.
func (fr *frame) allLocals() cty.Value {
	m := make(map[string]cty.Value, len(fr.c.locals))
	for name := range fr.c.locals {
		m[name] = fr.local(name)
	}
	return cty.ObjectVal(m)
}

// wrap puts err, found while evaluating what (written at rng), in context.
func wrap(err *Error, rng hcl.Range, what string) *Error {
	if err.File == rng.Filename && err.Line == rng.Start.Line {
		return &Error{File: err.File, Line: err.Line, Message: what + ": " + err.Message}
	}
	return &Error{File: err.File, Line: err.Line,
		Message: fmt.Sprintf("%s (needed by %s at %s:%d)", err.Message, what, rng.Filename, rng.Start.Line)}
}

// selectInclude picks the include a path_relative_* style function refers
// to: the file's own include when called in an included file, else the
// named (or only) include of the configuration.
func (fr *frame) selectInclude(args []string) (includedDir string, ok bool, err error) {
	if fr.parent != nil {
		return path.Dir(fr.abs), true, nil
	}
	if len(fr.incs) == 0 {
		return "", false, nil
	}
	if len(args) > 0 && args[0] != "" {
		for _, i := range fr.incs {
			if i.blk.name == args[0] {
				return path.Dir(i.fr.abs), true, nil
			}
		}
		return "", false, fmt.Errorf("there is no include block named %q", args[0])
	}
	if len(fr.incs) > 1 {
		return "", false, fmt.Errorf("name the include: this configuration has %d include blocks", len(fr.incs))
	}
	return path.Dir(fr.incs[0].fr.abs), true, nil
}
