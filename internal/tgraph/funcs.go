package tgraph

import (
	"fmt"
	"path"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// pureFuncs are the Terraform-style functions that do not depend on where
// they are called. Anything not here or in (*frame).function is reported as
// unsupported when an expression that matters calls it.
var pureFuncs = map[string]function.Function{
	"abs":             stdlib.AbsoluteFunc,
	"can":             tryfunc.CanFunc,
	"ceil":            stdlib.CeilFunc,
	"chomp":           stdlib.ChompFunc,
	"coalesce":        stdlib.CoalesceFunc,
	"coalescelist":    stdlib.CoalesceListFunc,
	"compact":         stdlib.CompactFunc,
	"concat":          stdlib.ConcatFunc,
	"contains":        stdlib.ContainsFunc,
	"distinct":        stdlib.DistinctFunc,
	"element":         stdlib.ElementFunc,
	"endswith":        stringTest(strings.HasSuffix),
	"flatten":         stdlib.FlattenFunc,
	"floor":           stdlib.FloorFunc,
	"format":          stdlib.FormatFunc,
	"formatlist":      stdlib.FormatListFunc,
	"index":           stdlib.IndexFunc,
	"indent":          stdlib.IndentFunc,
	"join":            stdlib.JoinFunc,
	"jsondecode":      stdlib.JSONDecodeFunc,
	"jsonencode":      stdlib.JSONEncodeFunc,
	"keys":            stdlib.KeysFunc,
	"length":          stdlib.LengthFunc,
	"lookup":          stdlib.LookupFunc,
	"lower":           stdlib.LowerFunc,
	"max":             stdlib.MaxFunc,
	"merge":           stdlib.MergeFunc,
	"min":             stdlib.MinFunc,
	"parseint":        stdlib.ParseIntFunc,
	"range":           stdlib.RangeFunc,
	"regex":           stdlib.RegexFunc,
	"regexall":        stdlib.RegexAllFunc,
	"replace":         stdlib.ReplaceFunc,
	"reverse":         stdlib.ReverseListFunc,
	"setunion":        stdlib.SetUnionFunc,
	"slice":           stdlib.SliceFunc,
	"sort":            stdlib.SortFunc,
	"split":           stdlib.SplitFunc,
	"startswith":      stringTest(strings.HasPrefix),
	"strcontains":     stringTest(strings.Contains),
	"strrev":          stdlib.ReverseFunc,
	"substr":          stdlib.SubstrFunc,
	"title":           stdlib.TitleFunc,
	"tobool":          stdlib.MakeToFunc(cty.Bool),
	"tolist":          stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
	"tomap":           stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
	"tonumber":        stdlib.MakeToFunc(cty.Number),
	"toset":           stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
	"tostring":        stdlib.MakeToFunc(cty.String),
	"trim":            stdlib.TrimFunc,
	"trimprefix":      stdlib.TrimPrefixFunc,
	"trimspace":       stdlib.TrimSpaceFunc,
	"trimsuffix":      stdlib.TrimSuffixFunc,
	"try":             tryfunc.TryFunc,
	"upper":           stdlib.UpperFunc,
	"values":          stdlib.ValuesFunc,
	"zipmap":          stdlib.ZipmapFunc,
	"regex_replace":   stdlib.RegexReplaceFunc,
	"setintersection": stdlib.SetIntersectionFunc,
}

// pureCtx is the root of every evaluation context: the pure functions.
var pureCtx = &hcl.EvalContext{Functions: pureFuncs}

func stringTest(f func(s, sub string) bool) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "str", Type: cty.String}, {Name: "substr", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.BoolVal(f(args[0].AsString(), args[1].AsString())), nil
		},
	})
}

// stringsFunc is a function of min to max string arguments returning a
// string, like most of Terragrunt's own.
func stringsFunc(name string, minArgs, maxArgs int, impl func(args []string) (string, error)) function.Function {
	return function.New(&function.Spec{
		VarParam: &function.Parameter{Name: "args", Type: cty.String},
		Type:     function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if len(args) < minArgs || len(args) > maxArgs {
				return cty.NilVal, fmt.Errorf("%s takes %s, not %d", name, argCount(minArgs, maxArgs), len(args))
			}
			ss := make([]string, len(args))
			for i, a := range args {
				ss[i] = a.AsString()
			}
			s, err := impl(ss)
			if err != nil {
				return cty.NilVal, err
			}
			return cty.StringVal(s), nil
		},
	})
}

