package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeTree writes files, keyed by slash-separated paths, under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

func TestInfraGraph(t *testing.T) {
	t.Parallel()
	// A copy, outside any git repository: DIR is the repository root.
	live := t.TempDir()
	require.NoError(t, os.CopyFS(live, os.DirFS("../../internal/tgraph/testdata/live")))
	out, _, err := gantry(t, nil, "infra", "graph", live)
	require.NoError(t, err)
	require.Equal(t, "live/prod/us-east-1/vpc\nlive/prod/us-east-1/db\tafter live/prod/us-east-1/vpc\nlive/prod/us-east-1/app\tafter live/prod/us-east-1/db, live/prod/us-east-1/vpc\n", out)

	out, _, err = gantry(t, nil, "infra", "graph", live, "-o", "dot")
	require.NoError(t, err)
	require.Contains(t, out, "digraph")

	_, _, err = gantry(t, nil, "infra", "graph", live, "-o", "yaml")
	require.ErrorContains(t, err, "--output")

	broken := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(broken, "app"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(broken, "app", "terragrunt.hcl"), []byte("dependency \"db\" {\n  config_path = \"../db\"\n}\n"), 0o644))
	_, _, err = gantry(t, nil, "infra", "graph", broken)
	require.ErrorContains(t, err, filepath.Join(broken, "app", "terragrunt.hcl")+":2: ", "a file outside the current directory is named by its absolute path")
}

// TestInfraGraphListsAllButTheBrokenUnit: one unit whose dependency names
// a directory that does not exist is named with the reason; every other
// unit is listed, and gantry exits non-zero.
func TestInfraGraphListsAllButTheBrokenUnit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS("../../internal/tgraph/testdata/parity/missing-dependency")))
	for _, format := range []string{"text", "json", "dot"} {
		out, _, err := gantry(t, nil, "infra", "graph", dir, "-o", format)
		require.EqualError(t, err, "1 unit left out, as Gantry cannot read live/broken:\n"+
			filepath.Join(dir, "live", "broken", "terragrunt.hcl")+`:2: dependency "gone": config_path ../gone is not a directory with terragrunt.hcl`)
		switch format {
		case "text":
			require.Equal(t, "live/vpc\nlive/app\tafter live/vpc\nlive/downstream\tafter live/broken\n", out)
		case "json":
			var units []jsonUnit
			require.NoError(t, json.Unmarshal([]byte(out), &units))
			var paths []string
			for _, u := range units {
				paths = append(paths, u.Path)
			}
			require.Equal(t, []string{"live/app", "live/downstream", "live/vpc"}, paths)
		case "dot":
			require.Contains(t, out, `"live/app" -> "live/vpc";`)
			require.NotContains(t, out, "\t\"live/broken\";", "a broken unit is no node of its own")
		}
	}
}

// gitLayout is a repository as its users lay it out: units under live, a
// module they copy under modules and the configuration they all include
// at the root.
func gitLayout(t *testing.T) string {
	t.Helper()
	repo := t.TempDir()
	writeTree(t, repo, map[string]string{
		"root.hcl":            "locals {\n  region = \"eu-west-1\"\n}\n",
		"modules/vpc/main.tf": "resource \"terraform_data\" \"vpc\" {}\n",
		"live/vpc/terragrunt.hcl": `include "root" {
  path = find_in_parent_folders("root.hcl")
}
terraform {
  source = "../../modules/vpc"
}
`,
		"live/rds/terragrunt.hcl": `include "root" {
  path = find_in_parent_folders("root.hcl")
}
dependency "vpc" {
  config_path = "../vpc"
}
`,
	})
	git := exec.Command("git", "init", "-q", repo)
	git.Stderr = os.Stderr
	require.NoError(t, git.Run())
	return repo
}

func TestInfraGraphScansTheGitRepositoryAroundDIR(t *testing.T) {
	t.Parallel()
	repo := gitLayout(t)

	t.Run("units under DIR, named from the repository root", func(t *testing.T) {
		out, _, err := gantry(t, nil, "infra", "graph", filepath.Join(repo, "live"))
		require.NoError(t, err)
		require.Equal(t, "live/vpc\nlive/rds\tafter live/vpc\n", out)
	})

	t.Run("dependencies outside DIR are named but not listed", func(t *testing.T) {
		rds := filepath.Join(repo, "live", "rds")
		out, _, err := gantry(t, nil, "infra", "graph", rds)
		require.NoError(t, err)
		require.Equal(t, "live/rds\tafter live/vpc\n", out)

		out, _, err = gantry(t, nil, "infra", "graph", rds, "-o", "dot")
		require.NoError(t, err)
		require.Equal(t, "digraph units {\n\t\"live/rds\";\n\t\"live/rds\" -> \"live/vpc\";\n}\n", out)

		out, _, err = gantry(t, nil, "infra", "graph", rds, "-o", "json")
		require.NoError(t, err)
		var units []map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &units))
		require.Equal(t, []map[string]any{
			{"path": "live/rds", "dependencies": []any{"live/vpc"}, "reads": []any{"live/rds/", "root.hcl"}},
		}, units)
	})

	t.Run("a directory of the repository without units", func(t *testing.T) {
		modules := filepath.Join(repo, "modules")
		_, _, err := gantry(t, nil, "infra", "graph", modules)
		require.EqualError(t, err, "no Terragrunt units (terragrunt.hcl) under "+modules)
	})
}

