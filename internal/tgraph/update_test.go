package tgraph

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireSameGraph checks that got is the graph want is: units, their
// dependencies, reads and errors, the order, and what changes select.
func requireSameGraph(t *testing.T, want, got *Graph, wantErr, gotErr error, probes []string) {
	t.Helper()
	if wantErr == nil {
		require.NoError(t, gotErr)
	} else {
		require.EqualError(t, gotErr, wantErr.Error())
	}
	require.Len(t, got.Units, len(want.Units))
	for i, w := range want.Units {
		u := got.Units[i]
		require.Equal(t, w.Path, u.Path)
		require.Equal(t, w.Dependencies, u.Dependencies, w.Path)
		require.Equal(t, w.Reads, u.Reads, w.Path)
		require.Equal(t, w.Errors, u.Errors, w.Path)
	}
	wo, err := want.Order()
	require.NoError(t, err)
	o, err := got.Order()
	require.NoError(t, err)
	require.Equal(t, wo, o)
	for _, p := range probes {
		require.Equal(t, want.Affected([]string{p}), got.Affected([]string{p}), p)
	}
}

// TestUpdateMatchesAFullScan changes a generated repository step by step,
// as merges do, and checks that each Update of the previous graph is the
// graph a full scan reads.
func TestUpdateMatchesAFullScan(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	units := generateRepo(dir, 300)
	write := func(rel, content string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	remove := func(rel string) { require.NoError(t, os.Remove(filepath.Join(dir, filepath.FromSlash(rel)))) }
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		require.NoError(t, err)
		return string(b)
	}
	a, b, c := units[10].dir, units[40].dir, units[70].dir
	envA := path.Join(path.Dir(a), "env.hcl")
	// A unit whose dependency comes from a file it reads, and one whose
	// find_in_parent_folders may find a nearer file.
	write("deps.hcl", "locals {\n  target = \""+a+"\"\n}\n")
	write("live/custom/reader/terragrunt.hcl", "locals {\n  deps = read_terragrunt_config(\"${get_repo_root()}/deps.hcl\")\n}\ndependencies {\n  paths = [\"${get_repo_root()}/${local.deps.locals.target}\"]\n}\n")
	write("live/custom/settings.hcl", "locals {\n  target = \""+b+"\"\n}\n")
	write("live/custom/deep/finder/terragrunt.hcl", "locals {\n  s = read_terragrunt_config(find_in_parent_folders(\"settings.hcl\"))\n}\ndependencies {\n  paths = [\"${get_repo_root()}/${local.s.locals.target}\"]\n}\n")
	steps := []struct {
		name   string
		change func() []string
	}{
		{"a file a unit reads names another dependency", func() []string {
			write("deps.hcl", "locals {\n  target = \""+c+"\"\n}\n")
			return []string{"deps.hcl"}
		}},
		{"a nearer file for find_in_parent_folders", func() []string {
			write("live/custom/deep/settings.hcl", "locals {\n  target = \""+a+"\"\n}\n")
			return []string{"live/custom/deep/settings.hcl"}
		}},
		{"and it is gone again", func() []string {
			remove("live/custom/deep/settings.hcl")
			return []string{"live/custom/deep/settings.hcl"}
		}},
		{"a unit gains a dependency", func() []string {
			write(path.Join(b, unitFile), read(path.Join(b, unitFile))+"\ndependency \"extra\" {\n  config_path = \"${get_repo_root()}/"+a+"\"\n}\n")
			return []string{path.Join(b, unitFile)}
		}},
		{"an env.hcl changes", func() []string {
			write(envA, "locals {\n  environment = \"renamed\"\n}\n")
			return []string{envA}
		}},
		{"a unit's dependency breaks", func() []string {
			write(path.Join(c, unitFile), "dependency \"gone\" {\n  config_path = \"../gone\"\n}\n")
			return []string{path.Join(c, unitFile)}
		}},
		{"the missing directory appears", func() []string {
			write(path.Join(path.Dir(c), "gone", unitFile), "")
			return []string{path.Join(path.Dir(c), "gone", unitFile)}
		}},
		{"a unit others depend on is deleted", func() []string {
			remove(path.Join(a, unitFile))
			return []string{path.Join(a, unitFile)}
		}},
		{"a nearer env.hcl is added and a module file deleted", func() []string {
			write(path.Join(b, "env.hcl"), "locals {\n  environment = \"nearer\"\n}\n")
			remove("modules/vpc/outputs.tf")
			return []string{path.Join(b, "env.hcl"), "modules/vpc/outputs.tf", "README.md"}
		}},
		{"a JSON unit is added", func() []string {
			write("live/json/terragrunt.hcl.json", `{"dependency": {"b": {"config_path": "../../`+b+`"}}}`)
			return []string{"live/json/terragrunt.hcl.json"}
		}},
		{"an excludes file is added: a whole scan", func() []string {
			write(excludesFile, "live/json\n")
			return []string{excludesFile}
		}},
	}
	g, err := Scan(dir)
	require.NoError(t, err)
	for _, step := range steps {
		changed := step.change()
		got, gotErr := g.Update(dir, changed)
		want, wantErr := Scan(dir)
		require.NotNil(t, got, step.name)
		requireSameGraph(t, want, got, wantErr, gotErr, append(changed, "root.hcl", envA, path.Join(b, "env.hcl")))
		g = got
	}
}

