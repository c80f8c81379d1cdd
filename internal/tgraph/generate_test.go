package tgraph

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/require"
)

// genModules are the modules of a generated repository; units pick one each.
var genModules = []string{
	"vpc", "subnets", "security-group", "rds", "redis", "ecs-cluster", "ecs-service",
	"alb", "s3-bucket", "iam-role", "kms-key", "sqs-queue", "sns-topic", "lambda",
	"dynamodb", "eks", "cloudfront", "route53-zone", "acm-cert", "waf",
}

var (
	genRegions = []string{"us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-2"}
	genEnvs    = []string{"dev", "qa", "stage", "prod"}
)

// genUnitsPerEnv is how many units each environment folder holds.
const genUnitsPerEnv = 25

// genUnit describes one generated unit, for tests that check the scan
// against what was generated.
type genUnit struct {
	dir    string
	module string
	deps   []string
	// shared is set for units taking their source from _envcommon, which
	// copies only the module's own directory; the others copy all of
	// modules/ (a "//" source).
	shared bool
}

// generateRepo writes a repository of n units laid out the way Terragrunt
// repositories usually are (live/ACCOUNT/REGION/ENV/UNIT with root.hcl,
// account.hcl, region.hcl and env.hcl on the way, _envcommon/ and
// modules/), each unit with 0–3 dependency blocks on earlier units of its
// environment and sometimes a dependencies block reaching into the
// account's first environment. It returns the units in generation order,
// which is a dependency order.
func generateRepo(dir string, n int) []genUnit {
	rng := rand.New(rand.NewPCG(uint64(n), 2026))
	write := func(rel, content string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			panic(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			panic(err)
		}
	}
	write("root.hcl", genRoot)
	for _, m := range genModules {
		write("modules/"+m+"/main.tf", fmt.Sprintf(genModuleMain, m))
		write("modules/"+m+"/variables.tf", genModuleVariables)
		write("modules/"+m+"/outputs.tf", genModuleOutputs)
		write("_envcommon/"+m+".hcl", fmt.Sprintf(genEnvcommon, m))
	}
	var units []genUnit
	envsPerAccount := len(genRegions) * len(genEnvs)
	for env := 0; len(units) < n; env++ {
		acct := fmt.Sprintf("acct-%02d", env/envsPerAccount)
		region := genRegions[env/len(genEnvs)%len(genRegions)]
		envName := genEnvs[env%len(genEnvs)]
		envDir := path.Join("live", acct, region, envName)
		if env%envsPerAccount == 0 {
			write(path.Join("live", acct, "account.hcl"), fmt.Sprintf(genAccount, acct, 100000000000+env/envsPerAccount))
		}
		if env%len(genEnvs) == 0 {
			write(path.Join("live", acct, region, "region.hcl"), fmt.Sprintf(genRegion, region))
		}
		write(path.Join(envDir, "env.hcl"), fmt.Sprintf(genEnv, envName))
		first := len(units)
		// The account's first environment, which later ones may depend on.
		accountFirst := first - (env%envsPerAccount)*genUnitsPerEnv
		for k := 0; k < genUnitsPerEnv && len(units) < n; k++ {
			m := genModules[rng.IntN(len(genModules))]
			u := genUnit{dir: path.Join(envDir, fmt.Sprintf("%s-%02d", m, k)), module: m, shared: rng.IntN(3) != 0}
			var b strings.Builder
			b.WriteString("include \"root\" {\n  path = find_in_parent_folders(\"root.hcl\")\n}\n\n")
			if u.shared {
				fmt.Fprintf(&b, "include \"envcommon\" {\n  path   = \"${dirname(find_in_parent_folders(\"root.hcl\"))}/_envcommon/%s.hcl\"\n  expose = true\n}\n\n", m)
				fmt.Fprintf(&b, "locals {\n  name = \"${include.envcommon.locals.env}-%s-%02d\"\n}\n\n", m, k)
			} else {
				fmt.Fprintf(&b, "locals {\n  env_vars = read_terragrunt_config(find_in_parent_folders(\"env.hcl\"))\n  name     = \"${local.env_vars.locals.environment}-%s-%02d\"\n}\n\n", m, k)
				fmt.Fprintf(&b, "terraform {\n  source = \"../../../../../modules//%s\"\n}\n\n", m)
			}
			var inputs []string
			for _, d := range pickEarlier(rng, first, len(units), rng.IntN(4)) {
				name := strings.ReplaceAll(path.Base(units[d].dir), "-", "_")
				fmt.Fprintf(&b, "dependency %q {\n  config_path = \"../%s\"\n\n  mock_outputs = {\n    id = \"mock-%s\"\n  }\n}\n\n", name, path.Base(units[d].dir), name)
				inputs = append(inputs, fmt.Sprintf("  %s_id = dependency.%s.outputs.id\n", name, name))
				u.deps = append(u.deps, units[d].dir)
			}
			if env%envsPerAccount != 0 && rng.IntN(5) == 0 {
				d := accountFirst + rng.IntN(genUnitsPerEnv)
				fmt.Fprintf(&b, "dependencies {\n  paths = [\"${get_repo_root()}/%s\"]\n}\n\n", units[d].dir)
				u.deps = append(u.deps, units[d].dir)
			}
			b.WriteString("inputs = {\n  name = local.name\n" + strings.Join(inputs, "") + "  tags = {\n    Unit = \"" + path.Base(u.dir) + "\"\n  }\n}\n")
			write(path.Join(u.dir, unitFile), b.String())
			units = append(units, u)
		}
	}
	return units
}