func argCount(minArgs, maxArgs int) string {
	switch {
	case minArgs == maxArgs && minArgs == 0:
		return "no arguments"
	case minArgs == maxArgs:
		return fmt.Sprintf("%d arguments", minArgs)
	default:
		return fmt.Sprintf("%d to %d arguments", minArgs, maxArgs)
	}
}

// stringFunc is a function of strings to a string that answers for a
// frame: most of Terragrunt's own functions. Both the cty functions given
// to hcl and quick, the direct evaluator, call these.
type stringFunc struct {
	min, max int
	impl     func(fr *frame, args []string) (string, error)
}

var stringFuncs = map[string]stringFunc{
	"get_terragrunt_dir": {0, 0, func(fr *frame, _ []string) (string, error) { return fr.cfg.dir, nil }},
	"get_original_terragrunt_dir": {0, 0, func(fr *frame, _ []string) (string, error) {
		if fr.cfg.orig == "" {
			return "", fmt.Errorf("get_original_terragrunt_dir is not supported in files included by a read_terragrunt_config target")
		}
		return fr.cfg.orig, nil
	}},
	"get_repo_root":           {0, 0, func(fr *frame, _ []string) (string, error) { return fr.s.root, nil }},
	"get_path_from_repo_root": {0, 0, func(fr *frame, _ []string) (string, error) { return relPath(fr.s.root, fr.cfg.dir), nil }},
	"get_path_to_repo_root":   {0, 0, func(fr *frame, _ []string) (string, error) { return relPath(fr.cfg.dir, fr.s.root), nil }},
	"find_in_parent_folders":  {0, 2, (*frame).findInParentFolders},
	"path_relative_to_include": {0, 1, func(fr *frame, args []string) (string, error) {
		dir, ok, err := fr.selectInclude(args)
		if err != nil || !ok {
			return ".", err
		}
		return relPath(dir, fr.cfg.dir), nil
	}},
	"path_relative_from_include": {0, 1, func(fr *frame, args []string) (string, error) {
		dir, ok, err := fr.selectInclude(args)
		if err != nil || !ok {
			return ".", err
		}
		return relPath(fr.cfg.dir, dir), nil
	}},
	"get_parent_terragrunt_dir": {0, 1, func(fr *frame, args []string) (string, error) {
		dir, ok, err := fr.selectInclude(args)
		if err != nil || !ok {
			return fr.cfg.dir, err
		}
		return dir, nil
	}},
	"abspath": {1, 1, func(fr *frame, args []string) (string, error) { return resolve(fr.cfg.dir, args[0]), nil }},
	"mark_as_read": {1, 1, func(fr *frame, args []string) (string, error) {
		abs := resolve(fr.cfg.dir, args[0])
		fr.cfg.funcs.noteRead("mark_as_read", abs)
		return abs, nil
	}},
	"file": {1, 1, func(fr *frame, args []string) (string, error) {
		abs := resolve(fr.cfg.dir, args[0])
		fr.cfg.funcs.noteRead("file", abs)
		rel, ok := fr.s.rel(abs)
		if !ok {
			return "", fmt.Errorf("file(%q) is outside the repository", args[0])
		}
		b, err := fr.s.readFile(rel)
		if err != nil {
			return "", fmt.Errorf("file(%q): %w", args[0], err)
		}
		return string(b), nil
	}},
	"basename": {1, 1, func(_ *frame, args []string) (string, error) { return path.Base(args[0]), nil }},
	"dirname":  {1, 1, func(_ *frame, args []string) (string, error) { return path.Dir(args[0]), nil }},
}

// funcTable holds the context functions for one goroutine. They answer for
// cur, the frame being evaluated, which eval sets (and restores, as
// evaluations nest through read_terragrunt_config).
type funcTable struct {
	cur *frame
	ctx *hcl.EvalContext
	// record, when set, is told the absolute path each reading function
	// is called with (see collectLoopReads).
	record func(fn, abs string)
}

func (t *funcTable) noteRead(fn, abs string) {
	if t.record != nil {
		t.record(fn, abs)
	}
}

