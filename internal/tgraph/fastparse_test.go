package tgraph

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/require"
)

// The fast parser must accept only what hclsyntax accepts and index it the
// same way. These tests and FuzzFastParse compare the two.

// fastCorpus are snippets in and out of the fast parser's subset, valid
// and not. fast marks those the fast parser must handle itself.
var fastCorpus = []struct {
	src  string
	fast bool
}{
	{"", true},
	{"\n\n# comment only\n// another\n/* block */\n", true},
	{`include "root" {
  path = find_in_parent_folders("root.hcl")
}
`, true},
	{`include {
  path = find_in_parent_folders()
}`, true},
	{`locals {
  a = "plain"
  b = "with ${local.a} and $${literal} and %%{literal} and \"quotes\" \\ \t \u0041"
  c = "${local.a}"
  d = "${1}"
  e = ""
  f = 1.5e3
  g = -2
  h = !true
  i = local.m["key"]
  j = local.l[0]
  k = local.l[local.i]
  l = [1, 2, 3,]
  m = { a = 1, "b" = 2, (local.a) = 3, c: 4 }
  n = local.a == "x" ? "yes" : "no"
  o = 1 + 2 * 3 - 4 / 5 % 6
  p = local.a != null && local.b || !local.c
  q = 1 < 2 && 2 <= 3 && 3 > 2 && 3 >= 3
  r = read_terragrunt_config(find_in_parent_folders("account.hcl")).locals.name
  s = (local.a)
  t = try(read_terragrunt_config("x.hcl"), {})
  u = upper(trimspace(" a "))
  v = a-b
  w = local.a - local.b
  x = {
    nested = {
      deeper = [
        "a",
        "b",
      ]
    }
  }
  y = null
  z = false
}
`, true},
	{`dependency "vpc" {
  config_path = "../vpc"

  mock_outputs = {
    vpc_id = "vpc-1234"
    subnet_ids = ["a", "b"]
  }
  mock_outputs_allowed_terraform_commands = ["validate", "plan"]
}

dependencies {
  paths = ["../vpc", "../db"] # trailing comment
}

terraform {
  source = "${get_repo_root()}/modules//vpc"

  extra_arguments "common" {
    commands  = get_terraform_commands_that_need_vars()
    arguments = ["-var-file=${get_terragrunt_dir()}/common.tfvars"]
  }

  extra_arguments "vars" {
    commands           = ["plan"]
    required_var_files = ["${get_parent_terragrunt_dir()}/common.tfvars"]
    optional_var_files = [find_in_parent_folders("region.tfvars", "ignore")]
  }

  before_hook "fmt" {
    commands = ["plan"]
    execute  = ["terraform", "fmt"]
  }
}

generate "provider" {
  path      = "provider.tf"
  if_exists = "overwrite_terragrunt"
  contents  = <<EOF
provider "aws" {
  region = "${local.region}"
}
EOF
}

generate "flush" {
  path     = "x.tf"
  contents = <<-EOT
    indented ${upper("x")}
      more
    EOT
}

inputs = merge(local.common, {
  name   = "x"
  policy = file("${get_terragrunt_dir()}/policy.json")
  vpc    = dependency.vpc.outputs.vpc_id
})
`, true},
	{"a = 1\r\n", false},
	{"a = \"é\"\n", false},
	{"a = [for x in local.l : x]\n", false},
	{"a = {for k, v in local.m : k => v}\n", false},
	{"a = local.l[*].id\n", false},
	{"a = local.l.*.id\n", false},
	{"a = local.l.0\n", false},
	{"a = \"%{ if true }x%{ endif }\"\n", false},
	{"a = \"${~ local.x ~}\"\n", false},
	{"a = f(local.l...)\n", false},
	{"a = provider::x::f()\n", false},
	{"b { a = 1 }\n", false},
	{"b {}\n", false},
	{"a = 1 /* spans\nlines */\n", false},
	// Invalid HCL: hclsyntax must report it, so the fast parser must not
	// accept it.
	{"a = \n", false},
	{"a = 1 b = 2\n", false},
	{"a = 1\na = 2\n", false},
	{"b {\n  a = 1\n  a = 2\n}\n", false},
	{"b {\n  a = 1 }\n", false},
	{"b {\n  a = 1\n} c\n", false},
	{"b {\n", false},
	{"}\n", false},
	{"\"a\" = 1\n", false},
	{"a = \"unterminated\n", false},
	{"a = \"bad \\q escape\"\n", false},
	{"a = (1\n", false},
	{"a = [1 2]\n", false},
	{"a = { b = 1 c = 2 }\n", false},
	{"a = f(1 2)\n", false},
	{"a = 1 +\n 2\n", false},
	{"a = 1.2.3\n", false},
	{"a = 1e\n", false},
	{"a = x &\n", false},
	{"a = <<EOT\nno end\n", false},
	{"a = <<EOT\nx\nEOT", false},
	{"b \"label ${x}\" {\n}\n", false},
	{"b = = 1\n", false},
	{"a = 1,\n", false},
	{"a = true ? 1\n", false},
	{"a = .5\n", false},
	{"a = x.\n", false},
	{"a = x[\n", false},
}

