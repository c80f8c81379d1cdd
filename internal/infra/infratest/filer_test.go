package infratest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/internal/infra/infratest"
)

// The provider installs offline from its mirror, creates its files on
// apply, removes them on destroy, and refuses when told to.
func TestFilerProviderCreatesAndDestroys(t *testing.T) {
	p := infratest.Filer(t)
	dir, out := t.TempDir(), t.TempDir()
	kept, refused := filepath.Join(out, "kept"), filepath.Join(out, "refused")
	main := p.Required() +
		infratest.FilerFile("kept", `"`+kept+`"`, `"hello"`, "") +
		infratest.FilerFile("refused", `"`+refused+`"`, `"stays"`, "  refuse_destroy = true\n")
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	terraform := func(wantOK bool, args ...string) string {
		t.Helper()
		cmd := exec.Command("terraform", append([]string{"-chdir=" + dir}, args...)...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + out, "TF_IN_AUTOMATION=1"}, p.Env()...)
		b, err := cmd.CombinedOutput()
		if (err == nil) != wantOK {
			t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	terraform(true, "init", "-input=false", "-no-color")
	terraform(true, "apply", "-input=false", "-no-color", "-auto-approve")
	for path, want := range map[string]string{kept: "hello", refused: "stays"} {
		if b, err := os.ReadFile(path); err != nil || string(b) != want {
			t.Fatalf("%s after apply: %q, %v; want %q", path, b, err, want)
		}
	}
	terraform(true, "apply", "-input=false", "-no-color", "-auto-approve", "-destroy", "-target=filer_file.kept")
	if _, err := os.Stat(kept); !os.IsNotExist(err) {
		t.Fatalf("%s survived its destroy: %v", kept, err)
	}
	got := terraform(false, "apply", "-input=false", "-no-color", "-auto-approve", "-destroy")
	if !strings.Contains(got, "refusing to destroy") {
		t.Fatalf("the refused destroy says:\n%s", got)
	}
	if _, err := os.Stat(refused); err != nil {
		t.Fatalf("%s was removed although its destroy was refused: %v", refused, err)
	}
}
