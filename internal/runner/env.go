package runner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// defaultPath is the PATH commands get when Gantry's own environment has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// minEnvSecretLen is the shortest value of a secret-looking variable that is
// redacted: masking every "1" or "yes" would shred the output and hide nothing.
const minEnvSecretLen = 4

// baseEnv is the whole environment a command starts from: Gantry's own
// process environment is NOT passed on, so its secrets (DATABASE_URL, the
// session key, …) never reach a command.
func baseEnv() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPath
	}
	lang := os.Getenv("LANG")
	if lang == "" {
		lang = "C.UTF-8"
	}
	env := []string{"PATH=" + path, "LANG=" + lang}
	if home := os.Getenv("HOME"); home != "" {
		env = append(env, "HOME="+home)
	}
	return env
}

// buildEnv merges extra over the base environment (a later entry wins) and
// returns the value of PATH that results.
func buildEnv(extra []string) (env []string, path string, err error) {
	index := make(map[string]int)
	add := func(kv string) {
		name, _, _ := strings.Cut(kv, "=")
		if i, ok := index[name]; ok {
			env[i] = kv
			return
		}
		index[name] = len(env)
		env = append(env, kv)
	}
	for _, kv := range baseEnv() {
		add(kv)
	}
	for _, kv := range extra {
		name, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			// The entry itself is not quoted: it may be a secret missing its name.
			return nil, "", fmt.Errorf("%w: an Env entry has no '=' (want NAME=value)", ErrInvalidCommand)
		case name == "":
			return nil, "", fmt.Errorf("%w: Env entry with an empty name", ErrInvalidCommand)
		case strings.ContainsRune(kv, 0):
			return nil, "", fmt.Errorf("%w: Env entry %s contains a NUL byte", ErrInvalidCommand, name)
		}
		add(kv)
	}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	return env, path, nil
}

// secretsOf returns every value to redact from cmd's output: its Secrets and
// the values of its secret-looking Env entries.
func secretsOf(cmd Command) []string {
	var secrets []string
	for _, s := range cmd.Secrets {
		secrets = append(secrets, secretParts(s, 1)...)
	}
	for _, kv := range cmd.Env {
		if name, value, ok := strings.Cut(kv, "="); ok && SecretEnvName(name) {
			secrets = append(secrets, secretParts(value, minEnvSecretLen)...)
		}
	}
	return secrets
}

// SecretEnvName reports whether an environment variable's value is redacted
// from command output automatically: AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN, and names (in any case) ending in _PASSWORD, _PASSPHRASE,
// _TOKEN, _API_KEY or _PRIVATE_KEY, or containing _SECRET.
func SecretEnvName(name string) bool {
	n := strings.ToUpper(name)
	switch n {
	case "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "PASSWORD", "TOKEN", "SECRET":
		return true
	}
	for _, suffix := range []string{"_PASSWORD", "_PASSPHRASE", "_TOKEN", "_API_KEY", "_PRIVATE_KEY"} {
		if strings.HasSuffix(n, suffix) {
			return true
		}
	}
	return strings.Contains(n, "_SECRET") || strings.HasPrefix(n, "SECRET_")
}

// minLineSecretLen is the shortest line of a multi-line secret that is
// redacted on its own.
const minLineSecretLen = 8

// secretParts returns the value to redact and, for a multi-line value such as
// a PEM key, each of its longer lines too: tools often print such values line
// by line with their own indentation.
func secretParts(value string, minLen int) []string {
	if len(value) < minLen {
		return nil
	}
	parts := []string{value}
	if strings.ContainsAny(value, "\r\n") {
		for line := range strings.FieldsFuncSeq(value, func(r rune) bool { return r == '\n' || r == '\r' }) {
			if line = strings.TrimSpace(line); len(line) >= minLineSecretLen {
				parts = append(parts, line)
			}
		}
	}
	return parts
}

// lookPath resolves argv0 the way the command's own environment would: a name
// without a slash is searched in path (the command's PATH), a relative path
// with a slash is taken relative to dir.
func lookPath(argv0, dir, path string) (string, error) {
	if strings.Contains(argv0, "/") {
		p := argv0
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		resolved, err := exec.LookPath(p)
		if err != nil {
			return "", err
		}
		return filepath.Abs(resolved)
	}
	if path == os.Getenv("PATH") {
		resolved, err := exec.LookPath(argv0)
		if err != nil {
			return "", err
		}
		return filepath.Abs(resolved)
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) {
			continue // never search the working directory implicitly
		}
		if resolved, err := exec.LookPath(filepath.Join(d, argv0)); err == nil {
			return resolved, nil
		}
	}
	return "", &exec.Error{Name: argv0, Err: exec.ErrNotFound}
}

// quoteArg quotes one argument for display the way a POSIX shell reads it.
func quoteArg(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
