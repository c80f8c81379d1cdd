package web

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/views"
)

const flashCookie = "gantry_flash"

// render writes a templ component, rendering it into a buffer first so that a
// failing template becomes a clean error page instead of half a page.
func (s *Server) render(c echo.Context, status int, page templ.Component) error {
	ctx := views.WithPage(c.Request().Context(), s.pageState(c))
	var buf bytes.Buffer
	if err := page.Render(ctx, &buf); err != nil {
		return err
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// pageState gathers what the layout shows about this request.
func (s *Server) pageState(c echo.Context) views.Page {
	p := views.Page{Path: c.Request().URL.Path, Flash: s.takeFlash(c), Nav: s.nav(), DevMailbox: s.Mailbox != nil}
	if token, ok := c.Get(middleware.DefaultCSRFConfig.ContextKey).(string); ok {
		p.CSRF = token
	}
	if pr := principalOf(c); pr != nil {
		u := pr.User
		p.User = &views.User{
			Name: u.Name, Email: u.Email, Role: string(u.Role),
			IsAdmin: u.Role == models.RoleAdmin, IsOperator: u.Role.Includes(models.RoleOperator),
		}
	}
	return p
}

// redirectWithFlash sends the browser on with a one-time message, so that a
// form post is never repeated by a reload (post/redirect/get).
func (s *Server) redirectWithFlash(c echo.Context, to string, ok bool, message string) error {
	kind := "bad"
	if ok {
		kind = "ok"
	}
	c.SetCookie(&http.Cookie{
		Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(kind + "|" + message)),
		Path: "/", HttpOnly: true, Secure: s.Config.SecureCookies(), SameSite: http.SameSiteLaxMode, MaxAge: 60,
	})
	return c.Redirect(http.StatusSeeOther, to)
}

func (s *Server) takeFlash(c echo.Context) *views.Flash {
	ck, err := c.Cookie(flashCookie)
	if err != nil {
		return nil
	}
	c.SetCookie(&http.Cookie{Name: flashCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.Config.SecureCookies(), SameSite: http.SameSiteLaxMode})
	raw, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil {
		return nil
	}
	kind, msg, found := strings.Cut(string(raw), "|")
	if !found || msg == "" {
		return nil
	}
	return &views.Flash{OK: kind == "ok", Message: msg}
}
