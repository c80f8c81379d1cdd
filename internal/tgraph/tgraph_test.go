package tgraph

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// repo is a checkout for a test: file path → content.
type repo map[string]string

func (r repo) fs() fstest.MapFS {
	fsys := fstest.MapFS{}
	for p, c := range r {
		fsys[p] = &fstest.MapFile{Data: []byte(c)}
	}
	return fsys
}

// scan scans r as if checked out at /repo.
func (r repo) scan(t *testing.T) (*Graph, error) {
	t.Helper()
	return ScanFS(r.fs(), "/repo")
}

func (r repo) mustScan(t *testing.T) *Graph {
	t.Helper()
	g, err := r.scan(t)
	require.NoError(t, err)
	return g
}

// with returns a copy of r with more files.
func (r repo) with(more repo) repo {
	out := repo{}
	for p, c := range r {
		out[p] = c
	}
	for p, c := range more {
		out[p] = c
	}
	return out
}

// want is what a test expects of one unit. Reads lists only the reads
// beyond the unit's own directory, which every unit has.
type want struct {
	deps  []string
	reads []string
}

const rootHCL = `locals {
  account = read_terragrunt_config(find_in_parent_folders("account.hcl"))
  region  = read_terragrunt_config(find_in_parent_folders("region.hcl"))
}

remote_state {
  backend = "s3"
  config = {
    bucket = "state-${local.account.locals.name}"
    key    = "${path_relative_to_include()}/terraform.tfstate"
    region = local.region.locals.region
  }
}

inputs = merge(local.account.locals, local.region.locals, {
  token = get_env("TOKEN")
})
`

// live is the usual layout: root.hcl, account and region files, modules.
var live = repo{
	"root.hcl":                            rootHCL,
	"live/prod/account.hcl":               `locals { name = "prod" }`,
	"live/prod/eu-west-1/region.hcl":      `locals { region = "eu-west-1" }`,
	"live/stage/account.hcl":              `locals { name = "stage" }`,
	"live/stage/eu-west-1/region.hcl":     `locals { region = "eu-west-1" }`,
	"modules/vpc/main.tf":                 `resource "terraform_data" "vpc" {}`,
	"modules/app/main.tf":                 `resource "terraform_data" "app" {}`,
	"modules/app/templates/user-data.tpl": `#!/bin/sh`,
	"modules/db/main.tf":                  `resource "terraform_data" "db" {}`,
	"live/prod/eu-west-1/vpc/terragrunt.hcl": `include "root" {
  path = find_in_parent_folders("root.hcl")
}

terraform {
  source = "../../../../modules//vpc"
}
`,
}

const prodRegion = "live/prod/eu-west-1"

// prodReads are what every unit of live's prod region reads through
// root.hcl.
var prodReads = []string{"live/prod/account.hcl", prodRegion + "/region.hcl", "root.hcl"}

