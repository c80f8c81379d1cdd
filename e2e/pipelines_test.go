package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/require"
)

// TestPipelines runs a real gantry serve with a release pipeline in
// gantry.yaml: build → beta (two host groups) → a gate → prod with a
// (deployed, tested) batch, every host step a real command. CI registers
// revisions and artifacts through the API; the pipeline's picture shows
// where each stands at each phase (live, without reloading), a revision
// whose test fails is blocked with the reason on its page, and the voter
// lets a revision through the gate from its page.
func TestPipelines(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "gantry.yaml")
	require.NoError(t, os.WriteFile(config, []byte(`pipelines:
  - name: shop
    stages:
      - {name: build, artifacts: [x86]}
      - name: beta
        after: [build]
        host_groups:
          - {name: east, hosts: [beta-e1, beta-e2]}
          - {name: west, hosts: [beta-w1]}
        steps:
          - {name: deployed, run: [sleep, "5"]}
          - {name: tested, run: [test, "{revision}", "!=", "1.1.0-broken"]}
      - name: approval
        after: [beta]
        approval: {voters: [ada@example.com]}
      - name: prod
        after: [approval]
        batch: [deployed, tested]
        host_groups: [{name: all, hosts: [prod-1, prod-2]}]
        steps:
          - {name: deployed, run: [sleep, "1"]}
          - {name: tested, run: ["true"]}
`), 0o600))
	srv := startServer(t, "GANTRY_CONFIG="+config)
	ada := srv.createUser(t, "Ada Lovelace", "ada@example.com", "admin")
	srv.createUser(t, "CI", "ci@example.com", "operator")
	token := srv.createToken(t, "ci@example.com", "e2e-ci", "read,write")
	register := func(rev string, artifact bool) {
		t.Helper()
		status, out := callAPI(t, http.MethodPost, srv.URL+"/api/v1/pipelines/shop/revisions", token, map[string]string{"revision": rev})
		require.Equal(t, http.StatusCreated, status, "%s", out)
		if artifact {
			status, out = callAPI(t, http.MethodPost, srv.URL+"/api/v1/pipelines/shop/revisions/"+rev+"/artifacts", token,
				map[string]string{"arch": "x86", "location": "s3://builds/shop-" + rev + ".tgz"})
			require.Equal(t, http.StatusCreated, status, "%s", out)
		}
	}
	status, out := callAPI(t, http.MethodPost, srv.URL+"/api/v1/pipelines/shop/revisions/nope/artifacts", token, map[string]string{"arch": "riscv", "location": "x"})
	require.Equal(t, http.StatusBadRequest, status, "%s", out)
	require.Contains(t, string(out), `"arch"`)

	page := newPage(t)
	signIn(t, page, srv.URL, ada)
	open(t, page, srv.URL+"/pipelines", 200)
	require.NoError(t, expect.Locator(page.Locator(`[data-testid=pipeline-row][data-pipeline=shop]`)).ToContainText("4"))
	saveScreenshot(t, page, "pipelines-index")

	// The pipeline's page is opened once: everything below appears on it
	// without a reload.
	open(t, page, srv.URL+"/pipelines/shop", 200)
	require.NoError(t, expect.Locator(page.GetByTestId("no-revisions")).ToBeVisible())
	chip := func(stage, rev string) playwright.Locator {
		return page.Locator(fmt.Sprintf(`[data-testid=stage-card][data-stage=%s] [data-testid=revision-chip][data-revision="%s"]`, stage, rev))
	}
	wait := playwright.LocatorAssertionsToHaveAttributeOptions{Timeout: playwright.Float(float64(conditionWait / time.Millisecond))}

	// Phase 1: a revision waits at the build for its artifact.
	register("1.0.0", false)
	require.NoError(t, expect.Locator(chip("build", "1.0.0")).ToHaveAttribute("data-state", "waiting", wait))
	saveScreenshot(t, page, "pipeline-1-waiting-for-artifact")

	// Phase 2: with its artifact it deploys to beta's two host groups.
	open(t, page, srv.URL+"/pipelines/shop", 200)
	status, out = callAPI(t, http.MethodPost, srv.URL+"/api/v1/pipelines/shop/revisions/1.0.0/artifacts", token,
		map[string]string{"arch": "x86", "location": "s3://builds/shop-1.0.0.tgz"})
	require.Equal(t, http.StatusCreated, status, "%s", out)
	// Beta's bookkeeping takes no time: its 5 s deploy is what the page,
	// which refreshes every 2 s, sees it in.
	require.NoError(t, expect.Locator(chip("beta", "1.0.0")).ToBeVisible(playwright.LocatorAssertionsToBeVisibleOptions{Timeout: wait.Timeout}))
	saveScreenshot(t, page, "pipeline-2-in-beta")

	// Phase 3: it waits at the gate; a broken revision fails beta's test; a
	// third waits for its artifact.
	open(t, page, srv.URL+"/pipelines/shop", 200)
	register("1.1.0-broken", true)
	register("1.2.0", false)
	require.NoError(t, expect.Locator(chip("approval", "1.0.0")).ToHaveAttribute("data-state", "approval", wait))
	require.NoError(t, expect.Locator(chip("beta", "1.1.0-broken")).ToHaveAttribute("data-state", "failed", wait))
	require.NoError(t, expect.Locator(chip("build", "1.2.0")).ToHaveAttribute("data-state", "waiting", wait))
	require.NoError(t, expect.Locator(page.Locator(`[data-testid=revision-row][data-revision="1.1.0-broken"]`)).ToContainText("exit status 1"))
	saveScreenshot(t, page, "pipeline-3-gate-and-failure")

	// The broken revision's page says why it stopped and offers the
	// operator's choices; its other steps say why they wait.
	require.NoError(t, chip("beta", "1.1.0-broken").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("revision-blocked")).ToContainText("host-tested"))
	require.NoError(t, expect.Locator(page.GetByTestId("blocked-reason")).ToContainText("exit status 1"))
	require.NoError(t, expect.Locator(page.GetByTestId("retry-step")).ToBeVisible())
	require.NoError(t, expect.Locator(page.Locator(`[data-testid=step-row][data-state=pending]`).First().GetByTestId("step-why")).ToContainText("pending: comes after"))
	saveScreenshot(t, page, "revision-blocked")

	// The gate waits in /approvals; the voter approves from the revision's
	// page.
	open(t, page, srv.URL+"/approvals", 200)
	require.NoError(t, expect.Locator(page.Locator("main")).ToContainText("shop → approval"))
	saveScreenshot(t, page, "approvals-gate")
	open(t, page, srv.URL+"/pipelines/shop/revisions/1.0.0", 200)
	require.NoError(t, expect.Locator(page.GetByTestId("gate-vote")).ToContainText("0 of 1 approvals"))
	require.NoError(t, page.GetByTestId("vote-approve").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("gate-vote")).ToContainText("approved"))

	// Phase 4: it goes through prod and the pipeline.
	open(t, page, srv.URL+"/pipelines/shop", 200)
	require.NoError(t, expect.Locator(page.Locator(`[data-testid=revisions-finished] [data-revision="1.0.0"]`)).ToBeVisible(
		playwright.LocatorAssertionsToBeVisibleOptions{Timeout: wait.Timeout}))
	saveScreenshot(t, page, "pipeline-4-finished")
	open(t, page, srv.URL+"/pipelines/shop/revisions/1.0.0", 200)
	require.NoError(t, expect.Locator(page.Locator("h1")).ToContainText("finished"))
	saveScreenshot(t, page, "revision-finished")
}