// TestUpdateLeavesTheEarlierGraph: the graph Update starts from is
// unchanged, so it can be used concurrently.
func TestUpdateLeavesTheEarlierGraph(t *testing.T) {
	t.Parallel()
	r := repo{
		"a/terragrunt.hcl": "dependency \"b\" {\n  config_path = \"../b\"\n}\n",
		"b/terragrunt.hcl": "",
	}
	g := r.mustScan(t)
	before := listing(t, g)
	r["a/terragrunt.hcl"] = "dependency \"c\" {\n  config_path = \"../c\"\n}\n"
	next, err := g.UpdateFS(r.fs(), "/elsewhere", []string{"a/terragrunt.hcl"})
	require.EqualError(t, err, `a/terragrunt.hcl:2: dependency "c": config_path ../c is not a directory with terragrunt.hcl`)
	require.Equal(t, "b\n", listing(t, next))
	require.Equal(t, before, listing(t, g))
	require.Empty(t, g.Unit("a").Errors)
}

// The incremental scan's aim: after a merge touching a handful of files,
// Update takes under 10 % of a full scan. BenchmarkUpdateVsScan5000
// alternates the two on the same checkout after the change and reports
// the ratio.
func BenchmarkUpdateVsScan5000(b *testing.B) {
	dir := b.TempDir()
	units := generateRepo(dir, 5000)
	prev, err := Scan(dir)
	require.NoError(b, err)
	// A merge: two units edited (one gains a dependency), an env.hcl and a
	// module file changed, a unit added.
	var changed []string
	edit := func(rel, content string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(b, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(b, os.WriteFile(p, []byte(content), 0o644))
		changed = append(changed, rel)
	}
	u1, u2 := units[1210].dir, units[3710].dir
	old, err := os.ReadFile(filepath.Join(dir, u1, unitFile))
	require.NoError(b, err)
	edit(path.Join(u1, unitFile), strings.Replace(string(old), "inputs = {", "inputs = {\n  size = \"large\"", 1))
	old, err = os.ReadFile(filepath.Join(dir, u2, unitFile))
	require.NoError(b, err)
	edit(path.Join(u2, unitFile), string(old)+"\ndependency \"extra\" {\n  config_path = \"../"+path.Base(units[3705].dir)+"\"\n}\n")
	edit(path.Join(path.Dir(u2), "env.hcl"), "locals {\n  environment = \"prod-2\"\n}\n")
	edit("modules/vpc/main.tf", "resource \"terraform_data\" \"this\" {}\n")
	edit(path.Join(path.Dir(u1), "new-unit", unitFile), "dependency \"x\" {\n  config_path = \"../"+path.Base(u1)+"\"\n}\n")

	// Wall time, and the process's CPU time (all threads, the garbage
	// collector's too), which load from elsewhere on the machine inflates
	// less.
	var update, scan, updateCPU, scanCPU time.Duration
	var unitCount int
	for b.Loop() {
		c0, t0 := cpuTime(b), time.Now()
		g, err := prev.Update(dir, changed)
		if err != nil {
			b.Fatal(err)
		}
		c1, t1 := cpuTime(b), time.Now()
		if _, err := Scan(dir); err != nil {
			b.Fatal(err)
		}
		update += t1.Sub(t0)
		scan += time.Since(t1)
		updateCPU += c1 - c0
		scanCPU += cpuTime(b) - c1
		unitCount = len(g.Units)
	}
	b.ReportMetric(float64(unitCount), "units")
	b.ReportMetric(float64(update.Microseconds())/1000/float64(b.N), "update-ms/op")
	b.ReportMetric(float64(scan.Milliseconds())/float64(b.N), "scan-ms/op")
	b.ReportMetric(float64(update)/float64(scan), "update/scan")
	b.ReportMetric(float64(updateCPU)/float64(scanCPU), "update/scan-cpu")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
