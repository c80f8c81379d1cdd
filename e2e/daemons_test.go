package e2e

import (
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	"github.com/stretchr/testify/require"
)

// TestDaemons runs a real gantry serve and two real gantry agents: an
// operator reads the diff of a new environment's version in the browser,
// starts it, watches every instance's task come up in the grid, finds the
// health line on /daemons and the deployment's page; a version whose
// command does not exist leaves the reason on the page.
func TestDaemons(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ada := srv.createUser(t, "Ada Lovelace", "ada@example.com", "admin")
	agentToken := srv.createToken(t, "ada@example.com", "agents", "agent")
	token := srv.createToken(t, "ada@example.com", "e2e-daemons", "read,write")

	page := newPage(t)
	signIn(t, page, srv.URL, ada)
	open(t, page, srv.URL+"/daemons", http.StatusOK)
	require.NoError(t, expect.Locator(page.GetByTestId("empty-daemons")).ToContainText("gantry agent --cluster web"))
	saveScreenshot(t, page, "daemons-empty")

	for _, name := range []string{"agent-1", "agent-2"} {
		startProcess(t, name, processEnv("GANTRY_TOKEN="+agentToken), "agent", "--cluster", "web", "--attr", "role=web",
			"--id", name, "--server", srv.URL, "--poll", "5s")
	}
	status, body := callAPI(t, http.MethodPost, srv.URL+"/api/v1/daemons/environments", token, map[string]any{
		"name":            "logs",
		"task_definition": map[string]any{"name": "logger", "command": []string{"sleep", "1000"}},
		"instance_group":  map[string]any{"cluster": "web", "attributes": []string{"role=web"}},
	})
	require.Equal(t, http.StatusCreated, status, string(body))

	open(t, page, srv.URL+"/daemons/logs", http.StatusOK)
	cells := page.GetByTestId("daemon-cell")
	require.NoError(t, expect.Locator(cells).ToHaveCount(2, playwright.LocatorAssertionsToHaveCountOptions{Timeout: playwright.Float(browserTimeout)}))
	require.NoError(t, expect.Locator(page.GetByTestId("daemon-source")).ToHaveText("API"))
	require.NoError(t, page.GetByTestId("daemon-show-diff").Click())
	require.NoError(t, expect.Locator(page.GetByTestId("diff-start")).ToHaveCount(2))
	saveScreenshot(t, page, "daemons-diff")

	require.NoError(t, page.GetByTestId("daemon-start").Click())
	// The grid refreshes itself: both tasks come up without a reload.
	running := page.Locator(`[data-testid=daemon-cell][data-state=running]`)
	require.NoError(t, expect.Locator(running).ToHaveCount(2, playwright.LocatorAssertionsToHaveCountOptions{Timeout: playwright.Float(browserTimeout)}))
	open(t, page, srv.URL+"/daemons/logs", http.StatusOK)
	require.NoError(t, expect.Locator(page.Locator(`[data-testid=daemon-deployment][data-state=complete]`)).ToHaveCount(1,
		playwright.LocatorAssertionsToHaveCountOptions{Timeout: playwright.Float(browserTimeout)}))
	require.NoError(t, expect.Locator(page.Locator(`[data-testid=daemon-deployment][data-state=complete]`)).ToContainText("2 of 2 tasks running"))
	require.NoError(t, expect.Locator(page.GetByTestId("daemon-log")).ToContainText("daemon-task-running"))
	saveScreenshot(t, page, "daemons-environment")

	open(t, page, srv.URL+"/daemons", http.StatusOK)
	row := page.Locator(`[data-testid=daemon-environment-row][data-environment=logs]`)
	require.NoError(t, expect.Locator(row.GetByTestId("health-line")).ToHaveText("2 active, 0 launching, 0 unhealthy"))
	require.NoError(t, expect.Locator(page.Locator(`[data-testid=daemon-cluster][data-cluster=web]`)).ToContainText("local"))
	saveScreenshot(t, page, "daemons-index")

	// A version whose command does not exist: the deployment ends
	// unhealthy, with the reason on the page.
	status, body = callAPI(t, http.MethodPatch, srv.URL+"/api/v1/daemons/environments/logs", token, map[string]any{
		"task_definition": map[string]any{"name": "logger", "command": []string{"/opt/missing/logger"}},
	})
	require.Equal(t, http.StatusOK, status, string(body))
	version := decode[struct {
		ID string `json:"environment_version"`
	}](t, body)
	status, body = callAPI(t, http.MethodPost, srv.URL+"/api/v1/daemons/environments/logs/deployments", token, map[string]any{"version_id": version.ID})
	require.Equal(t, http.StatusAccepted, status, string(body))
	deployment := decode[struct {
		ID string `json:"id"`
	}](t, body)
	require.Eventually(t, func() bool {
		_, body := callAPI(t, http.MethodGet, srv.URL+"/api/v1/daemons/environments/logs/deployments/"+deployment.ID, token, nil)
		return decode[struct {
			State string `json:"state"`
		}](t, body).State == "unhealthy"
	}, browserWait, 200*time.Millisecond)
	open(t, page, srv.URL+"/daemons/logs", http.StatusOK)
	require.NoError(t, expect.Locator(page.GetByTestId("daemon-reason").First()).ToContainText("/opt/missing/logger"))
	saveScreenshot(t, page, "daemons-unhealthy")

	require.NoError(t, page.Locator(`[data-testid=daemon-deployment][data-state=unhealthy] a`).First().Click())
	require.NoError(t, expect.Locator(page.GetByTestId("daemon-deployment-page")).ToBeVisible())
	require.NoError(t, expect.Locator(page.GetByTestId("daemon-tasks")).ToContainText(regexp.MustCompile(`failed`)))
	saveScreenshot(t, page, "daemons-deployment")
}
