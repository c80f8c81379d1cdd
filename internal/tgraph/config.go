package tgraph

import (
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// config is one parsed Terragrunt file (a unit's terragrunt.hcl, an included
// file or a read_terragrunt_config target), indexed by the parts that decide
// dependencies and reads. It is immutable once built and shared between
// goroutines; evaluation state lives in frames.
type config struct {
	// path is repository-relative; a config holds no absolute path, so that
	// Update can reuse it in a scan of another checkout.
	path     string
	src      []byte
	locals   map[string]*hclsyntax.Attribute
	includes []*includeBlock
	deps     []*dependencyBlock
	depPaths *hclsyntax.Attribute // dependencies { paths = [...] }
	source   *hclsyntax.Attribute // terraform { source = ... }
	inputs   *hclsyntax.Attribute
	// varFiles are the required_var_files and optional_var_files lists of
	// terraform { extra_arguments } blocks.
	varFiles []*hclsyntax.Attribute
	reads    []readCall
	// usesOrig is set when the file calls get_original_terragrunt_dir, whose
	// value depends on the unit rather than on the file.
	usesOrig bool
}

type includeBlock struct {
	name     string // "" for a bare include
	path     *hclsyntax.Attribute
	expose   *hclsyntax.Attribute
	strategy *hclsyntax.Attribute // merge_strategy
	rng      hcl.Range
}

type dependencyBlock struct {
	name       string
	configPath *hclsyntax.Attribute
	enabled    *hclsyntax.Attribute
	rng        hcl.Range
}

// readCall is a call of a function that reads a file of the checkout.
type readCall struct {
	fn   string
	call *hclsyntax.FunctionCallExpr
	// guarded is set inside try() or can(), where a missing file is not an
	// error.
	guarded bool
	// loop is the outermost for expression around a call whose path uses
	// the variables of a for expression (file(f) in [for f in ...]): the
	// path has no value of its own, so the loop is evaluated instead,
	// noting each path the call is given.
	loop *hclsyntax.ForExpr
}

// loopReadFuncs are the reading functions whose calls inside a for
// expression are followed through the loop's evaluation.
var loopReadFuncs = map[string]bool{"file": true, "fileexists": true, "mark_as_read": true}

// readFuncs are the functions whose first argument names a file the
// configuration reads.
var readFuncs = map[string]bool{
	"read_terragrunt_config": true,
	"file":                   true,
	"fileexists":             true,
	"templatefile":           true,
	"read_tfvars_file":       true,
	"sops_decrypt_file":      true,
	"mark_as_read":           true,
}

// varFileAttrs are the extra_arguments attributes listing files Terraform
// reads.
var varFileAttrs = map[string]bool{"required_var_files": true, "optional_var_files": true}

// parseConfig parses a configuration, with the fast parser when it can and
// hclsyntax otherwise. withInputs keeps the top-level inputs attribute, for
// files whose inputs another may read. Problems are Errors at the offending
// line.
func parseConfig(rel string, src []byte, withInputs bool) (*config, []*Error) {
	if c, errs, ok := parseFast(rel, src, withInputs); ok {
		return c, errs
	}
	return parseHCL(rel, src)
}

// parseHCL parses with hclsyntax.
func parseHCL(rel string, src []byte) (*config, []*Error) {
	f, diags := hclsyntax.ParseConfig(src, rel, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, []*Error{diagError(diags)}
	}
	body := f.Body.(*hclsyntax.Body)
	ix := newIndexer(rel, src)
	if a := body.Attributes["inputs"]; a != nil {
		ix.attr(a)
	}
	for _, b := range body.Blocks {
		attrs := make([]*hclsyntax.Attribute, 0, len(b.Body.Attributes))
		for _, a := range b.Body.Attributes {
			attrs = append(attrs, a)
		}
		slices.SortFunc(attrs, func(x, y *hclsyntax.Attribute) int { return x.SrcRange.Start.Byte - y.SrcRange.Start.Byte })
		ix.block(b.Type, b.Labels, b.LabelRanges, attrs, b.TypeRange)
		if b.Type == "terraform" {
			for _, nb := range b.Body.Blocks {
				if nb.Type != "extra_arguments" {
					continue
				}
				var files []*hclsyntax.Attribute
				for name, a := range nb.Body.Attributes {
					if varFileAttrs[name] {
						files = append(files, a)
					}
				}
				slices.SortFunc(files, func(x, y *hclsyntax.Attribute) int { return x.SrcRange.Start.Byte - y.SrcRange.Start.Byte })
				ix.varFiles(files)
			}
		}
	}
	ix.walk(body)
	return ix.finish()
}

// indexer builds a config from the top-level items of a file, whichever
// parser read them.
type indexer struct {
	c    *config
	errs []*Error
	w    callWalker
}

func newIndexer(rel string, src []byte) *indexer {
	ix := &indexer{c: &config{path: rel, src: src}}
	ix.w.c = ix.c
	return ix
}

func (ix *indexer) finish() (*config, []*Error) { return ix.c, ix.errs }

// walk records the read calls under n.
func (ix *indexer) walk(n hclsyntax.Node) { hclsyntax.Walk(n, &ix.w) }

// attr takes a top-level attribute.
func (ix *indexer) attr(a *hclsyntax.Attribute) {
	if a.Name == "inputs" {
		ix.c.inputs = a
	}
}

// varFiles takes the var file lists of terraform { extra_arguments }.
func (ix *indexer) varFiles(attrs []*hclsyntax.Attribute) {
	ix.c.varFiles = append(ix.c.varFiles, attrs...)
}

// block takes a top-level block.
func (ix *indexer) block(typ string, labels []string, labelRngs []hcl.Range, attrs []*hclsyntax.Attribute, typeRng hcl.Range) {
	c := ix.c
	get := func(name string) *hclsyntax.Attribute {
		for _, a := range attrs {
			if a.Name == name {
				return a
			}
		}
		return nil
	}
	switch typ {
	case "locals":
		if c.locals == nil {
			c.locals = make(map[string]*hclsyntax.Attribute, len(attrs))
		}
		for _, a := range attrs {
			name := a.Name
			if prev, dup := c.locals[name]; dup {
				ix.errs = append(ix.errs, errorAt(a.NameRange, "local %q is already defined at line %d", name, prev.NameRange.Start.Line))
				continue
			}
			c.locals[name] = a
		}
	case "include":
		if len(labels) > 1 {
			ix.errs = append(ix.errs, errorAt(labelRngs[1], "include block takes at most one label"))
			return
		}
		inc := &includeBlock{path: get("path"), expose: get("expose"), strategy: get("merge_strategy"), rng: typeRng}
		if len(labels) == 1 {
			inc.name = labels[0]
		}
		if inc.path == nil {
			ix.errs = append(ix.errs, errorAt(typeRng, "include %q has no path", inc.name))
			return
		}
		for _, prev := range c.includes {
			if prev.name == inc.name {
				ix.errs = append(ix.errs, errorAt(typeRng, "include %q is already defined at line %d", inc.name, prev.rng.Start.Line))
				return
			}
		}
		c.includes = append(c.includes, inc)
	case "dependency":
		if len(labels) != 1 {
			ix.errs = append(ix.errs, errorAt(typeRng, "dependency block needs exactly one label"))
			return
		}
		d := &dependencyBlock{name: labels[0], configPath: get("config_path"), enabled: get("enabled"), rng: typeRng}
		if d.configPath == nil {
			ix.errs = append(ix.errs, errorAt(typeRng, "dependency %q has no config_path", d.name))
			return
		}
		for _, prev := range c.deps {
			if prev.name == d.name {
				ix.errs = append(ix.errs, errorAt(typeRng, "dependency %q is already defined at line %d", d.name, prev.rng.Start.Line))
				return
			}
		}
		c.deps = append(c.deps, d)
	case "dependencies":
		if a := get("paths"); a != nil {
			c.depPaths = a
		}
	case "terraform":
		if a := get("source"); a != nil {
			c.source = a
		}
	}
}

// noteCall records a function call of the file that reads a file or
// depends on the unit. guarded is set inside try() or can(); fors are the
// for expressions around the call, outermost first.
func (c *config) noteCall(call *hclsyntax.FunctionCallExpr, guarded bool, fors []*hclsyntax.ForExpr) {
	switch {
	case call.Name == "get_original_terragrunt_dir":
		c.usesOrig = true
	case readFuncs[call.Name]:
		rc := readCall{fn: call.Name, call: call, guarded: guarded}
		if loopReadFuncs[call.Name] && len(call.Args) > 0 && usesLoopVariable(call.Args[0], fors) {
			rc.loop = fors[0]
		}
		c.reads = append(c.reads, rc)
	}
}

// usesLoopVariable reports whether expr refers to a variable one of fors
// declares.
func usesLoopVariable(expr hclsyntax.Expression, fors []*hclsyntax.ForExpr) bool {
	for _, t := range expr.Variables() {
		for _, f := range fors {
			if name := t.RootName(); name == f.KeyVar || name == f.ValVar {
				return true
			}
		}
	}
	return false
}

// callWalker notes the calls in a tree hclsyntax built, tracking whether a
// call sits inside try() or can(), and inside which for expressions.
type callWalker struct {
	c      *config
	guards int
	fors   []*hclsyntax.ForExpr
}

func (w *callWalker) Enter(n hclsyntax.Node) hcl.Diagnostics {
	switch n := n.(type) {
	case *hclsyntax.FunctionCallExpr:
		w.c.noteCall(n, w.guards > 0, w.fors)
		if n.Name == "try" || n.Name == "can" {
			w.guards++
		}
	case *hclsyntax.ForExpr:
		w.fors = append(w.fors, n)
	}
	return nil
}

func (w *callWalker) Exit(n hclsyntax.Node) hcl.Diagnostics {
	switch n := n.(type) {
	case *hclsyntax.FunctionCallExpr:
		if n.Name == "try" || n.Name == "can" {
			w.guards--
		}
	case *hclsyntax.ForExpr:
		w.fors = w.fors[:len(w.fors)-1]
	}
	return nil
}
