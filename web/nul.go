package web

import (
	"reflect"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"
)

// PostgreSQL's text cannot hold a NUL character: one that reached a query
// would be a 500. No field of Gantry's has a use for it, so a request that
// carries one is refused at the edge, naming where it was.

const nulMessage = "must not contain a NUL character"

// refuseNUL checks the path's parameters, the query and a form body.
func refuseNUL(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		for i, name := range c.ParamNames() {
			if i < len(c.ParamValues()) && strings.ContainsRune(c.ParamValues()[i], 0) {
				return apperr.Field(name, nulMessage)
			}
		}
		if field := nulIn(c.QueryParams()); field != "" {
			return apperr.Field(field, nulMessage)
		}
		if ct := c.Request().Header.Get(echo.HeaderContentType); strings.HasPrefix(ct, echo.MIMEApplicationForm) || strings.HasPrefix(ct, echo.MIMEMultipartForm) {
			form, err := c.FormParams()
			if err == nil {
				if field := nulIn(form); field != "" {
					return apperr.Field(field, nulMessage)
				}
			}
		}
		return next(c)
	}
}

func nulIn(values map[string][]string) string {
	for name, vs := range values {
		for _, v := range vs {
			if strings.ContainsRune(v, 0) || strings.ContainsRune(name, 0) {
				return strings.ToValidUTF8(strings.ReplaceAll(name, "\x00", `\0`), "?")
			}
		}
	}
	return ""
}

// jsonNUL finds a string holding a NUL in a decoded JSON body and names
// its field ("scopes[1]", "requirements[0].capabilities.os").
func jsonNUL(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return ""
		}
		return jsonNUL(v.Elem(), path)
	case reflect.String:
		if strings.ContainsRune(v.String(), 0) {
			return orNone(path, "body")
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if f := jsonNUL(v.Index(i), path+"["+strconv.Itoa(i)+"]"); f != "" {
				return f
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			key := it.Key()
			if key.Kind() == reflect.String && strings.ContainsRune(key.String(), 0) {
				return orNone(path, "body")
			}
			if f := jsonNUL(it.Value(), joinField(path, key.String())); f != "" {
				return f
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if sf.Anonymous && sf.Tag.Get("json") == "" {
				name = "" // embedded: its fields are the parent's
			}
			if f := jsonNUL(v.Field(i), joinField(path, name)); f != "" {
				return f
			}
		}
	}
	return ""
}

func joinField(path, name string) string {
	if path == "" || name == "" {
		return path + name
	}
	return path + "." + name
}
