package infratest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// FilerAddress is the test provider's source address (testprovider/main.go);
// FilerVersion the version its filesystem mirror offers.
const (
	FilerAddress = "registry.terraform.io/gantryhq/filer"
	FilerVersion = "0.1.0"
)

// FilerProvider is the filer provider (testprovider/) built and installed
// in a filesystem mirror, and a terraform CLI configuration that installs
// it from there, offline: set TF_CLI_CONFIG_FILE=CLIConfig (Env).
type FilerProvider struct {
	Mirror, CLIConfig string
}

// Env is what a terraform command needs to install the provider.
func (p FilerProvider) Env() []string { return []string{"TF_CLI_CONFIG_FILE=" + p.CLIConfig} }

// Required is the required_providers block a configuration using the
// provider declares.
func (p FilerProvider) Required() string {
	return fmt.Sprintf("terraform {\n  required_providers {\n    filer = {\n      source  = %q\n      version = %q\n    }\n  }\n}\n",
		strings.TrimPrefix(FilerAddress, "registry.terraform.io/"), FilerVersion)
}

var (
	filerOnce sync.Once
	filer     FilerProvider
	filerErr  error
)

// Filer builds the provider once per test binary. The build is kept in the
// system's temporary directory under a hash of the provider's sources, so
// later test binaries reuse it (building the plugin framework takes a
// minute on a busy machine) and a changed provider is rebuilt.
func Filer(t testing.TB) FilerProvider {
	t.Helper()
	filerOnce.Do(func() { filer, filerErr = buildFiler() })
	if filerErr != nil {
		t.Fatalf("building the filer provider: %v", filerErr)
	}
	return filer
}

func buildFiler() (FilerProvider, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return FilerProvider{}, fmt.Errorf("cannot find infratest's sources")
	}
	src := filepath.Join(filepath.Dir(self), "testprovider")
	key, err := sourcesHash(src)
	if err != nil {
		return FilerProvider{}, err
	}
	root := filepath.Join(os.TempDir(), "gantry-filer-"+key)
	p := FilerProvider{Mirror: filepath.Join(root, "mirror"), CLIConfig: filepath.Join(root, "terraform.rc")}
	target := runtime.GOOS + "_" + runtime.GOARCH
	bin := filepath.Join(p.Mirror, FilerAddress, FilerVersion, target, "terraform-provider-filer_v"+FilerVersion)
	if _, err := os.Stat(p.CLIConfig); err == nil {
		return p, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return p, err
	}
	// Built beside the target and renamed into place, so that concurrent
	// test binaries never see half a binary.
	tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, ".")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return p, fmt.Errorf("go build: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return p, err
	}
	config := fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path    = %q\n    include = [%q]\n  }\n}\n", p.Mirror, FilerAddress)
	tmp = fmt.Sprintf("%s.%d", p.CLIConfig, os.Getpid())
	if err := os.WriteFile(tmp, []byte(config), 0o644); err != nil {
		return p, err
	}
	return p, os.Rename(tmp, p.CLIConfig)
}

// sourcesHash identifies a build of the provider: its sources, its module
// files and the Go toolchain.
func sourcesHash(src string) (string, error) {
	h := sha256.New()
	h.Write([]byte(runtime.Version()))
	for _, name := range []string{"go.mod", "go.sum", "main.go", "provider.go"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// FilerFile is a filer_file resource block named name writing content to
// path (HCL expressions both); extra is added inside the block (count,
// for_each, refuse_destroy).
func FilerFile(name, path, content, extra string) string {
	return fmt.Sprintf("resource \"filer_file\" %q {\n%s  path    = %s\n  content = %s\n}\n", name, extra, path, content)
}
