package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/models"
	errpage "github.com/gantryhq/gantry/views/pages/errors"
)

// apiError is the one JSON shape of every API error.
type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Code    string            `json:"code"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
}

var statusOf = map[string]int{
	apperr.Invalid:      http.StatusBadRequest,
	apperr.Unauthorized: http.StatusUnauthorized,
	apperr.Forbidden:    http.StatusForbidden,
	apperr.NotFound:     http.StatusNotFound,
	apperr.Conflict:     http.StatusConflict,
	apperr.Locked:       http.StatusLocked,
	apperr.RateLimited:  http.StatusTooManyRequests,
	apperr.Internal:     http.StatusInternalServerError,
	apperr.Unavailable:  http.StatusServiceUnavailable,
}

var titleOf = map[int]string{
	400: "That request was not right", 401: "Please sign in", 403: "Not allowed", 404: "Page not found",
	405: "Not allowed", 409: "Conflict", 423: "Locked", 429: "Slow down", 500: "Something went wrong", 503: "Unavailable",
}

// handleError turns any error a handler returns into one response: JSON for
// the API, a page for browsers. Only server faults are logged, with the
// request id the user sees.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	// The request's own context may already be cancelled by the timeout
	// middleware; the error response must still be written.
	c.SetRequest(c.Request().WithContext(context.WithoutCancel(c.Request().Context())))
	ae := s.classify(c, err)
	status := statusOf[ae.Code]
	if status >= 500 {
		s.Logger.Error("request failed", "error", err, "method", c.Request().Method, "path", loggedPath(c.Request().URL.Path), "request_id", requestID(c))
	}
	if s.wantsJSON(c) {
		if c.Request().Method == http.MethodHead {
			_ = c.NoContent(status)
			return
		}
		_ = c.JSON(status, apiError{Error: apiErrorBody{Code: ae.Code, Message: ae.Message, Fields: ae.Fields}})
		return
	}
	if status == http.StatusUnauthorized && c.Request().Method == http.MethodGet {
		_ = c.Redirect(http.StatusSeeOther, "/login")
		return
	}
	msg := ae.Message
	if len(ae.Fields) > 0 {
		msg = ae.Error()
	}
	view := errpage.View{Status: status, Title: titleOf[status], Message: msg, RequestID: requestID(c), SignedIn: principalOf(c) != nil}
	if err := s.render(c, status, errpage.Page(view)); err != nil {
		s.Logger.Error("rendering error page", "error", err)
		_ = c.String(status, msg)
	}
}

// databaseDown says err is the database being unreachable (no connection,
// the server shutting down or refusing connections): a 503 to try again,
// not a fault of Gantry's.
func databaseDown(err error) bool {
	var connect *pgconn.ConnectError
	var pgErr *pgconn.PgError
	var netErr net.Error
	switch {
	case errors.As(err, &connect), errors.As(err, &netErr):
		return true
	case errors.As(err, &pgErr):
		// Class 08: connection exceptions; 57P01–57P03: shutting down or not
		// accepting connections; 53300: too many connections.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" ||
			pgErr.Code == "57P03" || pgErr.Code == "53300"
	}
	return false
}

// classify maps every error to an *apperr.Error, hiding internals.
func (s *Server) classify(c echo.Context, err error) *apperr.Error {
	var ae *apperr.Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, models.ErrNotFound):
		return apperr.New(apperr.NotFound, "Not found.")
	case databaseDown(err):
		return apperr.New(apperr.Unavailable, "The database cannot be reached just now. Try again shortly.")
	case errors.Is(err, context.DeadlineExceeded):
		return apperr.New(apperr.Unavailable, "The request took too long. Try again; if it keeps happening, narrow it (filters, smaller pages).")
	case errors.As(err, &he):
		switch he.Code {
		case http.StatusNotFound:
			return apperr.New(apperr.NotFound, "There is nothing at %s.", c.Request().URL.Path)
		case http.StatusMethodNotAllowed:
			return apperr.New(apperr.Invalid, "%s is not allowed on %s.", c.Request().Method, c.Request().URL.Path)
		case http.StatusRequestEntityTooLarge:
			return apperr.New(apperr.Invalid, "The request body is too large (the limit is 1 MB).")
		case http.StatusServiceUnavailable:
			return apperr.New(apperr.Unavailable, "The request took too long. Try again.")
		}
		for code, status := range statusOf {
			if status == he.Code && he.Code < 500 {
				return apperr.New(code, "%v", he.Message)
			}
		}
		if he.Code < 500 {
			return apperr.New(apperr.Invalid, "%v", he.Message)
		}
	}
	return apperr.New(apperr.Internal, "Something went wrong on our side. The request id (X-Request-Id) helps whoever runs Gantry find out what.")
}

// wantsJSON says the caller is a program: the API, metrics, the areas'
// routes for programs (Router.RootAndAPI, Router.Webhook), or a request
// that asks for JSON and not HTML.
func (s *Server) wantsJSON(c echo.Context) bool {
	r := c.Request()
	if s.apiRoute(c) {
		return true
	}
	return strings.Contains(r.Header.Get(echo.HeaderAccept), echo.MIMEApplicationJSON) &&
		!strings.Contains(r.Header.Get(echo.HeaderAccept), echo.MIMETextHTML)
}

// bindJSON decodes a request body strictly: unknown fields and malformed
// JSON are 400s that name the field or the place.
func bindJSON(c echo.Context, v any) error {
	if ct := c.Request().Header.Get(echo.HeaderContentType); !strings.HasPrefix(ct, echo.MIMEApplicationJSON) {
		return apperr.Field("Content-Type", "must be application/json")
	}
	dec := json.NewDecoder(c.Request().Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return apperr.New(apperr.Invalid, "The body must hold a single JSON object.")
	}
	if field := jsonNUL(reflect.ValueOf(v), ""); field != "" {
		return apperr.Field(field, nulMessage)
	}
	return nil
}

func jsonError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &syntax):
		return apperr.New(apperr.Invalid, "Malformed JSON at byte %d: %v.", syntax.Offset, syntax)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return apperr.New(apperr.Invalid, "The body must be a JSON object, not %s.", typ.Value)
		}
		return apperr.Field(typ.Field, fmt.Sprintf("must be %s, not %s", jsonKind(typ.Type.Kind()), typ.Value))
	case errors.As(err, &maxBytes):
		return apperr.New(apperr.Invalid, "The request body is too large (the limit is 1 MB).")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return apperr.Field(field, "unknown field")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return apperr.New(apperr.Invalid, "The request body is empty or cut short; send a JSON object.")
	}
	return apperr.New(apperr.Invalid, "Malformed JSON: %v.", err)
}

// jsonKind names a Go kind the way a JSON client thinks of it.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	}
	return k.String()
}
