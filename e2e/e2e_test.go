// Package e2e drives the real gantry binary through a real browser.
//
// TestMain builds ./cmd/gantry once (with -race when the tests run with
// -race, so a data race in the server fails the test that caused it) and
// launches one headless Chromium. Each test starts its own `gantry serve`
// on a free port against its own freshly migrated database, creates its
// users with the real CLI (`gantry admin ...`), and uses a new browser
// context, so the tests run in parallel and share nothing.
//
// Screenshots of every page land in e2e/screenshots/. The browser tooling
// comes from scripts/install-e2e-tools; when it is missing the tests fail
// rather than skip, so CI cannot pass without running them.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/playwright-community/playwright-go"
)

// env is what TestMain prepares once for every test: the binary under test
// and the browser. It is written only by TestMain, before any test runs.
var env struct {
	bin     string
	browser playwright.Browser
}

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "gantry-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(tmp)

	env.bin = filepath.Join(tmp, "gantry")
	args := []string{"build", "-o", env.bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/gantry")...)
	build.Dir = ".." // the repository root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL e2e: go %v: %v\n%s", args, err, out)
		return 1
	}

	pw, browser, err := launchBrowser()
	if err != nil {
		// Fail, never skip: a CI without the browser must not look green.
		fmt.Fprintf(os.Stderr, "FAIL %v\n", err)
		return 1
	}
	env.browser = browser
	defer func() {
		if err := browser.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: closing the browser: %v\n", err)
		}
		if err := pw.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stopping Playwright: %v\n", err)
		}
	}()
	return m.Run()
}
