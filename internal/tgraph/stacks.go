package tgraph

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// stackFile declares an explicit stack: unit and stack blocks that
// terragrunt stack generate turns into units under .terragrunt-stack.
const stackFile = "terragrunt.stack.hcl"

// stackDir is where a stack's units and nested stacks are generated,
// unless a block sets no_dot_terragrunt_stack.
const stackDir = ".terragrunt-stack"

// maxStackDepth bounds nested stacks (a stack generating itself).
const maxStackDepth = 16

// The scan reads a stack without generating it: each unit block whose
// source is in the checkout becomes a unit at the path Terragrunt would
// generate, whose files are the source directory's, seen there (so that
// relative paths, find_in_parent_folders and dependencies between the
// stack's units resolve as in the generated tree), with the block's values
// as the values variable. The unit reads the source directory and the
// stack files that declare it. A stack block's source is expanded the same
// way, recursively. A generated tree that is committed is read as it is.

// expandStacks adds the units of the stack files found by the walk to
// units. A stack that cannot be read is a broken unit at its directory.
func (s *scanner) expandStacks(units []*unitJob, stacks []string) []*unitJob {
	if len(stacks) == 0 {
		return units
	}
	real := map[string]bool{}
	for _, j := range units {
		real[j.dir] = true
	}
	tab := newFuncTable(s)
	templates := map[string]bool{}
	for _, f := range stacks {
		units = s.expandStack(units, real, templates, tab, f, path.Dir(f), cty.NilVal, []string{f}, 0)
	}
	// The directories blocks name as sources are templates, like a
	// catalog's: not units or stacks of their own.
	return slices.DeleteFunc(units, func(j *unitJob) bool {
		return templates[j.dir] || len(j.stackFiles) > 0 && templates[path.Dir(j.stackFiles[0])]
	})
}

// expandStack expands the stack file f, seen at dir (where it is, or where
// a stack block generates it), with the values a stack block gave it.
// from lists the real stack files that led here.
func (s *scanner) expandStack(units []*unitJob, real, templates map[string]bool, tab *funcTable, f, dir string, values cty.Value, from []string, depth int) []*unitJob {
	fail := func(errs ...*Error) []*unitJob {
		if real[dir] {
			return units
		}
		real[dir] = true
		return append(units, &unitJob{dir: dir, file: path.Join(dir, stackFile), errs: errs, stackFiles: from})
	}
	if depth > maxStackDepth {
		return fail(&Error{File: s.realPath(f), Message: fmt.Sprintf("stacks nested more than %d deep", maxStackDepth)})
	}
	src, err := s.readFile(f)
	if err != nil {
		return fail(&Error{File: s.realPath(f), Message: err.Error()})
	}
	file, diags := hclsyntax.ParseConfig(src, s.realPath(f), hcl.InitialPos)
	if diags.HasErrors() {
		return fail(diagError(diags))
	}
	c, errs := parseHCL(s.realPath(f), src)
	if len(errs) > 0 {
		return fail(errs...)
	}
	cfg := &cfgCtx{path: s.abs(path.Join(dir, stackFile)), dir: s.abs(dir), orig: s.abs(dir), funcs: tab, values: values}
	fr := s.newFrame(c, cfg, nil)
	for _, b := range file.Body.(*hclsyntax.Body).Blocks {
		if b.Type != "unit" && b.Type != "stack" {
			continue
		}
		if len(b.Labels) != 1 {
			return fail(errorAt(b.TypeRange, "%s block needs exactly one label", b.Type))
		}
		what := fmt.Sprintf("%s %q", b.Type, b.Labels[0])
		attr := func(name string) (string, *Error) {
			a := b.Body.Attributes[name]
			if a == nil {
				return "", errorAt(b.TypeRange, "%s has no %s", what, name)
			}
			v, err := fr.evalString(a.Expr)
			if err != nil {
				return "", wrap(err, a.SrcRange, what+": "+name)
			}
			return v, nil
		}
		source, err := attr("source")
		if err != nil {
			return fail(err)
		}
		where, err := attr("path")
		if err != nil {
			return fail(err)
		}
		gen := path.Join(dir, stackDir, where)
		if a := b.Body.Attributes["no_dot_terragrunt_stack"]; a != nil {
			if flat, err := fr.evalBool(a.Expr); err != nil {
				return fail(wrap(err, a.SrcRange, what+": no_dot_terragrunt_stack"))
			} else if flat {
				gen = path.Join(dir, where)
			}
		}
		if !within(gen, dir) || gen == dir {
			return fail(errorAt(b.Body.Attributes["path"].SrcRange, "%s: path %s leaves the stack's directory", what, where))
		}
		blockValues := cty.EmptyObjectVal
		if a := b.Body.Attributes["values"]; a != nil {
			v, err := fr.eval(a.Expr)
			if err != nil {
				return fail(wrap(err, a.SrcRange, what+": values"))
			}
			blockValues = v
		}
		srcRel, problem := s.stackSource(dir, source, b.Type)
		if problem != "" {
			if !real[gen] {
				real[gen] = true
				units = append(units, &unitJob{dir: gen, file: path.Join(gen, unitFile), stackFiles: from,
					errs: []*Error{errorAt(b.Body.Attributes["source"].SrcRange, "%s: source %s %s", what, source, problem)}})
			}
			continue
		}
		templates[srcRel] = true
		if real[gen] {
			continue // generated and committed: read as it is
		}
		s.overlay(gen, srcRel)
		if b.Type == "stack" {
			nested := path.Join(gen, stackFile)
			units = s.expandStack(units, real, templates, tab, nested, gen, blockValues, append(slices.Clip(from), s.realPath(nested)), depth+1)
			continue
		}
		real[gen] = true
		j := &unitJob{dir: gen, file: s.unitFileIn(gen), values: blockValues, stackFiles: from}
		j.c, j.errs = s.parse(j.file, false)
		units = append(units, j)
	}
	return units
}

