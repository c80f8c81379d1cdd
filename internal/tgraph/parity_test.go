package tgraph

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// The fixtures under testdata/parity are small repositories, one per point
// where Gantry's graph was compared with Terragrunt's own (issue 15, item
// 6): the defects fixed, and the places where Gantry is deliberately
// stricter.

// scanFixture scans testdata/parity/name and returns the graph and the
// error, each possibly nil.
func scanFixture(t *testing.T, name string) (*Graph, error) {
	t.Helper()
	return Scan("testdata/parity/" + name)
}

// listing is WriteText of the whole graph.
func listing(t *testing.T, g *Graph) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, WriteText(&b, g, "."))
	return b.String()
}

// TestParityMissingDependencyFailsOnlyItsUnit: a dependency naming a
// directory that does not exist breaks that unit, not the repository.
func TestParityMissingDependencyFailsOnlyItsUnit(t *testing.T) {
	t.Parallel()
	g, err := scanFixture(t, "missing-dependency")
	require.NotNil(t, g, "the rest of the repository is read")
	require.EqualError(t, err, `live/broken/terragrunt.hcl:2: dependency "gone": config_path ../gone is not a directory with terragrunt.hcl`)
	var e *Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, "live/broken/terragrunt.hcl", e.File)

	require.Equal(t, "live/vpc\nlive/app\tafter live/vpc\nlive/downstream\tafter live/broken\n", listing(t, g))
	broken := g.Broken()
	require.Len(t, broken, 1)
	require.Equal(t, "live/broken", broken[0].Path)
	require.Equal(t, []*Error{e}, broken[0].Errors)
	require.Equal(t, []string{"live/vpc"}, broken[0].Dependencies, "what could be evaluated is kept")
	require.Empty(t, g.Unit("live/app").Errors)

	a := g.Affected([]string{"live/broken/terragrunt.hcl"})
	require.Equal(t, []string{"live/broken", "live/downstream"}, a.Selected, "a run selecting the broken unit selects its dependents, which it fails")
	require.Equal(t, []string{"live/vpc", "live/app", "live/broken", "live/downstream"}, g.Affected([]string{"live/vpc/main.tf"}).Selected)
}

// TestParityTwoLevelsOfIncludeAreRefused: Terragrunt refuses an included
// file that includes another when it runs the unit; Gantry refuses it when
// it scans, on that unit, with Terragrunt's reason.
func TestParityTwoLevelsOfIncludeAreRefused(t *testing.T) {
	t.Parallel()
	g, err := scanFixture(t, "two-level-include")
	require.EqualError(t, err, "live/app/terragrunt.hcl:2: live/app/terragrunt.hcl includes _envcommon/mid.hcl, which itself includes root.hcl. Only one level of includes is allowed.")
	require.Equal(t, "live/vpc\n", listing(t, g))
	require.Len(t, g.Broken(), 1)
	require.Equal(t, "live/app", g.Broken()[0].Path)
}

// TestParityForExpressionsReadingFiles: file(), fileexists() and
// mark_as_read() called with a for expression's variable read the files
// the loop names (Gantry used to refuse them: "Unknown variable").
func TestParityForExpressionsReadingFiles(t *testing.T) {
	t.Parallel()
	g, err := scanFixture(t, "for-file-reads")
	require.NoError(t, err)
	app := g.Unit("live/app")
	require.Equal(t, []string{"live/vpc"}, app.Dependencies)
	require.Equal(t, []string{"live/app/", "policies/read.json", "policies/write.json"}, app.Reads)
	require.Equal(t, []string{"live/app"}, g.Affected([]string{"policies/write.json"}).Changed)
	require.Equal(t, []string{"live/app"}, g.Affected([]string{"policies/admin.json"}).Changed,
		"a file fileexists() looked for and did not find, added")

	// A file the loop reads that is not there fails the unit, as it fails
	// Terragrunt.
	_, err = repo{
		"a/terragrunt.hcl": "locals {\n  all = [for f in [\"x.json\"] : file(f)]\n}\n",
	}.scan(t)
	require.ErrorContains(t, err, `a/terragrunt.hcl:2: `)
	require.ErrorContains(t, err, `file("x.json")`)
}

