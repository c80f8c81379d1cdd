package web

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/views/pages/account"
)

func (s *Server) loginPage(c echo.Context) error {
	if principalOf(c) != nil {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	return s.render(c, http.StatusOK, account.Login(account.LoginView{Next: c.QueryParam("next")}))
}

func (s *Server) login(c echo.Context) error {
	email, next := c.FormValue("email"), c.FormValue("next")
	secret, _, err := access.Login(c.Request().Context(), s.DB.Bun, email, c.FormValue("password"),
		access.Client{IP: c.RealIP(), UserAgent: c.Request().UserAgent()},
		s.Config.SessionTTL, access.LoginLimits{
			Attempts: s.Config.LoginAttempts, AddressAttempts: s.Config.LoginAddressAttempts,
			Window: s.Config.LoginWindow, Gate: s.loginGate,
		})
	if err != nil {
		var refused *access.Refusal
		if errors.As(err, &refused) {
			c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(refused.RetryAfter.Seconds()))))
		} else if apperr.CodeOf(err) != apperr.Unauthorized {
			return err
		}
		code := apperr.CodeOf(err)
		view := account.LoginView{Email: email, Next: next, Error: err.Error()}
		return s.render(c, statusOf[code], account.Login(view))
	}
	s.setSessionCookie(c, secret)
	return c.Redirect(http.StatusSeeOther, safeNext(next))
}

func (s *Server) logout(c echo.Context) error {
	p := principalOf(c)
	if p.SessionSecret != "" {
		if err := access.Logout(c.Request().Context(), s.DB.Bun, p.SessionSecret, p.User); err != nil {
			return err
		}
	}
	s.clearSessionCookie(c)
	return c.Redirect(http.StatusSeeOther, "/login")
}

// safeNext allows only a path on this site as the place to return to, so the
// sign-in page cannot be used to send people elsewhere.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}