func TestScan(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name  string
		repo  repo
		units map[string]want
	}{
		{
			name: "dependency blocks and a dependencies block",
			repo: live.with(repo{
				prodRegion + "/db/terragrunt.hcl": `include "root" {
  path = find_in_parent_folders("root.hcl")
}
terraform {
  source = "../../../../modules//db"
}
dependency "vpc" {
  config_path = "../vpc"
  mock_outputs = { vpc_id = "vpc-mock" }
}
inputs = { vpc_id = dependency.vpc.outputs.vpc_id }
`,
				prodRegion + "/app/terragrunt.hcl": `include "root" {
  path = find_in_parent_folders("root.hcl")
}
terraform {
  source = "${get_repo_root()}/modules/app"
}
dependency "db" {
  config_path = "${get_terragrunt_dir()}/../db"
}
dependencies {
  paths = ["../vpc", "../db"]
}
`,
			}),
			units: map[string]want{
				prodRegion + "/vpc": {reads: append([]string{"modules/"}, prodReads...)},
				prodRegion + "/db":  {deps: []string{prodRegion + "/vpc"}, reads: append([]string{"modules/"}, prodReads...)},
				prodRegion + "/app": {deps: []string{prodRegion + "/db", prodRegion + "/vpc"}, reads: append([]string{"modules/app/"}, prodReads...)},
			},
		},
		{
			name: "an env common file included beside the root, with inherited dependencies",
			repo: live.with(repo{
				"_envcommon/app.hcl": `locals {
  env = read_terragrunt_config(find_in_parent_folders("env.hcl"))
}
terraform {
  source = "${get_repo_root()}/modules/app"
}
dependency "vpc" {
  config_path = "../vpc"
}
dependencies {
  paths = ["${get_terragrunt_dir()}/../vpc"]
}
`,
				prodRegion + "/env.hcl": `locals { env = "prod" }`,
				prodRegion + "/app/terragrunt.hcl": `include "root" {
  path = find_in_parent_folders("root.hcl")
}
include "envcommon" {
  path = "${dirname(find_in_parent_folders("root.hcl"))}/_envcommon/app.hcl"
}
`,
			}),
			units: map[string]want{
				prodRegion + "/vpc": {reads: append([]string{"modules/"}, prodReads...)},
				prodRegion + "/app": {
					deps:  []string{prodRegion + "/vpc"},
					reads: []string{"_envcommon/app.hcl", "live/prod/account.hcl", prodRegion + "/env.hcl", prodRegion + "/region.hcl", "modules/app/", "root.hcl"},
				},
			},
		},
		{
			name: "multiple includes, one exposed and its locals used in paths",
			repo: live.with(repo{
				"_envcommon/db.hcl": `locals {
  source_base = "${get_repo_root()}/modules"
  vpc_dir     = "vpc"
}
`,
				prodRegion + "/db/terragrunt.hcl": `include "root" {
  path = find_in_parent_folders("root.hcl")
}
include "envcommon" {
  path   = "${get_repo_root()}/_envcommon/db.hcl"
  expose = true
}
locals {
  vpc = "../${include.envcommon.locals.vpc_dir}"
}
terraform {
  source = "${include.envcommon.locals.source_base}//db"
}
dependency "vpc" {
  config_path = local.vpc
}
`,
			}),
			units: map[string]want{
				prodRegion + "/vpc": {reads: append([]string{"modules/"}, prodReads...)},
				prodRegion + "/db":  {deps: []string{prodRegion + "/vpc"}, reads: append([]string{"_envcommon/db.hcl", "modules/"}, prodReads...)},
			},
		},
		{
			name: "read_terragrunt_config targets and what they read, values used in paths",
			repo: repo{
				"common/network.hcl": `locals {
  shared = read_terragrunt_config("${get_terragrunt_dir()}/shared.hcl")
  vpc    = local.shared.locals.vpc_unit
}
`,
				"common/shared.hcl": `locals { vpc_unit = "network/vpc" }`,
				"network/vpc/terragrunt.hcl": `terraform {
  source = "git::https://example.com/modules.git//vpc?ref=v1.2.0"
}
`,
				"apps/api/terragrunt.hcl": `locals {
  network = read_terragrunt_config("../../common/network.hcl")
}
dependency "vpc" {
  config_path = "${get_repo_root()}/${local.network.locals.vpc}"
}
inputs = {
  optional = read_terragrunt_config("optional.hcl", { inputs = {} })
}
`,
			},
			units: map[string]want{
				"network/vpc": {},
				"apps/api":    {deps: []string{"network/vpc"}, reads: []string{"common/network.hcl", "common/shared.hcl"}},
			},
		},
		{
			name: "file() and friends are reads",
			repo: repo{
				"policies/s3.json": `{}`,
				"vars/common.yaml": `a: 1`,
				"bucket/terragrunt.hcl": `inputs = {
  policy = file("${get_repo_root()}/policies/s3.json")
  vars   = yamldecode(file(find_in_parent_folders("vars/common.yaml")))
  maybe  = try(file("missing.json"), "{}")
}
`,
			},
			units: map[string]want{
				"bucket": {reads: []string{"policies/s3.json", "vars/common.yaml"}},
			},
		},
		{
			name: "var files of terraform extra_arguments are reads",
			repo: repo{
				"common.tfvars": `region = "eu-west-1"`,
				"root.hcl": `terraform {
  extra_arguments "common" {
    commands           = get_terraform_commands_that_need_vars()
    required_var_files = ["${get_parent_terragrunt_dir()}/common.tfvars"]
    optional_var_files = ["${get_terragrunt_dir()}/local.tfvars", "${get_terragrunt_dir()}/missing.tfvars"]
  }
}
`,
				"app/local.tfvars": `x = 1`,
				"app/terragrunt.hcl": `include "root" {
  path = find_in_parent_folders("root.hcl")
}
`,
			},
			units: map[string]want{"app": {reads: []string{"app/local.tfvars", "common.tfvars", "root.hcl"}}},
		},
		{
			name: "remote module sources read nothing, even with unevaluable versions",
			repo: repo{
				"a/terragrunt.hcl": `terraform {
  source = "tfr:///terraform-aws-modules/vpc/aws?version=5.0.0"
}
`,
				"b/terragrunt.hcl": `terraform {
  source = "git::git@github.com:acme/modules.git//vpc?ref=${get_env("MODULES_REF")}"
}
`,
				"c/terragrunt.hcl": `terraform {
  source = "github.com/acme/modules//db"
}
`,
				"d/terragrunt.hcl": `terraform {
  source = "https://example.com/modules.zip//vpc"
}
`,
			},
			units: map[string]want{"a": {}, "b": {}, "c": {}, "d": {}},
		},
		{
			name: "local module source without // reads only that directory",
			repo: repo{
				"modules/vpc/main.tf": ``,
				"modules/db/main.tf":  ``,
				"vpc/terragrunt.hcl": `terraform {
  source = "../modules/vpc"
}
`,
			},
			units: map[string]want{"vpc": {reads: []string{"modules/vpc/"}}},
		},
		{
			name: "include-only root.hcl, account and region files are not units",
			repo: live,
			units: map[string]want{
				prodRegion + "/vpc": {reads: append([]string{"modules/"}, prodReads...)},
			},
		},
		{
			name: "a root terragrunt.hcl found by find_in_parent_folders() is include-only",
			repo: repo{
				"terragrunt.hcl": `remote_state {
  backend = "local"
  config  = { path = "${path_relative_to_include()}/state" }
}
locals {
  account = read_terragrunt_config(find_in_parent_folders("account.hcl"))
}
`,
				"prod/account.hcl": `locals {}`,
				"prod/app/terragrunt.hcl": `include {
  path = find_in_parent_folders()
}
`,
			},
			units: map[string]want{"prod/app": {reads: []string{"prod/account.hcl", "terragrunt.hcl"}}},
		},
		{
			name: "dependency disabled with enabled = false, no_merge include contributes no dependencies",
			repo: repo{
				"common.hcl": `dependency "b" {
  config_path = "../b"
}
`,
				"b/terragrunt.hcl": ``,
				"c/terragrunt.hcl": ``,
				"a/terragrunt.hcl": `include "common" {
  path           = "../common.hcl"
  merge_strategy = "no_merge"
}
locals {
  use_c = false
}
dependency "c" {
  config_path = "../c"
  enabled     = local.use_c
}
`,
			},
			units: map[string]want{"a": {reads: []string{"common.hcl"}}, "b": {}, "c": {}},
		},
		{
			name: "unused locals with unsupported functions are fine; dependency outputs in inputs too",
			repo: repo{
				"b/terragrunt.hcl": ``,
				"a/terragrunt.hcl": `locals {
  account_id = get_aws_account_id()
  token      = run_cmd("vault", "read")
  dir        = "../b"
}
dependency "b" {
  config_path = local.dir
}
inputs = {
  id = dependency.b.outputs.id
}
`,
			},
			units: map[string]want{"a": {deps: []string{"b"}}, "b": {}},
		},
		{
			name: "path functions and format",
			repo: repo{
				"live/prod/net/vpc/terragrunt.hcl": ``,
				"live/prod/app/terragrunt.hcl": `locals {
  env  = basename(dirname(get_terragrunt_dir()))
  path = format("%s/live/%s/net/%s", get_repo_root(), local.env, "vpc")
}
dependency "vpc" {
  config_path = local.path
}
dependencies {
  paths = [abspath("../net/vpc"), "${get_parent_terragrunt_dir()}/../net/vpc"]
}
`,
			},
			units: map[string]want{"live/prod/app": {deps: []string{"live/prod/net/vpc"}}, "live/prod/net/vpc": {}},
		},
		{
			name: "generated directories are skipped",
			repo: repo{
				"app/terragrunt.hcl": ``,
				"app/.terragrunt-cache/x/y/terragrunt.hcl": `dependency "z" {
  config_path = "../../nowhere"
}
`,
				".git/terragrunt.hcl":                     `not hcl {`,
				"node_modules/pkg/terragrunt.hcl":         ``,
				"app/.terraform/modules/m/terragrunt.hcl": ``,
				"other/.terragrunt-cache/terragrunt.hcl":  ``,
				"other/terragrunt.hcl":                    ``,
				"docs/README.md":                          `no units here`,
				"unrelated.hcl":                           `this is { not parsed`,
			},
			units: map[string]want{"app": {}, "other": {}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := tt.repo.mustScan(t)
			var paths []string
			for _, u := range g.Units {
				paths = append(paths, u.Path)
			}
			var wantPaths []string
			for p := range tt.units {
				wantPaths = append(wantPaths, p)
			}
			require.ElementsMatch(t, wantPaths, paths)
			for p, w := range tt.units {
				u := g.Unit(p)
				require.NotNil(t, u, p)
				require.Equal(t, w.deps, u.Dependencies, "%s dependencies", p)
				reads := append([]string{dirKey(p)}, w.reads...)
				require.ElementsMatch(t, reads, u.Reads, "%s reads", p)
			}
			order, err := g.Order()
			require.NoError(t, err)
			requireDependencyOrder(t, g, order)
		})
	}
}

func TestScanErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		repo repo
		// err is the whole message of the first error.
		err string
	}{
		{
			name: "missing dependency directory",
			repo: live.with(repo{
				"live/prod/app/terragrunt.hcl": `include "root" {
  path = find_in_parent_folders("root.hcl")
}

locals {}

dependency "db" {
  config_path = "../db"
}
`,
				"live/prod/eu-west-1/region.hcl": `locals { region = "eu-west-1" }`,
			}),
			err: `live/prod/app/terragrunt.hcl:8: dependency "db": config_path ../db is not a directory with terragrunt.hcl`,
		},
		{
			name: "dependencies path that is not a unit",
			repo: repo{
				"a/terragrunt.hcl": "dependencies {\n  paths = [\"../modules\"]\n}\n",
				"modules/main.tf":  ``,
			},
			err: `a/terragrunt.hcl:2: dependencies: path ../modules is not a directory with terragrunt.hcl`,
		},
		{
			name: "cycle",
			repo: repo{
				"a/terragrunt.hcl": "dependency \"b\" {\n  config_path = \"../b\"\n}\n",
				"b/terragrunt.hcl": "dependency \"c\" {\n  config_path = \"../c\"\n}\n",
				"c/terragrunt.hcl": "dependencies {\n  paths = [\"../a\"]\n}\n",
			},
			err: `c/terragrunt.hcl:2: dependencies: dependency cycle: a -> b -> c -> a`,
		},
		{
			name: "a unit depending on itself",
			repo: repo{"a/terragrunt.hcl": "dependency \"self\" {\n  config_path = \".\"\n}\n"},
			err:  `a/terragrunt.hcl:2: dependency "self": dependency cycle: a -> a`,
		},
		{
			name: "unparsable unit file",
			repo: repo{"a/terragrunt.hcl": "locals {\n  x = \"a\"\n  y = \n}\n"},
			err:  `a/terragrunt.hcl:3: Invalid expression: Expected the start of an expression, but found an invalid expression token.`,
		},
		{
			name: "unparsable included file",
			repo: repo{
				"root.hcl":         "remote_state {\n  backend = \"s3\"\n",
				"a/terragrunt.hcl": "include \"root\" {\n  path = find_in_parent_folders(\"root.hcl\")\n}\n",
			},
			err: `root.hcl:1: Unclosed configuration block: There is no closing brace for this block before the end of the file. This may be caused by incorrect brace nesting elsewhere in this file.`,
		},
		{
			name: "unsupported function in a dependency path",
			repo: repo{
				"b/terragrunt.hcl": ``,
				"a/terragrunt.hcl": "dependency \"b\" {\n  config_path = \"${get_env(\"ROOT\")}/b\"\n}\n",
			},
			err: `a/terragrunt.hcl:2: dependency "b": config_path: function get_env is not supported by dependency discovery: the environment a command will run in is not known when the graph is read`,
		},
		{
			name: "unsupported function in a local of an included file, for a module source",
			repo: repo{
				"root.hcl":         "locals {\n  modules = run_cmd(\"git\", \"rev-parse\", \"--show-toplevel\")\n}\nterraform {\n  source = \"${local.modules}//vpc\"\n}\n",
				"a/terragrunt.hcl": "include \"root\" {\n  path = find_in_parent_folders(\"root.hcl\")\n}\n",
			},
			err: `root.hcl:2: local.modules: function run_cmd is not supported by dependency discovery: the graph is read without running commands (needed by terraform source at root.hcl:5) (evaluating for unit a)`,
		},
		{
			name: "dependency outputs in a path",
			repo: repo{
				"b/terragrunt.hcl": ``,
				"a/terragrunt.hcl": "dependency \"b\" {\n  config_path = \"../b\"\n}\ndependencies {\n  paths = [dependency.b.outputs.dir]\n}\n",
			},
			err: `a/terragrunt.hcl:5: dependencies: paths: dependency.b.outputs.dir: dependency outputs are not known when discovering dependencies`,
		},
		{
			name: "unknown local",
			repo: repo{"a/terragrunt.hcl": "dependency \"b\" {\n  config_path = local.nope\n}\n"},
			err:  `a/terragrunt.hcl:2: dependency "b": config_path: Unsupported attribute: This object does not have an attribute named "nope".`,
		},
		{
			name: "locals referring to each other in a loop",
			repo: repo{"a/terragrunt.hcl": "locals {\n  x = local.y\n  y = local.x\n}\ndependency \"b\" {\n  config_path = local.x\n}\n"},
			err:  `a/terragrunt.hcl:2: local.x: is part of a cycle of locals (needed by local.y at a/terragrunt.hcl:3) (needed by dependency "b": config_path at a/terragrunt.hcl:6)`,
		},
		{
			name: "missing include file",
			repo: repo{"a/terragrunt.hcl": "include \"env\" {\n  path = \"../env.hcl\"\n}\n"},
			err:  `a/terragrunt.hcl:2: include "env": path ../env.hcl does not exist`,
		},
		{
			name: "find_in_parent_folders that finds nothing",
			repo: repo{"a/terragrunt.hcl": "include \"root\" {\n  path = find_in_parent_folders(\"root.hcl\")\n}\n"},
			err:  `a/terragrunt.hcl:2: include "root": path: Call to function "find_in_parent_folders" failed: find_in_parent_folders: no root.hcl in the parent folders of a inside the repository.`,
		},
		{
			name: "read_terragrunt_config of a missing file",
			repo: repo{"a/terragrunt.hcl": "locals {\n  common = read_terragrunt_config(\"../common.hcl\")\n}\n"},
			err:  `a/terragrunt.hcl:2: read_terragrunt_config("../common.hcl"): common.hcl does not exist`,
		},
		{
			name: "local module source that is missing",
			repo: repo{"a/terragrunt.hcl": "terraform {\n  source = \"../modules//vpc\"\n}\n"},
			err:  `a/terragrunt.hcl:2: terraform source ../modules//vpc: modules is not a directory`,
		},
		{
			name: "dependency on an include-only configuration",
			repo: repo{
				"terragrunt.hcl":   ``,
				"a/terragrunt.hcl": "include {\n  path = find_in_parent_folders()\n}\ndependency \"root\" {\n  config_path = \"..\"\n}\n",
			},
			err: `a/terragrunt.hcl:5: dependency "root": . is a configuration other files include, not a unit`,
		},
		{
			name: "include that is not exposed",
			repo: repo{
				"env.hcl":            "locals {\n  vpc = \"../vpc\"\n}\n",
				"vpc/terragrunt.hcl": ``,
				"a/terragrunt.hcl":   "include \"env\" {\n  path = \"../env.hcl\"\n}\ndependency \"vpc\" {\n  config_path = include.env.locals.vpc\n}\n",
			},
			err: `a/terragrunt.hcl:5: dependency "vpc": config_path: include.env.locals.vpc: include "env" is not exposed (set expose = true)`,
		},
		{
			name: "include cycle, refused as two levels of include",
			repo: repo{
				"x.hcl":            "include \"y\" {\n  path = \"y.hcl\"\n}\n",
				"y.hcl":            "include \"x\" {\n  path = \"x.hcl\"\n}\n",
				"a/terragrunt.hcl": "include \"x\" {\n  path = \"../x.hcl\"\n}\n",
			},
			err: `a/terragrunt.hcl:2: a/terragrunt.hcl includes x.hcl, which itself includes y.hcl. Only one level of includes is allowed.`,
		},
		{
			name: "a unit including itself",
			repo: repo{"a/terragrunt.hcl": "include \"self\" {\n  path = \"terragrunt.hcl\"\n}\n"},
			err:  `a/terragrunt.hcl:2: include "self": a/terragrunt.hcl includes itself`,
		},
		{
			name: "a stack file that cannot be read breaks a unit at its directory",
			repo: repo{"stack/terragrunt.stack.hcl": `unit "vpc" {}`},
			err:  `stack/terragrunt.stack.hcl:1: unit "vpc" has no source`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.repo.scan(t)
			require.Error(t, err)
			var e *Error
			require.True(t, errors.As(err, &e), "error %v has no *Error", err)
			first, _, _ := strings.Cut(err.Error(), "\n")
			require.Equal(t, tt.err, first)
			require.Equal(t, tt.err, e.Error())
		})
	}
}