// pickEarlier picks up to k distinct indexes in [lo, hi).
func pickEarlier(rng *rand.Rand, lo, hi, k int) []int {
	k = min(k, hi-lo)
	picked := rng.Perm(hi - lo)[:k]
	for i := range picked {
		picked[i] += lo
	}
	return picked
}

const genRoot = `locals {
  account_vars = read_terragrunt_config(find_in_parent_folders("account.hcl"))
  region_vars  = read_terragrunt_config(find_in_parent_folders("region.hcl"))
  env_vars     = read_terragrunt_config(find_in_parent_folders("env.hcl"))

  account_name = local.account_vars.locals.account_name
  account_id   = local.account_vars.locals.aws_account_id
  aws_region   = local.region_vars.locals.aws_region
}

generate "provider" {
  path      = "provider.tf"
  if_exists = "overwrite_terragrunt"
  contents  = <<EOT
provider "aws" {
  region              = "${local.aws_region}"
  allowed_account_ids = ["${local.account_id}"]
}
EOT
}

remote_state {
  backend = "s3"
  config = {
    encrypt        = true
    bucket         = "tfstate-${local.account_name}-${local.aws_region}"
    key            = "${path_relative_to_include()}/tf.tfstate"
    region         = local.aws_region
    dynamodb_table = "tf-locks"
  }
  generate = {
    path      = "backend.tf"
    if_exists = "overwrite_terragrunt"
  }
}

inputs = merge(
  local.account_vars.locals,
  local.region_vars.locals,
  local.env_vars.locals,
)
`

const genEnvcommon = `locals {
  environment_vars = read_terragrunt_config(find_in_parent_folders("env.hcl"))
  env              = local.environment_vars.locals.environment
  base_source_url  = "${get_repo_root()}/modules/%[1]s"
}

terraform {
  source = local.base_source_url
}

inputs = {
  module      = "%[1]s"
  environment = local.env
}
`

const genAccount = `locals {
  account_name   = %q
  aws_account_id = "%d"
}
`

const genRegion = `locals {
  aws_region = %q
}
`

const genEnv = `locals {
  environment = %q
}
`

const genModuleMain = `resource "terraform_data" "this" {
  input = {
    module = "%s"
    name   = var.name
  }
}
`

