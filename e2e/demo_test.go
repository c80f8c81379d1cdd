package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
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
	// As the README runs it: GANTRY_DATA_DIR left at its default, .gantry,
	// a path relative to the working directory.
	workDir := t.TempDir()
	dataDir := filepath.Join(workDir, ".gantry")
	require.NoError(t, os.Mkdir(dataDir, 0o755))
	// As root, PostgreSQL runs as the postgres user, who must be able to
	// reach the directory.
	for _, dir := range []string{filepath.Dir(workDir), workDir, dataDir} {
		require.NoError(t, os.Chmod(dir, 0o755))
	}
	pgDir := filepath.Join(dataDir, "postgres")
	t.Cleanup(func() { stopPrivatePostgres(t, pgDir) })

	addr := freeAddr(t)
	baseURL := "http://" + addr
	p := startProcessIn(t, workDir, "gantry-dev-demo", processEnv("GANTRY_ADDR="+addr, "GANTRY_BASE_URL="+baseURL), "dev", "--demo")
	p.waitReady(t, baseURL, devFirstReadyTimeout)
	out := waitForOutput(t, p, "Gantry is running at "+baseURL)
	m := regexp.MustCompile(`(?m)^\s*email:\s*(\S+)\s*\n\s*password:\s*(\S+)\s*$`).FindStringSubmatch(out)
	require.NotNil(t, m, "the first admin's password is printed; stdout:\n%s", out)
	require.Contains(t, out, "gantry admin user password "+m[1], "and how to reset it")
	page := newPage(t)
	signIn(t, page, baseURL, user{Email: m[1], Name: "Admin", Password: m[2]})

	// Infrastructure: open pull requests, one whose head does not parse.
	open(t, page, baseURL+"/infra", 200)
	require.NoError(t, expect.Locator(page.GetByTestId("pull-row").First()).ToBeVisible())
	broken := page.GetByTestId("pull-row").Filter(playwright.LocatorFilterOptions{Has: page.GetByTestId("pull-plan-error")})
	require.NoError(t, expect.Locator(broken.GetByTestId("pull-plan-error")).ToContainText("terragrunt.hcl:4"))
	require.NoError(t, expect.Locator(page.GetByTestId("run-row").First()).ToBeVisible())
	saveScreenshot(t, page, "demo-infra")

	// On a phone the runs table scrolls sideways, with a shadow at the
	// edge where more of it is hidden, and each run's status is on screen.
	require.NoError(t, page.SetViewportSize(390, 844))
	open(t, page, baseURL+"/infra", 200)
	status := page.GetByTestId("run-row").First().GetByTestId("run-status-cell")
	require.NoError(t, expect.Locator(status).ToBeVisible())
	box, err := status.BoundingBox()
	require.NoError(t, err)
	require.GreaterOrEqual(t, box.X, 0.0)
	require.LessOrEqual(t, box.X+box.Width, 390.0, "the first run's status at 390px wide is off-screen: %+v", box)
	hint, err := page.GetByTestId("recent-runs").Locator(".table-wrap").Evaluate(
		`w => w.scrollWidth > w.clientWidth && getComputedStyle(w).backgroundImage.split("gradient(").length > 4`, nil)
	require.NoError(t, err)
	require.Equal(t, true, hint, "the runs table scrolls sideways and shows a shadow where it is cut")
	saveScreenshot(t, page, "phone-demo-infra")
	require.NoError(t, page.SetViewportSize(desktopWidth, desktopHeight))

	require.NoError(t, broken.Locator("a").First().Click())
	require.NoError(t, expect.Locator(page.GetByTestId("plans-scan-failed")).ToBeVisible(), "the page says why nothing was planned")
	require.NoError(t, expect.Locator(page.GetByTestId("plan-error")).ToContainText(`dependency "rds" has no config_path`))
	require.NoError(t, expect.Locator(page.GetByTestId("log-row")).ToHaveAttribute("data-event", "pull-request-scan-failed"), "and logs it")
	saveScreenshot(t, page, "demo-pull-unparsable")

	// The run in progress is real: its first plan ran against the demo's
	// local repository and its voters were mailed. The newcomer votes yes
	// through the dev mailbox, as Arun.
	const arun = "arun.approver@example.com"
	mail := page.GetByTestId("mail-row").Filter(playwright.LocatorFilterOptions{HasText: "live/shared/iam"}).Filter(playwright.LocatorFilterOptions{HasText: arun})
	eventually(t, "Arun's vote request on live/shared/iam in the mailbox", func() bool {
		open(t, page, baseURL+"/dev/mailbox", 200)
		n, err := mail.Count()
		require.NoError(t, err)
		return n > 0
	})
	saveScreenshot(t, page, "demo-mailbox")
	require.NoError(t, mail.First().Locator("a").Click())
	require.NoError(t, page.GetByTestId("mail-link").First().Click())
	require.NoError(t, expect.Locator(page.GetByTestId("link-voter")).ToContainText(arun))
	require.NoError(t, expect.Locator(page.GetByTestId("link-plan-text")).ToContainText("terraform_data.rds_monitoring_role will be updated in-place"))
	saveScreenshot(t, page, "demo-vote")
	require.NoError(t, page.GetByTestId("vote-approve").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Recorded your approval"))

	// The saved plan is applied and the run moves on: the prod database is
	// planned and waits for votes in turn.
	open(t, page, baseURL+"/infra/runs?status=running", 200)
	require.NoError(t, page.GetByTestId("run-row").First().Locator("a").First().Click())
	runURL := page.URL()
	// The row of live/prod/rds itself (its dependents name it under "After").
	rds := page.GetByTestId("execution-row").Filter(playwright.LocatorFilterOptions{Has: page.Locator("a", playwright.PageLocatorOptions{HasText: "live/prod/rds"})})
	eventually(t, "live/prod/rds voting after live/shared/iam was applied", func() bool {
		open(t, page, runURL, 200)
		text, err := rds.TextContent()
		require.NoError(t, err)
		return strings.Contains(text, "voting")
	})
	require.NoError(t, expect.Locator(page.GetByTestId("graph-node").First()).ToBeVisible())
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

	// Its operator was told, in the dev mailbox.
	eventually(t, "the dirty-environment notice about pixel-7 in the mailbox", func() bool {
		open(t, page, baseURL+"/dev/mailbox", 200)
		n, err := page.GetByTestId("mail-row").Filter(playwright.LocatorFilterOptions{HasText: "pixel-7"}).Count()
		require.NoError(t, err)
		return n > 0
	})
	saveScreenshot(t, page, "demo-mailbox-dirty")

	// The admin votes on nothing: the empty Approvals page says who does and
	// where voters are set, without assuming a gantry.yaml.
	open(t, page, baseURL+"/approvals", 200)
	empty := page.GetByTestId("empty-approvals")
	require.NoError(t, expect.Locator(empty).ToContainText("You are a voter of no infrastructure account"))
	require.NoError(t, expect.Locator(empty).ToContainText("under gantry dev --demo, by the demo"))
	require.NoError(t, expect.Locator(empty).ToContainText("voted on by arun.approver@example.com"))
	saveScreenshot(t, page, "demo-approvals-empty")

	code, err := p.stop(syscall.SIGINT, stopTimeout)
	require.NoError(t, err)
	require.Equal(t, 0, code)
}

// eventually reloads and checks until cond holds: the demo's run is real
// work (git, terraform) that takes a moment, longer on a busy machine.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(infraWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", infraWait, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