func TestScanReportsEveryBrokenUnit(t *testing.T) {
	t.Parallel()
	r := repo{}
	for _, u := range []string{"a", "b", "c"} {
		r[u+"/terragrunt.hcl"] = "dependency \"x\" {\n  config_path = \"../missing\"\n}\n"
	}
	_, err := r.scan(t)
	require.EqualError(t, err, strings.Join([]string{
		`a/terragrunt.hcl:2: dependency "x": config_path ../missing is not a directory with terragrunt.hcl`,
		`b/terragrunt.hcl:2: dependency "x": config_path ../missing is not a directory with terragrunt.hcl`,
		`c/terragrunt.hcl:2: dependency "x": config_path ../missing is not a directory with terragrunt.hcl`,
	}, "\n"))
}

func TestAffected(t *testing.T) {
	t.Parallel()
	r := live.with(repo{
		prodRegion + "/db/terragrunt.hcl": `include "root" {
  path = find_in_parent_folders("root.hcl")
}
terraform {
  source = "${get_repo_root()}/modules/db"
}
dependency "vpc" {
  config_path = "../vpc"
}
`,
		prodRegion + "/app/terragrunt.hcl": `include "root" {
  path = find_in_parent_folders("root.hcl")
}
terraform {
  source = "${get_repo_root()}/modules/app"
}
dependency "db" {
  config_path = "../db"
}
inputs = {
  policy = file("policy.json")
}
`,
		prodRegion + "/app/policy.json":     `{}`,
		prodRegion + "/app/files/extra.txt": `x`,
		prodRegion + "/app/worker/terragrunt.hcl": `include "root" {
  path = find_in_parent_folders("root.hcl")
}
terraform {
  source = "${get_repo_root()}/modules/app"
}
`,
		"live/stage/eu-west-1/app/terragrunt.hcl": `include "root" {
  path = find_in_parent_folders("root.hcl")
}
terraform {
  source = "${get_repo_root()}/modules/app"
}
`,
	})
	g := r.mustScan(t)
	var (
		vpc    = prodRegion + "/vpc"
		db     = prodRegion + "/db"
		app    = prodRegion + "/app"
		worker = prodRegion + "/app/worker"
		stage  = "live/stage/eu-west-1/app"
	)

	tests := []struct {
		name     string
		changed  []string
		want     []string // Changed
		selected []string
		deleted  []string
	}{
		{name: "nothing", changed: nil},
		{name: "a file no unit reads", changed: []string{"README.md", "docs/x.md"}},
		{name: "a unit's own file", changed: []string{vpc + "/terragrunt.hcl"}, want: []string{vpc}, selected: []string{vpc, db, app}},
		{name: "a file in a subdirectory of a unit", changed: []string{app + "/files/extra.txt"}, want: []string{app}, selected: []string{app}},
		{name: "a nested unit's file belongs to the nested unit", changed: []string{worker + "/main.tf"}, want: []string{worker}, selected: []string{worker}},
		{name: "a file read with file()", changed: []string{app + "/policy.json"}, want: []string{app}, selected: []string{app}},
		{name: "root.hcl reaches every unit", changed: []string{"root.hcl"}, want: []string{worker, vpc, db, app, stage}, selected: []string{worker, vpc, db, app, stage}},
		{name: "an account file reaches that account's units", changed: []string{"live/stage/account.hcl"}, want: []string{stage}, selected: []string{stage}},
		{name: "a region file", changed: []string{prodRegion + "/region.hcl"}, want: []string{worker, vpc, db, app}, selected: []string{worker, vpc, db, app}},
		{name: "a local module reaches the units using it and their dependents", changed: []string{"modules/db/main.tf"}, want: []string{vpc, db}, selected: []string{vpc, db, app}},
		{name: "a module file deep inside", changed: []string{"modules/app/templates/user-data.tpl"}, want: []string{worker, vpc, app, stage}, selected: []string{worker, vpc, db, app, stage}},
		{name: "a // source copies the whole modules tree, so vpc changes too", changed: []string{"modules/app/main.tf"}, want: []string{worker, vpc, app, stage}, selected: []string{worker, vpc, db, app, stage}},
		{name: "paths as git prints them, with ./", changed: []string{"./" + db + "/terragrunt.hcl"}, want: []string{db}, selected: []string{db, app}},
		{name: "a deleted unit", changed: []string{"live/prod/eu-west-1/cache/terragrunt.hcl", "live/prod/eu-west-1/cache/main.tf"}, deleted: []string{prodRegion + "/cache"}},
		{
			name:     "a deleted account file nearer the unit than the one it now finds",
			changed:  []string{prodRegion + "/account.hcl"},
			want:     []string{worker, vpc, db, app},
			selected: []string{worker, vpc, db, app},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := g.Affected(tt.changed)
			require.Equal(t, tt.want, a.Changed)
			require.Equal(t, tt.selected, a.Selected)
			require.Equal(t, tt.deleted, a.Deleted)
			for _, u := range a.Changed {
				require.NotEmpty(t, a.Files[u], u)
			}
			requireClosedUnderDependents(t, g, a)
		})
	}

	t.Run("dependencies within a selection bridge the units left out", func(t *testing.T) {
		t.Parallel()
		set := func(units ...string) map[string]bool {
			m := map[string]bool{}
			for _, u := range units {
				m[u] = true
			}
			return m
		}
		require.Equal(t, []string{db}, g.DependenciesWithin(app, set(vpc, db, app)), "direct when the dependency is in")
		require.Equal(t, []string{vpc}, g.DependenciesWithin(app, set(vpc, app)), "through db, which is left out")
		require.Empty(t, g.DependenciesWithin(app, set(app, worker)))
		require.Empty(t, g.DependenciesWithin(vpc, set(vpc, db, app)))
		require.Nil(t, g.DependenciesWithin("no/such/unit", set(vpc)))
	})
}

