package gantryfile

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/gantryhq/gantry/internal/spelling"
)

// unknownKeys finds every key of the document that no field of the types
// beneath File takes, so that all of them are reported at once (the
// decoder stops at the first), each with its line and the nearest known
// key. sections are the top-level keys areas read themselves.
func (v *validator) unknownKeys(doc ast.Node, sections []Section) {
	skip := map[string]bool{}
	for _, s := range sections {
		skip[s.Key] = true
	}
	v.walkKeys(doc, reflect.TypeOf(File{}), "", skip)
}

func (v *validator) walkKeys(n ast.Node, t reflect.Type, path string, skip map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n := n.(type) {
	case *ast.DocumentNode:
		v.walkKeys(n.Body, t, path, skip)
	case *ast.AnchorNode:
		v.walkKeys(n.Value, t, path, skip)
	case *ast.TagNode:
		v.walkKeys(n.Value, t, path, skip)
	case *ast.SequenceNode:
		if t.Kind() != reflect.Slice {
			return // a type mismatch: the decoder says so
		}
		for i, item := range n.Values {
			v.walkKeys(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), nil)
		}
	case *ast.MappingNode:
		for _, mv := range n.Values {
			v.walkKey(mv, t, path, skip)
		}
	case *ast.MappingValueNode:
		v.walkKey(n, t, path, skip)
	}
}

func (v *validator) walkKey(mv *ast.MappingValueNode, t reflect.Type, path string, skip map[string]bool) {
	key := mv.Key.String()
	if skip[key] || key == "<<" {
		return // an area's own section; a merge of an anchor
	}
	full := key
	if path != "" {
		full = path + "." + key
	}
	switch t.Kind() {
	case reflect.Map:
		v.walkKeys(mv.Value, t.Elem(), full, nil)
	case reflect.Struct:
		field, ok := yamlField(t, key)
		if !ok {
			reason := fmt.Sprintf("unknown field %q", key)
			if best, ok := spelling.Closest(key, fieldKeys(t)); ok {
				reason += fmt.Sprintf(" (did you mean %s?)", best)
			}
			v.problems = append(v.problems, Problem{File: v.name, Line: mv.Key.GetToken().Position.Line, Key: full, Reason: reason})
			return
		}
		v.walkKeys(mv.Value, field.Type, full, nil)
	}
}

// fieldKeys are the yaml keys of t's own fields.
func fieldKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// yamlField is t's field that the yaml key names.
func yamlField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == key && name != "-" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