// stackSource resolves a unit or stack block's source to a directory of
// the checkout, or says why it cannot.
func (s *scanner) stackSource(dir, source, typ string) (string, string) {
	if isRemote(source) {
		return "", "is fetched from elsewhere; dependency discovery reads only sources in the repository"
	}
	local := strings.TrimPrefix(strings.TrimPrefix(source, "file::"), "file://")
	rel, ok := s.rel(resolve(s.abs(dir), strings.ReplaceAll(local, "//", "/")))
	switch {
	case !ok:
		return "", "is outside the repository"
	case !s.dirs[rel]:
		return "", "is not a directory"
	case typ == "unit" && s.unitFileIn(rel) == "":
		return "", "is not a directory with " + unitFile
	case typ == "stack" && !s.files[path.Join(rel, stackFile)]:
		return "", "is not a directory with " + stackFile
	}
	return rel, ""
}

// overlay makes the files and directories of src appear at gen too, as
// stack generate copies them.
func (s *scanner) overlay(gen, src string) {
	s.stackRoots[gen] = src
	var files, dirs []string
	for f := range s.files {
		if rest, ok := strings.CutPrefix(f, src+"/"); ok {
			files = append(files, path.Join(gen, rest))
		}
	}
	for d := range s.dirs {
		if rest, ok := strings.CutPrefix(d, src+"/"); ok {
			dirs = append(dirs, path.Join(gen, rest))
		}
	}
	for d := gen; !s.dirs[d]; d = path.Dir(d) {
		s.dirs[d] = true
	}
	for _, f := range files {
		s.files[f] = true
	}
	for _, d := range dirs {
		s.dirs[d] = true
	}
}

// realPath maps a path of a generated tree to the checkout's file it is a
// copy of; other paths are returned as they are.
func (s *scanner) realPath(rel string) string {
	if len(s.stackRoots) == 0 {
		return rel
	}
	for d := rel; d != "." && d != "/"; d = path.Dir(d) {
		if src, ok := s.stackRoots[d]; ok {
			return s.realPath(src + strings.TrimPrefix(rel, d))
		}
	}
	return rel
}

// readFile reads a file of the checkout, or of a generated tree.
func (s *scanner) readFile(rel string) ([]byte, error) {
	return fs.ReadFile(s.fsys, s.realPath(rel))
}