// TestParityExcludesFile: the units .terragrunt-excludes lists are left
// out, as Terragrunt leaves them out of a run from the repository root; a
// dependency on one is no edge, and a change inside one selects nothing.
func TestParityExcludesFile(t *testing.T) {
	t.Parallel()
	g, err := scanFixture(t, "excludes")
	require.NoError(t, err)
	require.Equal(t, "live/prod/vpc\nlive/prod/app\tafter live/prod/vpc\n", listing(t, g))
	a := g.Affected([]string{"live/prod/legacy/main.tf", "live/sandbox/deep/b/terragrunt.hcl"})
	require.Empty(t, a.Selected)
	require.Empty(t, a.Deleted, "an excluded unit is not a deleted one")
	_, owned := g.Owner("live/prod/legacy/main.tf")
	require.False(t, owned)
}

func TestExcludesPatterns(t *testing.T) {
	t.Parallel()
	ex := parseExcludes([]byte("# comment\n\nlive/sandbox/**\n./live/*/legacy/\n  spaced/unit  \n"))
	for dir, want := range map[string]bool{
		"live/sandbox":           true,
		"live/sandbox/a":         true,
		"live/sandbox/deep/b":    true,
		"live/prod/legacy":       true,
		"live/prod/legacy/sub":   false,
		"live/prod/vpc":          false,
		"spaced/unit":            true,
		"live/sandboxes/a":       false,
		"other/live/prod/legacy": false,
	} {
		require.Equal(t, want, ex.match(dir), dir)
	}
}

// TestParityJSONUnits: terragrunt.hcl.json units are read like
// terragrunt.hcl ones (HCL's JSON syntax: blocks as nested objects, strings
// as templates); terragrunt.hcl wins where a directory has both, as in
// Terragrunt; errors name the JSON file's own lines.
func TestParityJSONUnits(t *testing.T) {
	t.Parallel()
	g, err := scanFixture(t, "json-units")
	require.EqualError(t, err, `live/bad/terragrunt.hcl.json:7: dependency "gone": config_path ../gone is not a directory with terragrunt.hcl`)
	require.Equal(t, "live/both\nlive/vpc\nlive/app\tafter live/both, live/vpc\n", listing(t, g))
	require.Equal(t, []string{"live/vpc/", "modules/vpc/", "root.hcl"}, g.Unit("live/vpc").Reads)
	require.Equal(t, []string{"live/app/", "root.hcl"}, g.Unit("live/app").Reads)
	require.Equal(t, []string{"live/vpc"}, g.Unit("live/bad").Dependencies)
	require.Equal(t, []string{"live/vpc", "live/app", "live/bad"}, g.Affected([]string{"modules/vpc/main.tf"}).Selected)
	require.Equal(t, []string{"live/vpc"}, g.Affected([]string{"live/vpc/prod.tfvars"}).Changed, "the optional var file, through the exposed include")
	require.Equal(t, []string{"live/old"}, g.Affected([]string{"live/old/terragrunt.hcl.json"}).Deleted)
}

func TestTranslateJSON(t *testing.T) {
	t.Parallel()
	tr, err := translateJSON([]byte(`{
  "locals": {"a": "x \"${upper(\"y\")}\" $${z} %{ if true }t%{ endif }", "n": 1.5, "b": [true, null]},
  "generate": {"provider": {"path": "p.tf", "contents": "line\nnext"}},
  "include": {"root": {"path": "r.hcl"}}
}`))
	require.NoError(t, err)
	require.Equal(t, `locals {
  a = "x \"${upper("y")}\" $${z} %{ if true }t%{ endif }"
  n = 1.5
  b = [true, null]
}
generate "provider" {
  path = "p.tf"
  contents = "line\nnext"
}
include "root" {
  path = "r.hcl"
}
`, string(tr.src))
	require.Equal(t, []int{0, 2, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4}, tr.lines)
	_, diags := parseHCL("x.hcl", tr.src)
	require.Empty(t, diags)

	_, err = translateJSON([]byte("{\n  \"dependency\": {\"x\": 1\n"))
	require.Error(t, err)
	_, err = translateJSON([]byte(`{"dependency": {"config_path": "../x"}}`))
	require.Error(t, err, "a dependency block needs its label")
}

