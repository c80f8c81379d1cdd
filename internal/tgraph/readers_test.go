package tgraph

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOutputReaders(t *testing.T) {
	dir := t.TempDir()
	for path, content := range map[string]string{
		"vpc/terragrunt.hcl":   "",
		"rds/terragrunt.hcl":   "dependency \"vpc\" {\n  config_path = \"../vpc\"\n}\n",
		"app/terragrunt.hcl":   "dependency \"net\" {\n  config_path = \"../vpc\"\n}\ndependency \"rds\" {\n  config_path = \"../rds\"\n}\n",
		"order/terragrunt.hcl": "dependencies {\n  paths = [\"../vpc\"]\n}\n",
	} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(path)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, path), []byte(content), 0o644))
	}
	g, err := Scan(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"app", "order", "rds"}, g.Dependents("vpc"))
	require.Equal(t, []string{"app", "rds"}, g.OutputReaders("vpc"), "dependencies { paths } reads no outputs")
	require.Equal(t, []string{"app"}, g.OutputReaders("rds"))
	require.Empty(t, g.OutputReaders("app"))
}