func TestOwner(t *testing.T) {
	t.Parallel()
	g := repo{
		"a/terragrunt.hcl":   ``,
		"a/b/terragrunt.hcl": ``,
		"a/b/c/main.tf":      ``,
		"root.hcl":           ``,
		"x/y/terragrunt.hcl": ``,
	}.mustScan(t)
	for file, want := range map[string]string{
		"a/main.tf":          "a",
		"a/sub/vars.tf":      "a",
		"a/b/terragrunt.hcl": "a/b",
		"a/b/c/main.tf":      "a/b",
		"x/y/z/deep/file.tf": "x/y",
		"root.hcl":           "",
		"x/other.tf":         "",
	} {
		got, ok := g.Owner(file)
		require.Equal(t, want, got, file)
		require.Equal(t, want != "", ok, file)
	}
}

func TestOrderTiesByPath(t *testing.T) {
	t.Parallel()
	g := repo{
		"z/terragrunt.hcl": ``,
		"b/terragrunt.hcl": "dependency \"z\" {\n  config_path = \"../z\"\n}\n",
		"a/terragrunt.hcl": "dependency \"b\" {\n  config_path = \"../b\"\n}\n",
		"m/terragrunt.hcl": ``,
		"c/terragrunt.hcl": ``,
	}.mustScan(t)
	order, err := g.Order()
	require.NoError(t, err)
	require.Equal(t, []string{"c", "m", "z", "b", "a"}, order)
}