// TestParityStacks: the unit and stack blocks of a terragrunt.stack.hcl
// are units at the paths terragrunt stack generate writes, read from their
// sources with the blocks' values; the source directories are templates,
// not units; a source outside the repository breaks that unit only.
func TestParityStacks(t *testing.T) {
	t.Parallel()
	g, err := scanFixture(t, "stack")
	const (
		gen = "live/prod/.terragrunt-stack/"
		api = gen + "services/.terragrunt-stack/api"
	)
	require.EqualError(t, err, `live/prod/terragrunt.stack.hcl:30: unit "remote": source git::https://example.com/catalog.git//units/cache?ref=v1.0.0 is fetched from elsewhere; dependency discovery reads only sources in the repository`)
	require.Equal(t, gen+"vpc\n"+gen+"app\tafter "+gen+"vpc\n"+api+"\tafter "+gen+"vpc\nlive/shared/dns\n", listing(t, g))
	require.Equal(t, []string{"catalog/units/vpc/", "live/prod/terragrunt.stack.hcl", "modules/vpc/", "root.hcl"}, g.Unit(gen+"vpc").Reads)
	require.Equal(t, []string{"catalog/stacks/services/terragrunt.stack.hcl", "catalog/units/app/", "catalog/units/app/policy.json", "live/prod/terragrunt.stack.hcl"},
		g.Unit(api).Reads)

	require.Equal(t, []string{gen + "app", api}, g.Affected([]string{"catalog/units/app/policy.json"}).Changed)
	require.Equal(t, []string{gen + "vpc", gen + "app", api}, g.Affected([]string{"modules/vpc/main.tf"}).Selected)
	require.Len(t, g.Affected([]string{"live/prod/terragrunt.stack.hcl"}).Changed, 4, "every unit of the stack, the broken one too")
}

// TestParityRefused: what Terragrunt accepts and dependency discovery
// cannot follow is refused on the unit, saying why (docs/areas/infra.md,
// "Terragrunt differences"), while the other units are read.
func TestParityRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, unit, err string
	}{
		{
			name: "get_env in optional_var_files",
			unit: "terraform {\n  extra_arguments \"vars\" {\n    commands           = [\"plan\"]\n    optional_var_files = [\"${get_env(\"TF_VAR_FILE\", \"dev\")}.tfvars\"]\n  }\n}\n",
			err:  `a/terragrunt.hcl:4: extra_arguments: optional_var_files: function get_env is not supported by dependency discovery: the environment a command will run in is not known when the graph is read`,
		},
		{
			name: "a feature flag in dependencies.paths",
			unit: "feature \"with_b\" {\n  default = true\n}\n\ndependencies {\n  paths = feature.with_b.value ? [\"../b\"] : []\n}\n",
			err:  `a/terragrunt.hcl:6: dependencies: paths: feature.with_b.value: feature flags are not evaluated when discovering dependencies, so dependencies and the files a unit reads must not depend on them`,
		},
		{
			name: "include.X.dependency.Y.config_path through an exposed include",
			unit: "include \"common\" {\n  path   = \"../common.hcl\"\n  expose = true\n}\n\ndependencies {\n  paths = [include.common.dependency.b.config_path]\n}\n",
			err:  `a/terragrunt.hcl:7: dependencies: paths: include.common.dependency.b.config_path: dependency discovery does not read a dependency block through an include; declare the dependency in the unit, or its path in a local of the included file`,
		},
		{
			name: "get_terraform_command() in a source",
			unit: "terraform {\n  source = \"../modules/${get_terraform_command()}\"\n}\n",
			err:  `a/terragrunt.hcl:2: terraform source: function get_terraform_command is not supported by dependency discovery: which command (plan, apply...) will run is not known when the graph is read`,
		},
		{
			name: "each in a dependency block",
			unit: "dependency \"b\" {\n  for_each    = toset([\"../b\"])\n  config_path = each.value\n}\n",
			err:  `a/terragrunt.hcl:3: dependency "b": config_path: each.value: Terragrunt's blocks take no for_each or count, so each is not defined`,
		},
		{
			name: "count in a dependency block",
			unit: "dependency \"b\" {\n  count       = 1\n  config_path = \"../b-${count.index}\"\n}\n",
			err:  `a/terragrunt.hcl:3: dependency "b": config_path: count.index: Terragrunt's blocks take no for_each or count, so count is not defined`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, err := repo{
				"a/terragrunt.hcl": tt.unit,
				"b/terragrunt.hcl": "",
				"common.hcl":       "dependency \"b\" {\n  config_path = \"${get_terragrunt_dir()}/../b\"\n}\n",
			}.scan(t)
			require.EqualError(t, err, tt.err)
			require.Equal(t, "b\n", listing(t, g))
		})
	}
}

