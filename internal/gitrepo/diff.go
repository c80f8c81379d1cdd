package gitrepo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Changes are the files that differ between two commits, by repository
// path (slash-separated, exactly as git stores it: any byte but NUL and '/'
// may appear in a name, spaces and newlines included).
type Changes struct {
	Modified []string // content or type (file, symlink, submodule) changed
	Added    []string
	Deleted  []string
	Renamed  []Rename // with or without changes to the content
}

// Rename is a file that git found moved from Old to New.
type Rename struct {
	Old, New string
}

// Paths returns every path the changes touch, both sides of renames
// included, sorted and without duplicates.
func (c Changes) Paths() []string {
	var all []string
	all = append(all, c.Modified...)
	all = append(all, c.Added...)
	all = append(all, c.Deleted...)
	for _, r := range c.Renamed {
		all = append(all, r.Old, r.New)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// ChangedFiles lists the files that differ between the commits base and
// head (refs or commit ids), with rename detection: what
// `git diff --name-status -z --find-renames base head` shows, read with
// git's plumbing command diff-tree so that no user configuration changes it.
// Pass the merge base as base to get what a pull request changes.
func (m *Mirror) ChangedFiles(ctx context.Context, base, head string) (Changes, error) {
	for _, r := range []string{base, head} {
		if err := ValidRev(r); err != nil {
			return Changes{}, err
		}
	}
	// The output goes to a file, not through the runner's text stream:
	// -z output is NUL-separated and paths need not be UTF-8.
	tmp, err := os.MkdirTemp("", "gantry-diff-*")
	if err != nil {
		return Changes{}, fmt.Errorf("creating temporary directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "name-status")
	if _, err := m.git(ctx, "", "diff-tree", "-r", "-z", "--name-status", "--find-renames",
		"--no-commit-id", "--output="+out, "--end-of-options", base, head, "--"); err != nil {
		return Changes{}, fmt.Errorf("changed files between %s and %s: %w", base, head, err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		return Changes{}, fmt.Errorf("changed files between %s and %s: %w", base, head, err)
	}
	ch, err := parseNameStatus(raw)
	if err != nil {
		return Changes{}, fmt.Errorf("changed files between %s and %s: %w", base, head, err)
	}
	return ch, nil
}

// parseNameStatus reads `--name-status -z` output: a status field, then one
// path (two for renames and copies), each ended by NUL. A status is a letter
// with an optional score (R100, C075).
func parseNameStatus(raw []byte) (Changes, error) {
	var ch Changes
	next := func() (string, bool) {
		i := bytes.IndexByte(raw, 0)
		if i < 0 {
			return "", false
		}
		f := string(raw[:i])
		raw = raw[i+1:]
		return f, true
	}
	path := func(status string) (string, error) {
		p, ok := next()
		if !ok || p == "" {
			return "", fmt.Errorf("diff output ends inside the %q entry", status)
		}
		return p, nil
	}
	for len(raw) > 0 {
		status, ok := next()
		if !ok {
			return Changes{}, fmt.Errorf("diff output ends without NUL after %q", raw)
		}
		if status == "" {
			return Changes{}, fmt.Errorf("diff output has an empty status")
		}
		switch status[0] {
		case 'M', 'T', 'A', 'D':
			if len(status) != 1 {
				return Changes{}, fmt.Errorf("diff output has an unknown status %q", status)
			}
			p, err := path(status)
			if err != nil {
				return Changes{}, err
			}
			switch status[0] {
			case 'M', 'T':
				ch.Modified = append(ch.Modified, p)
			case 'A':
				ch.Added = append(ch.Added, p)
			case 'D':
				ch.Deleted = append(ch.Deleted, p)
			}
		case 'R', 'C':
			if !validScore(status[1:]) {
				return Changes{}, fmt.Errorf("diff output has an unknown status %q", status)
			}
			from, err := path(status)
			if err != nil {
				return Changes{}, err
			}
			to, err := path(status)
			if err != nil {
				return Changes{}, err
			}
			if status[0] == 'R' {
				ch.Renamed = append(ch.Renamed, Rename{Old: from, New: to})
			} else {
				ch.Added = append(ch.Added, to) // a copy leaves its source alone
			}
		default:
			// U (unmerged) and X (unknown) cannot come from two commits.
			return Changes{}, fmt.Errorf("diff output has an unexpected status %q", status)
		}
	}
	return ch, nil
}

// validScore reports whether s is a similarity score: up to three digits.
func validScore(s string) bool {
	if len(s) > 3 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
