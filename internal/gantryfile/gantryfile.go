// Package gantryfile reads gantry.yaml, the one file of configuration an
// operator commits. Each area's sections and their checks live in the area's
// file: environments.go (clients, pools, environments), repositories.go
// (repositories); this file holds what they share. Loading checks everything
// and reports each problem with the file, the line, the key and the reason;
// it does no other I/O than reading the file.
package gantryfile

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/gantryhq/gantry/internal/spelling"
)

// File is gantry.yaml.
type File struct {
	Version      int           `yaml:"version"`
	Clients      []Client      `yaml:"clients"`
	Pools        []Pool        `yaml:"pools"`
	Environments []Environment `yaml:"environments"`
	Repositories []Repository  `yaml:"repositories"`

	// Sections are what the areas that read their own section (Section)
	// made of it, by key.
	Sections map[string]any `yaml:"-"`
}

// Problem is one thing wrong in the file.
type Problem struct {
	File   string
	Line   int
	Key    string // YAML path such as pools[0].session
	Reason string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Key, p.Reason)
	}
	return fmt.Sprintf("%s: %s: %s", p.File, p.Key, p.Reason)
}

// Error lists every problem found.
type Error struct{ Problems []Problem }

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return "invalid configuration:\n  " + strings.Join(lines, "\n  ")
}

// Load reads and checks the file at path. lookupEnv answers whether a
// variable named by the file (admin_url_env) is set.
func Load(path string, lookupEnv func(string) (string, bool), sections ...Section) (*File, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return Parse(path, src, lookupEnv, sections...)
}

// Parse checks src as the content of the file named name; sections are the
// top-level keys areas read themselves.
func Parse(name string, src []byte, lookupEnv func(string) (string, bool), sections ...Section) (*File, error) {
	f := &File{}
	if len(bytes.TrimSpace(src)) == 0 {
		return f, nil
	}
	file, _ := parser.ParseBytes(src, 0)
	rest, found := splitSections(file, sections)
	v := &validator{name: name, ast: file, env: lookupEnv}
	// Unknown keys are found first, all of them; then the file is read
	// leniently so that its values are checked too and every problem comes
	// at once. Without unknown keys it is read strictly, which also catches
	// what the walk does not look at.
	if file != nil && len(file.Docs) > 0 {
		v.unknownKeys(file.Docs[0], sections)
	}
	strict := []yaml.DecodeOption{yaml.DisallowUnknownField()}
	if len(v.problems) > 0 {
		strict = nil
	}
	var err error
	if len(found) == 0 {
		err = yaml.NewDecoder(bytes.NewReader(src), strict...).Decode(f)
	} else {
		err = yaml.NodeToValue(rest, f, strict...)
	}
	if err != nil {
		return nil, &Error{Problems: append(v.problems, decodeProblem(name, err, fileKeys(sections)))}
	}
	v.check(f)
	v.readSections(f, sections, found)
	if len(v.problems) > 0 {
		return nil, &Error{Problems: v.problems}
	}
	return f, nil
}

var lineCol = regexp.MustCompile(`^\[(\d+):(\d+)\]\s*(.*)`)

// decodeProblem turns the YAML library's error into a Problem with a line.
func decodeProblem(name string, err error, known []string) Problem {
	msg := err.Error()
	first, _, _ := strings.Cut(msg, "\n")
	p := Problem{File: name, Key: "(syntax)", Reason: first}
	if m := lineCol.FindStringSubmatch(first); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
		p.Reason = m[3]
	}
	if m := unknownField.FindStringSubmatch(p.Reason); m != nil {
		if best, ok := spelling.Closest(m[1], known); ok {
			p.Reason += fmt.Sprintf(" (did you mean %s?)", best)
		}
	}
	return p
}

var unknownField = regexp.MustCompile(`^unknown field "([^"]+)"`)

// fileKeys are every key gantry.yaml may hold, for "did you mean …?": the
// yaml names of File's fields and of every struct beneath them, and the
// areas' sections.
func fileKeys(sections []Section) []string {
	keys := yamlKeysOf(&File{})
	for _, s := range sections {
		keys = append(keys, s.Key)
	}
	return keys
}

type validator struct {
	name     string
	ast      *ast.File
	env      func(string) (string, bool)
	problems []Problem
}

func (v *validator) add(key, format string, args ...any) {
	v.problems = append(v.problems, Problem{File: v.name, Line: v.line(key), Key: key, Reason: fmt.Sprintf(format, args...)})
}

// line finds where key is in the file (0 when it is not written there).
func (v *validator) line(key string) int {
	if v.ast == nil {
		return 0
	}
	for k := key; k != ""; k = parent(k) {
		p, err := yaml.PathString("$." + k)
		if err != nil {
			continue
		}
		if node, err := p.FilterFile(v.ast); err == nil && node != nil {
			return node.GetToken().Position.Line
		}
	}
	return 0
}

func parent(key string) string {
	if i := strings.LastIndexAny(key, ".["); i > 0 {
		return key[:i]
	}
	return ""
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
var rolePattern = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]+$`)

// duration reads a duration written as text, or gives def when it is absent.
func (v *validator) duration(key, text string, def time.Duration) time.Duration {
	if text == "" {
		return def
	}
	d, err := time.ParseDuration(text)
	if err != nil || d <= 0 {
		v.add(key, "must be a positive duration such as 3h or 90m (got %q)", text)
		return def
	}
	return d
}

func (v *validator) check(f *File) {
	if f.Version != 0 && f.Version != 1 {
		v.add("version", "must be 1")
	}
	v.checkRepositories(f.Repositories)
	v.checkEnvironments(f)
}