func TestRender(t *testing.T) {
	t.Parallel()
	g := repo{
		"vpc/terragrunt.hcl": ``,
		"db/terragrunt.hcl":  "dependency \"vpc\" {\n  config_path = \"../vpc\"\n}\n",
		"app/terragrunt.hcl": "dependencies {\n  paths = [\"../db\", \"../vpc\"]\n}\n",
	}.mustScan(t)

	var text strings.Builder
	require.NoError(t, WriteText(&text, g, "."))
	require.Equal(t, "vpc\ndb\tafter vpc\napp\tafter db, vpc\n", text.String())

	var dot strings.Builder
	require.NoError(t, WriteDOT(&dot, g, "."))
	require.Equal(t, `digraph units {
	"app";
	"db";
	"vpc";
	"app" -> "db";
	"app" -> "vpc";
	"db" -> "vpc";
}
`, dot.String())
	require.Equal(t, dot.String(), g.DOT())

	text.Reset()
	require.NoError(t, WriteText(&text, g, "app"))
	require.Equal(t, "app\tafter db, vpc\n", text.String(), "a dependency outside dir is named, not listed")
	dot.Reset()
	require.NoError(t, WriteDOT(&dot, g, "./db/"))
	require.Equal(t, "digraph units {\n\t\"db\";\n\t\"db\" -> \"vpc\";\n}\n", dot.String())
	require.Equal(t, []*Unit{g.Unit("db")}, g.UnitsUnder("db"))
	require.Empty(t, g.UnitsUnder("d"), "a unit is under its directory, not under a prefix of its name")
	require.Equal(t, g.Units, g.UnitsUnder("."))
}

func TestScanDirectory(t *testing.T) {
	t.Parallel()
	g, err := Scan("testdata/live")
	require.NoError(t, err)
	var text strings.Builder
	require.NoError(t, WriteText(&text, g, "."))
	require.Equal(t, `live/prod/us-east-1/vpc
live/prod/us-east-1/db	after live/prod/us-east-1/vpc
live/prod/us-east-1/app	after live/prod/us-east-1/db, live/prod/us-east-1/vpc
`, text.String())
	app := g.Unit("live/prod/us-east-1/app")
	require.Equal(t, []string{
		"_envcommon/app.hcl",
		"live/prod/account.hcl",
		"live/prod/us-east-1/app/",
		"live/prod/us-east-1/env.hcl",
		"live/prod/us-east-1/region.hcl",
		"modules/app/",
		"root.hcl",
	}, app.Reads)

	_, err = Scan("testdata/does-not-exist")
	require.Error(t, err)
}
