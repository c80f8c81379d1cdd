package gitrepo

import (
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

// allowedProtocols is GIT_ALLOW_PROTOCOL: git itself refuses every other
// transport, here and in anything the repository points to (submodules).
const allowedProtocols = "file:https:ssh:git"

// allowedSchemes are the URL schemes a repository URL may have.
var allowedSchemes = map[string]bool{
	"file": true, "https": true, "ssh": true, "git+ssh": true, "ssh+git": true, "git": true,
}

// transportHelper matches git's "<transport>::<address>" syntax (ext::,
// fd::, …), which runs a helper program.
var transportHelper = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*::`)

// repoURL is a validated repository URL.
type repoURL struct {
	git      string // what git is given
	key      string // what names the mirror: the URL without its password
	redacted string // for messages
	password string
}

// parseURL validates a repository URL the way git will read it: a URL with
// a scheme (file, https, ssh, git), scp-like [user@]host:path (a colon
// before any slash), or else a local path, which is made absolute.
func parseURL(raw string) (repoURL, error) {
	bad := func(why string) (repoURL, error) {
		return repoURL{}, fmt.Errorf("%w: %q: %s", ErrInvalidURL, redactURL(raw), why)
	}
	switch {
	case raw == "":
		return repoURL{}, fmt.Errorf("%w: empty", ErrInvalidURL)
	case strings.IndexFunc(raw, isControl) >= 0:
		return bad("contains a control character")
	case strings.HasPrefix(raw, "-"):
		return bad("starts with '-'")
	case transportHelper.MatchString(raw):
		return bad("transport helpers (<transport>::<address>, such as ext::) are not allowed")
	}

	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			return bad("not a URL")
		}
		scheme := strings.ToLower(u.Scheme)
		switch {
		case scheme == "http":
			return bad("plain http is not allowed; use https")
		case !allowedSchemes[scheme]:
			return bad("scheme " + u.Scheme + " is not allowed (file, https, ssh or git)")
		case scheme == "file" && u.Host != "" && u.Host != "localhost":
			return bad("a file URL names no host")
		case scheme == "file" && !strings.HasPrefix(u.Path, "/"):
			return bad("a file URL needs an absolute path")
		case scheme != "file" && u.Hostname() == "":
			return bad("no host")
		case strings.HasPrefix(u.Hostname(), "-"):
			return bad("host starts with '-'")
		case strings.HasPrefix(u.User.Username(), "-"):
			return bad("user name starts with '-'")
		case strings.Trim(u.Path, "/") == "":
			return bad("no repository path")
		}
		pw, _ := u.User.Password()
		key := *u
		key.Scheme = scheme
		key.Host = strings.ToLower(u.Host)
		if key.User != nil {
			key.User = url.User(u.User.Username())
		}
		return repoURL{git: raw, key: key.String(), redacted: u.Redacted(), password: pw}, nil
	}

	if colon := strings.IndexByte(raw, ':'); colon >= 0 && !strings.Contains(raw[:colon], "/") {
		// scp-like: [user@]host:path, which git hands to ssh.
		host := raw[:colon]
		if at := strings.LastIndexByte(host, '@'); at >= 0 {
			host = host[at+1:]
		}
		switch {
		case host == "":
			return bad("no host before ':'")
		case strings.HasPrefix(host, "-"):
			return bad("host starts with '-'")
		case strings.ContainsAny(host, " \t"):
			return bad("host contains a space")
		case raw[colon+1:] == "":
			return bad("no repository path after ':'")
		}
		return repoURL{git: raw, key: raw, redacted: raw}, nil
	}

	abs, err := filepath.Abs(raw)
	if err != nil {
		return bad("cannot make the path absolute: " + err.Error())
	}
	return repoURL{git: abs, key: abs, redacted: abs}, nil
}

// redactURL hides the password of a URL for an error message, as well as it
// can for a string that may not parse.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return u.Redacted()
	}
	if i, j := strings.Index(raw, "://"), strings.LastIndexByte(raw, '@'); i >= 0 && j > i {
		return raw[:i+3] + "xxxxx" + raw[j:]
	}
	return raw
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// isCommitID reports whether s is a full commit id: 40 (SHA-1) or 64
// (SHA-256) hexadecimal digits.
func isCommitID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// ValidRev checks a revision given to a Mirror: a full commit id, or a ref
// name (main, refs/heads/main, refs/pull/7/head, v1.2) by the rules of
// git check-ref-format, which leave no room for options (a leading '-'),
// ranges (..), or revision expressions (~ ^ : @{ …). It wraps
// ErrInvalidRev.
func ValidRev(rev string) error {
	if isCommitID(rev) {
		return nil
	}
	return validRefName(rev)
}

// maxRefLen bounds a ref name.
const maxRefLen = 1024

func validRefName(ref string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: %q %s", ErrInvalidRev, ref, why)
	}
	switch {
	case ref == "":
		return fmt.Errorf("%w: empty", ErrInvalidRev)
	case len(ref) > maxRefLen:
		return bad("is too long")
	case strings.HasPrefix(ref, "-"):
		return bad("starts with '-'")
	case ref == "@":
		return bad("is '@'")
	case strings.HasPrefix(ref, "/") || strings.HasSuffix(ref, "/"):
		return bad("starts or ends with '/'")
	case strings.HasSuffix(ref, "."):
		return bad("ends with '.'")
	case strings.Contains(ref, ".."):
		return bad("contains '..'")
	case strings.Contains(ref, "@{"):
		return bad("contains '@{'")
	case strings.IndexFunc(ref, isControl) >= 0:
		return bad("contains a control character")
	case strings.ContainsAny(ref, " ~^:?*[\\"):
		return bad(`contains one of space ~ ^ : ? * [ \`)
	}
	for part := range strings.SplitSeq(ref, "/") {
		switch {
		case part == "":
			return bad("contains '//'")
		case strings.HasPrefix(part, "."):
			return bad("has a component starting with '.'")
		case strings.HasSuffix(part, ".lock"):
			return bad("has a component ending with '.lock'")
		}
	}
	return nil
}

// validPath checks a path inside the repository: relative, slash-separated,
// without '.', '..' or empty elements.
func validPath(p string) error {
	switch {
	case p == "" || p == ".":
		return fmt.Errorf("%w: %q names no file", ErrInvalidPath, p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%w: %q contains a NUL byte", ErrInvalidPath, p)
	case !fs.ValidPath(p):
		return fmt.Errorf("%w: %q must be relative to the repository root, with no '.', '..' or empty elements", ErrInvalidPath, p)
	}
	return nil
}