func TestInfraGraphFollowsASymlinkedDIR(t *testing.T) {
	t.Parallel()
	repo := gitLayout(t)
	link := filepath.Join(t.TempDir(), "live")
	require.NoError(t, os.Symlink(filepath.Join(repo, "live"), link))
	out, _, err := gantry(t, nil, "infra", "graph", link)
	require.NoError(t, err)
	require.Equal(t, "live/vpc\nlive/rds\tafter live/vpc\n", out, "the repository the files are in, named from its root")
}

func TestInfraGraphTakesAGitFileForARepository(t *testing.T) {
	t.Parallel()
	// A worktree's or submodule's .git is a file naming the real one.
	repo := gitLayout(t)
	require.NoError(t, os.RemoveAll(filepath.Join(repo, ".git")))
	writeTree(t, repo, map[string]string{".git": "gitdir: /elsewhere/.git/worktrees/repo\n"})
	out, _, err := gantry(t, nil, "infra", "graph", filepath.Join(repo, "live"))
	require.NoError(t, err)
	require.Equal(t, "live/vpc\nlive/rds\tafter live/vpc\n", out)
}

func TestInfraGraphErrorsNameFilesToOpen(t *testing.T) {
	t.Parallel()
	repo := gitLayout(t)
	writeTree(t, repo, map[string]string{"live/app/terragrunt.hcl": "dependency \"db\" {\n  config_path = \"../db\"\n}\n"})
	out, _, err := gantry(t, nil, "infra", "graph", filepath.Join(repo, "live", "rds"))
	require.Error(t, err, "a broken unit anywhere in the repository is reported")
	require.Equal(t, "live/rds\tafter live/vpc\n", out, "the units Gantry can read are listed")
	first, rest, _ := strings.Cut(err.Error(), "\n")
	require.Equal(t, "1 unit left out, as Gantry cannot read live/app:", first)
	file, _, ok := strings.Cut(rest, ":2: ")
	require.True(t, ok, err.Error())
	require.Equal(t, filepath.Join(repo, "live", "app", "terragrunt.hcl"), file)
	require.FileExists(t, file)
}

func TestPathFrom(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ cwd, file, want string }{
		{"/repo", "/repo/live/vpc/terragrunt.hcl", "live/vpc/terragrunt.hcl"},
		{"/repo/live", "/repo/live/vpc/terragrunt.hcl", "vpc/terragrunt.hcl"},
		{"/repo/live/vpc", "/repo/root.hcl", "/repo/root.hcl"},
		{"/home/ada", "/repo/root.hcl", "/repo/root.hcl"},
	} {
		require.Equal(t, filepath.FromSlash(tc.want), pathFrom(filepath.FromSlash(tc.cwd), filepath.FromSlash(tc.file)), tc)
	}
}

func TestInfraGraphJSONListsAreNeverNull(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"vpc/terragrunt.hcl": "",
		"db/terragrunt.hcl":  "dependency \"vpc\" {\n  config_path = \"../vpc\"\n}\n",
	})
	out, _, err := gantry(t, nil, "infra", "graph", dir, "-o", "json")
	require.NoError(t, err)
	require.NotContains(t, out, "null", "jq scripts iterate the lists with []")
	var units []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &units))
	require.Equal(t, []map[string]any{
		{"path": "db", "dependencies": []any{"vpc"}, "reads": []any{"db/"}},
		{"path": "vpc", "dependencies": []any{}, "reads": []any{"vpc/"}},
	}, units)
}

func TestInfraGraphWithoutUnitsFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"modules/vpc/main.tf": ""})
	out, _, err := gantry(t, nil, "infra", "graph", dir)
	require.EqualError(t, err, "no Terragrunt units (terragrunt.hcl) under "+dir)
	require.Empty(t, out)

	_, _, err = gantry(t, nil, "infra", "graph", filepath.Join(dir, "modules", "vpc", "main.tf"))
	require.ErrorContains(t, err, "not a directory")
}
