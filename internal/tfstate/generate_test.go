package tfstate_test

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/infra/infratest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.json from real terraform")

// shows is what real terraform printed for the fixture deployment: the
// plan of the first apply (empty state), the state after it, the plan of
// the deployment that adds the filer provider, and the state after that.
type shows struct {
	FirstPlan, Before, Plan, After []byte
}

var showFiles = map[string]func(*shows) *[]byte{
	"first_plan.json": func(s *shows) *[]byte { return &s.FirstPlan },
	"before.json":     func(s *shows) *[]byte { return &s.Before },
	"plan.json":       func(s *shows) *[]byte { return &s.Plan },
	"after.json":      func(s *shows) *[]byte { return &s.After },
}

// generate deploys testdata/before, then adds testdata/after (the
// filer provider: resources with count, for_each, in a module with
// for_each and in a nested module) with real terraform and the test
// provider, and returns what `terraform show -json` printed.
func generate(t *testing.T) shows {
	t.Helper()
	p := infratest.Filer(t)
	dir, home := t.TempDir(), t.TempDir()
	tf := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command("terraform", append([]string{"-chdir=" + dir}, args...)...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TF_IN_AUTOMATION=1"}, p.Env()...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "terraform %s\n%s\n%s", strings.Join(args, " "), out, stderr.String())
		return out
	}
	var s shows
	require.NoError(t, os.CopyFS(dir, os.DirFS("testdata/before")))
	tf("init", "-input=false", "-no-color")
	tf("plan", "-input=false", "-no-color", "-out=first.tfplan")
	s.FirstPlan = tf("show", "-json", "first.tfplan")
	tf("apply", "-input=false", "-no-color", "first.tfplan")
	s.Before = tf("show", "-json")

	require.NoError(t, os.CopyFS(dir, os.DirFS("testdata/after")))
	tf("init", "-input=false", "-no-color")
	tf("plan", "-input=false", "-no-color", "-out=deploy.tfplan")
	s.Plan = tf("show", "-json", "deploy.tfplan")
	tf("apply", "-input=false", "-no-color", "deploy.tfplan")
	s.After = tf("show", "-json")
	return s
}

// committed reads the testdata the table tests use.
func committed(t *testing.T) shows {
	t.Helper()
	var s shows
	for name, field := range showFiles {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err, "run go test ./internal/tfstate -run TestRealTerraform -update")
		*field(&s) = b
	}
	return s
}

// The committed testdata is what real terraform prints for it today:
// this test deploys the fixture and checks the answer on the fresh output
// (and with -update rewrites testdata from it).
func TestRealTerraformNewProviderResources(t *testing.T) {
	s := generate(t)
	if *update {
		for name, field := range showFiles {
			require.NoError(t, os.WriteFile(filepath.Join("testdata", name), *field(&s), 0o644))
		}
	}
	checkDeployment(t, s)
}