func TestFastParseCorpus(t *testing.T) {
	t.Parallel()
	for i, tc := range fastCorpus {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			_, _, ok := parseFast("c.hcl", []byte(tc.src), true)
			require.Equal(t, tc.fast, ok, "fast parser on:\n%s", tc.src)
			requireSameParse(t, []byte(tc.src))
		})
	}
}

var forExpression = regexp.MustCompile(`[\[{]\s*for\s`)

// TestFastParseFiles compares the parsers on every .hcl file of the
// fixtures and of a generated repository.
func TestFastParseFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	generateRepo(dir, 120)
	for _, root := range []string{"testdata", dir} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".hcl") {
				return err
			}
			src, err := os.ReadFile(p)
			require.NoError(t, err)
			_, _, ok := parseFast(p, src, true)
			// For expressions are outside the fast parser's subset.
			require.Equal(t, !forExpression.Match(src), ok, "%s should take the fast path unless it has a for expression", p)
			requireSameParse(t, src)
			return nil
		})
		require.NoError(t, err)
	}
}

func FuzzFastParse(f *testing.F) {
	for _, tc := range fastCorpus {
		f.Add(tc.src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		requireSameParse(t, []byte(src))
	})
}

// requireSameParse checks that when the fast parser accepts src,
// hclsyntax accepts it too and both index it alike.
func requireSameParse(t *testing.T, src []byte) {
	t.Helper()
	fast, fastErrs, ok := parseFast("c.hcl", src, true)
	if !ok {
		return
	}
	_, diags := hclsyntax.ParseConfig(src, "c.hcl", hcl.InitialPos)
	require.False(t, diags.HasErrors(), "fast parser accepted what hclsyntax rejects (%s):\n%s", diags.Error(), src)
	slow, slowErrs := parseHCL("c.hcl", src)
	require.Equal(t, describeErrors(slowErrs), describeErrors(fastErrs))
	require.Equal(t, describeConfig(slow), describeConfig(fast), "source:\n%s", src)
}

func describeErrors(errs []*Error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	slices.Sort(out)
	return out
}

// describeConfig prints what the index holds, positions included.
func describeConfig(c *config) string {
	var lines []string
	attr := func(what string, a *hclsyntax.Attribute) {
		if a != nil {
			lines = append(lines, fmt.Sprintf("%s %s @%s name@%s = %s", what, a.Name, rangeString(a.SrcRange), rangeString(a.NameRange), exprString(a.Expr)))
		}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range c.locals {
			if !yield(n) {
				return
			}
		}
	}) {
		attr("local", c.locals[name])
	}
	for _, inc := range c.includes {
		lines = append(lines, fmt.Sprintf("include %q @%s", inc.name, rangeString(inc.rng)))
		attr(" path", inc.path)
		attr(" expose", inc.expose)
		attr(" strategy", inc.strategy)
	}
	for _, d := range c.deps {
		lines = append(lines, fmt.Sprintf("dependency %q @%s", d.name, rangeString(d.rng)))
		attr(" config_path", d.configPath)
		attr(" enabled", d.enabled)
	}
	attr("dependencies", c.depPaths)
	attr("source", c.source)
	attr("inputs", c.inputs)
	for _, a := range c.varFiles {
		attr("var files", a)
	}
	var reads []string
	for _, r := range c.reads {
		reads = append(reads, fmt.Sprintf("read %s guarded=%v @%s %s", r.fn, r.guarded, rangeString(r.call.NameRange), exprString(r.call)))
	}
	slices.Sort(reads)
	lines = append(lines, reads...)
	lines = append(lines, fmt.Sprintf("usesOrig=%v", c.usesOrig))
	return strings.Join(lines, "\n")
}

