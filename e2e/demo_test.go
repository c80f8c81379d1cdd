package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/require"
)

// TestDevDemo: `gantry dev --demo` is what someone trying Gantry sees first.
// Every area it fills shows its data, including the states that need a
// human (a pull request whose head does not parse, a run waiting for votes,
// a dirty environment); the screenshots are the tour.
func TestDevDemo(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	// As root, PostgreSQL runs as the postgres user, who must be able to
	// reach the directory.
	for _, dir := range []string{filepath.Dir(dataDir), dataDir} {
		require.NoError(t, os.Chmod(dir, 0o755))
	}
	pgDir := filepath.Join(dataDir, "postgres")
	t.Cleanup(func() { stopPrivatePostgres(t, pgDir) })

	addr := freeAddr(t)
	baseURL := "http://" + addr
	p := startProcess(t, "gantry-dev-demo", processEnv("GANTRY_DATA_DIR="+dataDir, "GANTRY_ADDR="+addr, "GANTRY_BASE_URL="+baseURL), "dev", "--demo")
	p.waitReady(t, baseURL, devFirstReadyTimeout)
	out := waitForOutput(t, p, "Gantry is running at "+baseURL)
	m := regexp.MustCompile(`(?m)^\s*email:\s*(\S+)\s*\n\s*password:\s*(\S+)\s*$`).FindStringSubmatch(out)
	require.NotNil(t, m, "the first admin's password is printed; stdout:\n%s", out)
	page := newPage(t)
	signIn(t, page, baseURL, user{Email: m[1], Name: "Admin", Password: m[2]})

	// Infrastructure: open pull requests, one whose head does not parse.
	open(t, page, baseURL+"/infra", 200)
	require.NoError(t, expect.Locator(page.GetByTestId("pull-row").First()).ToBeVisible())
	broken := page.GetByTestId("pull-row").Filter(playwright.LocatorFilterOptions{Has: page.GetByTestId("pull-plan-error")})
	require.NoError(t, expect.Locator(broken.GetByTestId("pull-plan-error")).ToContainText("terragrunt.hcl:4"))
	require.NoError(t, expect.Locator(page.GetByTestId("run-row").First()).ToBeVisible())
	saveScreenshot(t, page, "demo-infra")

	require.NoError(t, broken.Locator("a").First().Click())
	require.NoError(t, expect.Locator(page.GetByTestId("plans-scan-failed")).ToBeVisible(), "the page says why nothing was planned")
	require.NoError(t, expect.Locator(page.GetByTestId("plan-error")).ToContainText(`dependency "rds" has no config_path`))
	require.NoError(t, expect.Locator(page.GetByTestId("log-row")).ToHaveAttribute("data-event", "pull-request-scan-failed"), "and logs it")
	saveScreenshot(t, page, "demo-pull-unparsable")

	// A run in progress: its graph, with an execution waiting for votes.
	open(t, page, baseURL+"/infra/runs?status=running", 200)
	require.NoError(t, page.GetByTestId("run-row").First().Locator("a").First().Click())
	require.NoError(t, expect.Locator(page.GetByTestId("graph-node").First()).ToBeVisible())
	require.NoError(t, expect.Locator(page.GetByTestId("executions-table")).ToContainText("voting"))
	saveScreenshot(t, page, "demo-run")

	// Environments: capacity per pool and the dirty queue. The demo's device
	// turns dirty when its real cleanup job fails, soon after start (later on
	// a busy machine: the wait ends as soon as the row is there).
	dirty := false
	for deadline := time.Now().Add(conditionWait); !dirty && time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		open(t, page, baseURL+"/environments", 200)
		n, err := page.GetByTestId("dirty-row").Count()
		require.NoError(t, err)
		dirty = n > 0
	}
	require.True(t, dirty, "the demo's dirty device waits for a human (no dirty row within %v)", conditionWait)
	require.NoError(t, expect.Locator(page.GetByTestId("capacity").First()).ToBeVisible())
	saveScreenshot(t, page, "demo-environments")

	code, err := p.stop(syscall.SIGINT, stopTimeout)
	require.NoError(t, err)
	require.Equal(t, 0, code)
}