// TestParityStricterThanTerragrunt: the three places where Gantry selects
// more than `terragrunt find --filter '...[HEAD~1...HEAD]'`, deliberately
// (docs/areas/infra.md, "Terragrunt differences").
func TestParityStricterThanTerragrunt(t *testing.T) {
	t.Parallel()
	g, err := scanFixture(t, "stricter")
	require.NoError(t, err)
	require.Equal(t, "live/api\nlive/vpc\nlive/app\tafter live/vpc\n", listing(t, g), "the root terragrunt.hcl that units include is no unit")

	// A change in a unit's subdirectory: Terragrunt misses it; it is the
	// unit's, as terraform reads the whole directory.
	require.Equal(t, []string{"live/app"}, g.Affected([]string{"live/app/files/config.yaml"}).Changed)
	// A file read with file(): Terragrunt misses it.
	require.Equal(t, []string{"live/api"}, g.Affected([]string{"shared/policy.json"}).Changed)
	// The root terragrunt.hcl: Terragrunt selects only "."; Gantry every
	// unit including it.
	require.Equal(t, []string{"live/api", "live/vpc", "live/app"}, g.Affected([]string{"terragrunt.hcl"}).Changed)
}

// TestParityTryCatchesFailingCalls: try() takes its fallback when a call in
// it fails, as HCL's does, here find_in_parent_folders finding no env.hcl
// above one unit (Gantry used to refuse the whole repository).
func TestParityTryCatchesFailingCalls(t *testing.T) {
	t.Parallel()
	g, err := scanFixture(t, "try-fallback")
	require.NoError(t, err)
	require.Equal(t, "live/shared\nlive/prod/app\tafter live/shared\nlive/sandbox/app\tafter live/shared\n", listing(t, g))
	require.Contains(t, g.Unit("live/prod/app").Reads, "live/prod/env.hcl")
	require.Equal(t, []string{"live/sandbox/app"}, g.Affected([]string{"live/sandbox/env.hcl"}).Changed,
		"an env.hcl added where the search found none changes what the unit reads")
}

// TestTranslateJSONMatchesHCLsJSONParser evaluates tricky strings, numbers
// and collections both through hcl/json and through the translation to the
// native syntax: the values must be the same.
func TestTranslateJSONMatchesHCLsJSONParser(t *testing.T) {
	t.Parallel()
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{"local": cty.ObjectVal(map[string]cty.Value{"env": cty.StringVal("prod")})},
		Functions: map[string]function.Function{"upper": stdlib.UpperFunc, "format": stdlib.FormatFunc},
	}
	for _, v := range []any{
		`plain`, `with "quotes" and \ backslash`, "new\nline\ttab", `${local.env}-x`, `$${literal}`, `%%{literal}`,
		`${upper("a}b")}`, `${format("%s\"%s", "x", local.env)}`, `%{ if local.env == "prod" }p%{ else }q%{ endif }`,
		`a $ b % c { d }`, `${upper("é")}ü`, 1.5, 42, true, nil, []any{"x", `${local.env}`}, map[string]any{"k": `v-${local.env}`, "n": 2},
	} {
		enc, err := json.Marshal(map[string]any{"locals": map[string]any{"a": v}})
		require.NoError(t, err)
		f, diags := hcljson.Parse(enc, "x.json")
		require.False(t, diags.HasErrors(), diags.Error())
		content, _, diags := f.Body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "locals"}}})
		require.False(t, diags.HasErrors(), diags.Error())
		attrs, diags := content.Blocks[0].Body.JustAttributes()
		require.False(t, diags.HasErrors(), diags.Error())
		want, diags := attrs["a"].Expr.Value(ctx)
		require.False(t, diags.HasErrors(), diags.Error())

		tr, err := translateJSON(enc)
		require.NoError(t, err, string(enc))
		c, errs := parseHCL("x.hcl", tr.src)
		require.Empty(t, errs, string(tr.src))
		got, diags := c.locals["a"].Expr.Value(ctx)
		require.False(t, diags.HasErrors(), diags.Error())
		require.True(t, want.RawEquals(got) || want.Equals(got).True(), "%s: hcl/json %#v, translated %#v (%s)", enc, want, got, tr.src)
	}
}
