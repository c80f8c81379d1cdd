package tgraph

import (
	"path"
	"strings"
)

// excludesFile lists directories whose units Terragrunt leaves out of a
// run started at the repository root (its --queue-excludes-file default),
// and so does the graph.
const excludesFile = ".terragrunt-excludes"

// excludes are the patterns of an excludes file: one a line, relative to
// the repository root, blank lines and lines starting with # ignored.
// A pattern is a glob of path.Match's syntax per path segment, where **
// stands for any number of segments, so "live/sandbox/**" excludes every
// unit below live/sandbox and "live/*/legacy" one directory in each
// environment.
type excludes []string

func parseExcludes(src []byte) excludes {
	var out excludes
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, cleanDir(strings.TrimSuffix(line, "/")))
	}
	return out
}

// match reports whether the unit directory dir is excluded.
func (ex excludes) match(dir string) bool {
	for _, p := range ex {
		if globMatch(strings.Split(p, "/"), strings.Split(dir, "/")) {
			return true
		}
	}
	return false
}

// globMatch matches path segments against pattern segments, ** matching
// zero or more segments.
func globMatch(pattern, segs []string) bool {
	for len(pattern) > 0 {
		if pattern[0] == "**" {
			for i := 0; i <= len(segs); i++ {
				if globMatch(pattern[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, err := path.Match(pattern[0], segs[0]); err != nil || !ok {
			return false
		}
		pattern, segs = pattern[1:], segs[1:]
	}
	return len(segs) == 0
}