func newFuncTable(s *scanner) *funcTable {
	t := &funcTable{ctx: pureCtx.NewChild()}
	t.ctx.Functions = make(map[string]function.Function, len(stringFuncs)+5)
	for name, f := range stringFuncs {
		t.ctx.Functions[name] = stringsFunc(name, f.min, f.max, func(args []string) (string, error) { return f.impl(t.cur, args) })
	}
	t.ctx.Functions["fileexists"] = function.New(&function.Spec{
		Params: []function.Parameter{{Name: "path", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			abs := resolve(t.cur.cfg.dir, args[0].AsString())
			t.noteRead("fileexists", abs)
			rel, ok := s.rel(abs)
			return cty.BoolVal(ok && s.files[rel]), nil
		},
	})
	t.ctx.Functions["read_terragrunt_config"] = function.New(&function.Spec{
		Params:   []function.Parameter{{Name: "config_path", Type: cty.String}},
		VarParam: &function.Parameter{Name: "default", Type: cty.DynamicPseudoType, AllowNull: true},
		Type:     function.StaticReturnType(cty.DynamicPseudoType),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if len(args) > 2 {
				return cty.NilVal, fmt.Errorf("read_terragrunt_config takes 1 or 2 arguments, not %d", len(args))
			}
			c := t.cur.cfg
			abs, rel, ok := s.configTarget(c.dir, args[0].AsString())
			if !ok {
				if len(args) == 2 {
					return args[1], nil
				}
				return cty.NilVal, fmt.Errorf("read_terragrunt_config(%q): %s does not exist", args[0].AsString(), rel)
			}
			return s.readTarget(abs, rel, c).value, nil
		},
	})
	// Their first argument is a read, collected separately; their values
	// are not computed.
	for _, name := range []string{"templatefile", "read_tfvars_file", "sops_decrypt_file"} {
		t.ctx.Functions[name] = function.New(&function.Spec{
			VarParam: &function.Parameter{Name: "args", Type: cty.DynamicPseudoType},
			Type:     function.StaticReturnType(cty.DynamicPseudoType),
			Impl: func([]cty.Value, cty.Type) (cty.Value, error) {
				return cty.NilVal, fmt.Errorf("the value of %s is not supported by dependency discovery", name)
			},
		})
	}
	return t
}

// search is one find_in_parent_folders lookup: the file name looked for,
// from which directory, and what it found ("" when nothing). Lookups are
// cached per scan.
type search struct {
	name  string // as given
	start string // repository-relative directory the search began in
	found string // repository-relative path found, or ""
}

type searchKey struct{ start, name string }

// findInParentFolders looks for a file from the parent of the
// configuration's directory up to the repository root, as Terragrunt does.
func (fr *frame) findInParentFolders(args []string) (string, error) {
	name := unitFile
	if len(args) > 0 && args[0] != "" {
		name = args[0]
	}
	s, cfg := fr.s, fr.cfg
	sr := s.find(path.Dir(cfg.dir), name)
	if sr != nil {
		cfg.searches = append(cfg.searches, sr)
	}
	switch {
	case sr != nil && sr.found != "":
		return s.abs(sr.found), nil
	case len(args) == 2:
		return args[1], nil
	}
	unit, _ := s.rel(cfg.dir)
	return "", fmt.Errorf("find_in_parent_folders: no %s in the parent folders of %s inside the repository", name, unit)
}

// find runs (or recalls) a search for name from the absolute directory
// from upwards; nil when from is outside the repository.
func (s *scanner) find(from, name string) *search {
	start, ok := s.rel(from)
	if !ok {
		return nil
	}
	key := searchKey{start, name}
	s.mu.Lock()
	sr := s.finds[key]
	s.mu.Unlock()
	if sr != nil {
		return sr
	}
	sr = &search{name: name, start: start}
	for dir := start; ; dir = path.Dir(dir) {
		cand := path.Join(dir, name)
		if s.files[cand] || s.dirs[cand] {
			sr.found = cand
			break
		}
		if dir == "." {
			break
		}
	}
	s.mu.Lock()
	if prev := s.finds[key]; prev != nil {
		sr = prev
	} else {
		s.finds[key] = sr
	}
	s.mu.Unlock()
	return sr
}