const genModuleVariables = `variable "name" {
  type = string
}

variable "tags" {
  type    = map(string)
  default = {}
}
`

const genModuleOutputs = `output "id" {
  value = terraform_data.this.id
}
`

// readHCL walks the checkout as Scan does and reads every .hcl file in it,
// which is every file Scan reads, and returns how many bytes it read.
func readHCL(fsys fs.FS) (int, error) {
	total := 0
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && skipDirs[d.Name()] {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".hcl") {
			b, err := fs.ReadFile(fsys, p)
			total += len(b)
			return err
		}
		return nil
	})
	return total, err
}

func TestScanGenerated(t *testing.T) {
	t.Parallel()
	n := 5000
	if testing.Short() {
		n = 300
	}
	dir := t.TempDir()
	units := generateRepo(dir, n)

	g, err := Scan(dir)
	require.NoError(t, err)
	require.Len(t, g.Units, n)
	for _, want := range units {
		u := g.Unit(want.dir)
		require.NotNil(t, u, want.dir)
		deps := slices.Clone(want.deps)
		slices.Sort(deps)
		require.Equal(t, slices.Compact(deps), u.Dependencies, want.dir)
		envDir := path.Dir(want.dir)
		require.Contains(t, u.Reads, "root.hcl")
		require.Contains(t, u.Reads, path.Join(path.Dir(path.Dir(envDir)), "account.hcl"))
		require.Contains(t, u.Reads, path.Join(path.Dir(envDir), "region.hcl"))
		require.Contains(t, u.Reads, path.Join(envDir, "env.hcl"))
		if want.shared {
			require.Contains(t, u.Reads, "_envcommon/"+want.module+".hcl")
			require.Contains(t, u.Reads, "modules/"+want.module+"/")
		} else {
			require.Contains(t, u.Reads, "modules/")
		}
	}
	order, err := g.Order()
	require.NoError(t, err)
	requireDependencyOrder(t, g, order)

	// A change to one shared module and one unit: the units copying the
	// module (or all of modules/), the unit, and everything downstream.
	unit := units[len(units)/2].dir
	a := g.Affected([]string{"modules/vpc/main.tf", path.Join(unit, unitFile)})
	var changed []string
	for _, u := range units {
		if !u.shared || u.module == "vpc" || u.dir == unit {
			changed = append(changed, u.dir)
		}
	}
	slices.Sort(changed)
	got := slices.Clone(a.Changed)
	slices.Sort(got)
	require.Equal(t, changed, got)
	requireClosedUnderDependents(t, g, a)

	// root.hcl reaches every unit; an env.hcl the units of its environment.
	require.Len(t, g.Affected([]string{"root.hcl"}).Changed, n)
	envUnits := 0
	for _, u := range units {
		if path.Dir(u.dir) == path.Dir(unit) {
			envUnits++
		}
	}
	require.Len(t, g.Affected([]string{path.Join(path.Dir(unit), "env.hcl")}).Changed, envUnits)
}

// The performance aim is a whole scan (walk, parse, evaluate, build the
// graph, affected units) within 3× the time to merely read the same files.
// BenchmarkScan5000 and BenchmarkReadOnly5000 measure the two on the same
// generated repository; BenchmarkScanVsRead5000 alternates them within each
// iteration, so that load from elsewhere on the machine hits both alike,
// and reports the ratio.

func BenchmarkScan5000(b *testing.B) {
	dir := b.TempDir()
	units := generateRepo(dir, 5000)
	changed := []string{"modules/vpc/main.tf", path.Join(units[2500].dir, unitFile)}
	var selected int
	for b.Loop() {
		g, err := Scan(dir)
		if err != nil {
			b.Fatal(err)
		}
		selected = len(g.Affected(changed).Selected)
	}
	b.ReportMetric(float64(selected), "selected")
}

