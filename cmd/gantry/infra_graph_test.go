package main

import (
	"encoding/json"
	"os"
	"path/filepath"
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
	out, _, err := gantry(t, nil, "infra", "graph", "../../internal/tgraph/testdata/live")
	require.NoError(t, err)
	require.Equal(t, "live/prod/us-east-1/vpc\nlive/prod/us-east-1/db\tafter live/prod/us-east-1/vpc\nlive/prod/us-east-1/app\tafter live/prod/us-east-1/db, live/prod/us-east-1/vpc\n", out)

	out, _, err = gantry(t, nil, "infra", "graph", "../../internal/tgraph/testdata/live", "-o", "dot")
	require.NoError(t, err)
	require.Contains(t, out, "digraph")

	_, _, err = gantry(t, nil, "infra", "graph", "../../internal/tgraph/testdata/live", "-o", "yaml")
	require.ErrorContains(t, err, "--output")

	broken := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(broken, "app"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(broken, "app", "terragrunt.hcl"), []byte("dependency \"db\" {\n  config_path = \"../db\"\n}\n"), 0o644))
	_, _, err = gantry(t, nil, "infra", "graph", broken)
	require.ErrorContains(t, err, "app/terragrunt.hcl:2")
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
