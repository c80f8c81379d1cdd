package gantryfile

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// Section is a top-level key of gantry.yaml that an area reads itself: the
// area decodes its part into its own types and checks it, with problems
// reported like every other (file, line, key, reason). Parse hands each
// registered section its value; a key that no section and no field of File
// knows is still an error.
type Section struct {
	Key string
	// Read decodes and checks the section's value; what it returns is
	// File.Sections[Key]. It is called only when the key is written.
	Read func(r *SectionReader) any
}

// SectionReader is one section's value being read.
type SectionReader struct {
	node ast.Node
	v    *validator
}

// Decode reads the section's value into out, refusing unknown keys; on
// failure it reports the problem and returns false.
func (r *SectionReader) Decode(out any) bool {
	if err := yaml.NodeToValue(r.node, out, yaml.DisallowUnknownField()); err != nil {
		r.v.problems = append(r.v.problems, decodeProblem(r.v.name, err, yamlKeysOf(out)))
		return false
	}
	return true
}

// Problem reports that what is at key (a path from the file's top, such as
// "widgets[0].size") is wrong, and why.
func (r *SectionReader) Problem(key, format string, args ...any) {
	r.v.add(key, format, args...)
}

// LookupEnv answers whether a variable the section names is set.
func (r *SectionReader) LookupEnv(name string) (string, bool) {
	if r.v.env == nil {
		return "", false
	}
	return r.v.env(name)
}

// splitSections takes the registered sections' values out of the file's
// top-level mapping, so the rest can be decoded strictly into File.
func splitSections(file *ast.File, sections []Section) (rest ast.Node, found map[string]ast.Node) {
	if file == nil || len(file.Docs) == 0 {
		return nil, nil
	}
	top, ok := file.Docs[0].Body.(*ast.MappingNode)
	if !ok {
		return file.Docs[0].Body, nil
	}
	keys := make(map[string]bool, len(sections))
	for _, s := range sections {
		keys[s.Key] = true
	}
	kept := *top
	kept.Values = nil
	for _, mv := range top.Values {
		if k := mv.Key.String(); keys[k] {
			if found == nil {
				found = map[string]ast.Node{}
			}
			found[k] = mv.Value
			continue
		}
		kept.Values = append(kept.Values, mv)
	}
	return &kept, found
}

// readSections runs each written section's Read.
func (v *validator) readSections(f *File, sections []Section, found map[string]ast.Node) {
	for _, s := range sections {
		node, ok := found[s.Key]
		if !ok {
			continue
		}
		if f.Sections == nil {
			f.Sections = map[string]any{}
		}
		f.Sections[s.Key] = s.Read(&SectionReader{node: node, v: v})
	}
}

// SectionOf is the value section key's Read returned, or the zero T when
// the file does not have the section.
func SectionOf[T any](f *File, key string) T {
	var zero T
	if f == nil {
		return zero
	}
	v, ok := f.Sections[key].(T)
	if !ok && f.Sections[key] != nil {
		panic(fmt.Sprintf("gantryfile: section %s holds %T, not %T", key, f.Sections[key], zero))
	}
	return v
}

// yamlKeysOf are the yaml names of the fields of what out points to, for
// "did you mean …?" in a section's own types.
func yamlKeysOf(out any) []string {
	var keys []string
	var walk func(t reflect.Type)
	seen := map[reflect.Type]bool{}
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if name != "" && name != "-" {
				keys = append(keys, name)
			}
			walk(t.Field(i).Type)
		}
	}
	walk(reflect.TypeOf(out))
	return keys
}