func rangeString(r hcl.Range) string {
	return fmt.Sprintf("%d:%d+%d-%d:%d+%d", r.Start.Line, r.Start.Column, r.Start.Byte, r.End.Line, r.End.Column, r.End.Byte)
}

var opNames = map[*hclsyntax.Operation]string{
	hclsyntax.OpLogicalOr: "||", hclsyntax.OpLogicalAnd: "&&", hclsyntax.OpLogicalNot: "!",
	hclsyntax.OpEqual: "==", hclsyntax.OpNotEqual: "!=",
	hclsyntax.OpGreaterThan: ">", hclsyntax.OpGreaterThanOrEqual: ">=", hclsyntax.OpLessThan: "<", hclsyntax.OpLessThanOrEqual: "<=",
	hclsyntax.OpAdd: "+", hclsyntax.OpSubtract: "-", hclsyntax.OpMultiply: "*", hclsyntax.OpDivide: "/", hclsyntax.OpModulo: "%",
	hclsyntax.OpNegate: "neg",
}

// exprString prints an expression tree without positions.
func exprString(e hclsyntax.Expression) string {
	list := func(es []hclsyntax.Expression) string {
		var parts []string
		for _, x := range es {
			parts = append(parts, exprString(x))
		}
		return strings.Join(parts, ", ")
	}
	switch e := e.(type) {
	case nil:
		return "<nil>"
	case *hclsyntax.LiteralValueExpr:
		return fmt.Sprintf("lit(%#v)", e.Val)
	case *hclsyntax.TemplateExpr:
		return "tmpl(" + list(e.Parts) + ")"
	case *hclsyntax.TemplateWrapExpr:
		return "wrap(" + exprString(e.Wrapped) + ")"
	case *hclsyntax.ScopeTraversalExpr:
		return "var(" + traversalString(e.Traversal) + ")"
	case *hclsyntax.RelativeTraversalExpr:
		return "rel(" + exprString(e.Source) + traversalString(e.Traversal) + ")"
	case *hclsyntax.FunctionCallExpr:
		return fmt.Sprintf("call %s(%s expand=%v)", e.Name, list(e.Args), e.ExpandFinal)
	case *hclsyntax.ConditionalExpr:
		return "cond(" + list([]hclsyntax.Expression{e.Condition, e.TrueResult, e.FalseResult}) + ")"
	case *hclsyntax.BinaryOpExpr:
		return "(" + exprString(e.LHS) + " " + opNames[e.Op] + " " + exprString(e.RHS) + ")"
	case *hclsyntax.UnaryOpExpr:
		return opNames[e.Op] + "(" + exprString(e.Val) + ")"
	case *hclsyntax.TupleConsExpr:
		return "[" + list(e.Exprs) + "]"
	case *hclsyntax.ObjectConsExpr:
		var items []string
		for _, it := range e.Items {
			items = append(items, exprString(it.KeyExpr)+": "+exprString(it.ValueExpr))
		}
		return "{" + strings.Join(items, ", ") + "}"
	case *hclsyntax.ObjectConsKeyExpr:
		return fmt.Sprintf("key(%s force=%v)", exprString(e.Wrapped), e.ForceNonLiteral)
	case *hclsyntax.ParenthesesExpr:
		return "paren(" + exprString(e.Expression) + ")"
	case *hclsyntax.IndexExpr:
		return "index(" + exprString(e.Collection) + ", " + exprString(e.Key) + ")"
	}
	return fmt.Sprintf("%T", e)
}

func traversalString(t hcl.Traversal) string {
	var b strings.Builder
	for _, s := range t {
		switch s := s.(type) {
		case hcl.TraverseRoot:
			b.WriteString(s.Name)
		case hcl.TraverseAttr:
			b.WriteString("." + s.Name)
		case hcl.TraverseIndex:
			fmt.Fprintf(&b, "[%#v]", s.Key)
		default:
			fmt.Fprintf(&b, "<%T>", s)
		}
	}
	return b.String()
}
