package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"
)

// launchBrowser starts the Playwright driver and a headless Chromium.
//
// Nothing is downloaded: the driver is playwright-core@1.52.0 installed by
// scripts/install-e2e-tools into ${GANTRY_E2E_CACHE:-$HOME/.cache/gantry-e2e}/driver,
// run with the system node (PLAYWRIGHT_NODEJS_PATH, default /usr/bin/node), and
// the browser is Debian's Chromium (GANTRY_CHROMIUM, default /usr/bin/chromium).
//
// The caller must close the browser and call pw.Stop() when done.
func launchBrowser() (*playwright.Playwright, playwright.Browser, error) {
	const hint = "run scripts/install-e2e-tools"

	cache := os.Getenv("GANTRY_E2E_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, nil, fmt.Errorf("e2e: cannot locate the e2e tool cache (set GANTRY_E2E_CACHE): %w", err)
		}
		cache = filepath.Join(home, ".cache", "gantry-e2e")
	}
	driverDir := filepath.Join(cache, "driver")
	if _, err := os.Stat(filepath.Join(driverDir, "package", "cli.js")); err != nil {
		return nil, nil, fmt.Errorf("e2e: Playwright driver missing (%s/package/cli.js not found); %s: %w", driverDir, hint, err)
	}

	if os.Getenv("PLAYWRIGHT_NODEJS_PATH") == "" {
		node := "/usr/bin/node"
		if _, err := os.Stat(node); err != nil {
			p, lerr := exec.LookPath("node")
			if lerr != nil {
				return nil, nil, fmt.Errorf("e2e: node not found (needed by the Playwright driver; set PLAYWRIGHT_NODEJS_PATH); %s: %w", hint, lerr)
			}
			node = p
		}
		if err := os.Setenv("PLAYWRIGHT_NODEJS_PATH", node); err != nil {
			return nil, nil, fmt.Errorf("e2e: set PLAYWRIGHT_NODEJS_PATH: %w", err)
		}
	}

	chromium := os.Getenv("GANTRY_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if fi, err := os.Stat(chromium); err != nil {
		return nil, nil, fmt.Errorf("e2e: Chromium missing (%s); %s or set GANTRY_CHROMIUM: %w", chromium, hint, err)
	} else if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return nil, nil, fmt.Errorf("e2e: Chromium at %s is not an executable file; %s or set GANTRY_CHROMIUM", chromium, hint)
	}

	pw, err := playwright.Run(&playwright.RunOptions{
		DriverDirectory:     driverDir,
		SkipInstallBrowsers: true,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("e2e: start Playwright driver from %s (%s if it is broken): %w", driverDir, hint, err)
	}

	browser, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(chromium),
		Headless:       playwright.Bool(true),
		Args: []string{
			"--no-sandbox",
			"--disable-gpu",
			"--disable-quic",
			"--disable-background-networking",
			"--disable-component-update",
			"--disable-sync",
			"--no-first-run",
		},
	})
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("e2e: launch Chromium %s: %w", chromium, err), pw.Stop())
	}
	return pw, browser, nil
}

// saveScreenshot writes a full-page PNG of page to screenshots/<name>.png,
// relative to the e2e package directory (the test's working directory).
// Characters unsafe in file names (such as the "/" in subtest names) become "_".
// It first waits for the page's load event (a page reached by a click may
// still be loading its styles) and stops the page from refreshing itself
// (holdStill), so that a slow capture on a busy machine shows the page, not
// its reload; after a screenshot the page no longer refreshes. The capture
// itself gets browserWait. It fails the test on error.
func saveScreenshot(t testing.TB, page playwright.Page, name string) {
	t.Helper()
	name = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, name)
	if name == "" || strings.Trim(name, ".") == "" {
		t.Fatalf("saveScreenshot: invalid screenshot name %q", name)
	}
	dir := "screenshots"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("saveScreenshot: create %s: %v", dir, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := page.WaitForLoadState(playwright.PageWaitForLoadStateOptions{
		State:   playwright.LoadStateLoad,
		Timeout: playwright.Float(browserTimeout),
	}); err != nil {
		t.Fatalf("saveScreenshot: %s: the page did not finish loading: %v", path, err)
	}
	holdStill(page)
	if _, err := page.Screenshot(playwright.PageScreenshotOptions{
		Path:     playwright.String(path),
		FullPage: playwright.Bool(true),
		Type:     playwright.ScreenshotTypePng,
		Timeout:  playwright.Float(browserTimeout),
	}); err != nil {
		t.Fatalf("saveScreenshot: %s: %v", path, err)
	}
}