func BenchmarkReadOnly5000(b *testing.B) {
	dir := b.TempDir()
	generateRepo(dir, 5000)
	fsys := os.DirFS(dir)
	var size int
	for b.Loop() {
		var err error
		if size, err = readHCL(fsys); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size), "bytes")
}

func BenchmarkScanVsRead5000(b *testing.B) {
	dir := b.TempDir()
	units := generateRepo(dir, 5000)
	changed := []string{"modules/vpc/main.tf", path.Join(units[2500].dir, unitFile)}
	fsys := os.DirFS(dir)
	var read, scan time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := readHCL(fsys); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		g, err := Scan(dir)
		if err != nil {
			b.Fatal(err)
		}
		g.Affected(changed)
		read += t1.Sub(t0)
		scan += time.Since(t1)
	}
	b.ReportMetric(float64(read.Milliseconds())/float64(b.N), "read-ms/op")
	b.ReportMetric(float64(scan.Milliseconds())/float64(b.N), "scan-ms/op")
	b.ReportMetric(float64(scan)/float64(read), "scan/read")
}

// parseFloor is the CPU-bound floor of a scan: walk the checkout as Scan
// does and parse every .hcl file in it with hclsyntax alone (no
// evaluation, no graph), with as many workers as Scan uses. It returns how
// many files it parsed.
func parseFloor(fsys fs.FS) (int, error) {
	paths := make(chan string, 64)
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for p := range paths {
				src, err := fs.ReadFile(fsys, p)
				if err != nil {
					failed.Add(1)
					continue
				}
				if _, diags := hclsyntax.ParseConfig(src, p, hcl.InitialPos); diags.HasErrors() {
					failed.Add(1)
				}
			}
		})
	}
	n := 0
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && skipDirs[d.Name()] {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".hcl") {
			n++
			paths <- p
		}
		return nil
	})
	close(paths)
	wg.Wait()
	if err == nil && failed.Load() > 0 {
		err = fmt.Errorf("%d files did not parse", failed.Load())
	}
	return n, err
}

func BenchmarkParseFloor5000(b *testing.B) {
	dir := b.TempDir()
	generateRepo(dir, 5000)
	fsys := os.DirFS(dir)
	var files int
	for b.Loop() {
		var err error
		if files, err = parseFloor(fsys); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(files), "files")
}

// BenchmarkScanVsFloor5000 alternates a whole scan with the parse floor
// within each iteration, as BenchmarkScanVsRead5000 does with reading, and
// reports the ratio: the aim is a scan within 1.5× the floor.
func BenchmarkScanVsFloor5000(b *testing.B) {
	dir := b.TempDir()
	units := generateRepo(dir, 5000)
	changed := []string{"modules/vpc/main.tf", path.Join(units[2500].dir, unitFile)}
	fsys := os.DirFS(dir)
	var floor, scan time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := parseFloor(fsys); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		g, err := Scan(dir)
		if err != nil {
			b.Fatal(err)
		}
		g.Affected(changed)
		floor += t1.Sub(t0)
		scan += time.Since(t1)
	}
	b.ReportMetric(float64(floor.Milliseconds())/float64(b.N), "floor-ms/op")
	b.ReportMetric(float64(scan.Milliseconds())/float64(b.N), "scan-ms/op")
	b.ReportMetric(float64(scan)/float64(floor), "scan/floor")
}

// BenchmarkParseUnit compares the fast parser with hclsyntax on one
// generated unit file.
func BenchmarkParseUnit(b *testing.B) {
	dir := b.TempDir()
	units := generateRepo(dir, 60)
	src, err := os.ReadFile(filepath.Join(dir, units[50].dir, unitFile))
	require.NoError(b, err)
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, _, ok := parseFast("x", src, false); !ok {
				b.Fatal("fell back")
			}
		}
	})
	b.Run("hclsyntax", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			parseHCL("x", src)
		}
	})
}
