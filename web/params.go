package web

import (
	"errors"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/models"
)

// pathID reads the numeric :id of a URL (pages and API alike). Anything
// else names nothing there is, so it is a 404 saying what was looked for
// ("No run abc."), not a bad request.
func pathID(c echo.Context, what string) (int64, error) {
	return pathIDOf(c, "id", what)
}

// pathIDOf is pathID for a parameter with another name.
func pathIDOf(c echo.Context, param, what string) (int64, error) {
	id, err := strconv.ParseInt(c.Param(param), 10, 64)
	if err != nil || id <= 0 {
		return 0, apperr.New(apperr.NotFound, "No %s %s.", what, c.Param(param))
	}
	return id, nil
}

// notFoundAs words a missing row for the caller.
func notFoundAs(err error, format string, args ...any) error {
	if errors.Is(err, models.ErrNotFound) {
		return apperr.New(apperr.NotFound, format, args...)
	}
	return err
}

// conflictMessage is the message of an action that does not apply to its
// subject's state (an environment no longer dirty, a run already over), to
// show as a flash.
func conflictMessage(err error) (string, bool) {
	var ae *apperr.Error
	if errors.As(err, &ae) && ae.Code == apperr.Conflict {
		return ae.Message, true
	}
	return "", false
}

// nonNilSlice makes an empty list [] in JSON rather than null.
func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
