package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/views/pages/account"
)

func (s *Server) tokensPage(c echo.Context) error {
	return s.renderTokens(c, http.StatusOK, principalOf(c).User.ID, account.TokensView{})
}

func (s *Server) allTokensPage(c echo.Context) error {
	return s.renderTokens(c, http.StatusOK, 0, account.TokensView{ShowOwner: true})
}

// renderTokens lists ownerID's tokens with the new-token form, or (ownerID
// 0) everyone's without it: a token made there would be the admin's own.
func (s *Server) renderTokens(c echo.Context, status int, ownerID int64, v account.TokensView) error {
	tokens, err := models.ListTokens(c.Request().Context(), s.DB.Bun, ownerID)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, t := range tokens {
		v.Tokens = append(v.Tokens, tokenRow(t, now))
	}
	if v.Form = ownerID != 0; !v.Form {
		return s.render(c, status, account.Tokens(v))
	}
	checked := map[string]bool{auth.ScopeRead: true}
	if len(v.Errors) > 0 {
		checked = map[string]bool{}
		for _, sc := range c.Request().Form["scopes"] {
			checked[sc] = true
		}
	}
	isAdmin := principalOf(c).User.Role == models.RoleAdmin
	for _, sc := range auth.Scopes {
		if sc.Name == auth.ScopeAdmin && !isAdmin {
			continue
		}
		v.Scopes = append(v.Scopes, account.Scope{Name: sc.Name, Help: sc.Help, Checked: checked[sc.Name]})
	}
	return s.render(c, status, account.Tokens(v))
}

func tokenRow(t models.APIToken, now time.Time) account.Token {
	row := account.Token{
		ID: t.ID, Name: t.Name, Prefix: t.Prefix, Scopes: strings.Join(t.Scopes, ", "),
		Created: day(t.CreatedAt), LastUsed: "never", Expires: "never", Status: "active", Tone: "ok", Active: t.Active(now),
	}
	if t.User != nil {
		row.Owner = t.User.Email
	}
	if t.LastUsedAt != nil {
		row.LastUsed = t.LastUsedAt.UTC().Format("2006-01-02 15:04")
	}
	if t.ExpiresAt != nil {
		row.Expires = day(*t.ExpiresAt)
	}
	switch {
	case t.RevokedAt != nil:
		row.Status, row.Tone = "revoked", "muted"
	case !row.Active:
		row.Status, row.Tone = "expired", "muted"
	}
	return row
}

func day(t time.Time) string { return t.UTC().Format("2006-01-02") }

func (s *Server) createTokenForm(c echo.Context) error {
	p := principalOf(c)
	form, err := c.FormParams()
	if err != nil {
		return apperr.New(apperr.Invalid, "The form could not be read.")
	}
	in := access.NewToken{Name: form.Get("name"), Scopes: form["scopes"], By: p.Token}
	if in.ExpiresIn, err = parseExpiresIn(form.Get("expires_in")); err != nil {
		return err
	}
	secret, t, err := access.CreateToken(c.Request().Context(), s.DB.Bun, p.User, in, p.Actor())
	if apperr.CodeOf(err) == apperr.Invalid {
		ae := err.(*apperr.Error)
		return s.renderTokens(c, http.StatusBadRequest, p.User.ID, account.TokensView{Errors: ae.Fields, FormName: in.Name})
	}
	if err != nil {
		return err
	}
	// The secret is rendered into this one response and never again; the
	// page is not cached.
	c.Response().Header().Set("Cache-Control", "no-store")
	return s.renderTokens(c, http.StatusCreated, p.User.ID, account.TokensView{NewSecret: secret, NewName: t.Name})
}

// revokeToken revokes the token :id as the caller may (their own, or any
// for admins).
func (s *Server) revokeToken(c echo.Context) error {
	p := principalOf(c)
	id, err := pathID(c, "token")
	if err != nil {
		return err
	}
	if err := access.RevokeToken(c.Request().Context(), s.DB.Bun, id, p.tokenOwnerScope(), p.Actor()); err != nil {
		return err
	}
	s.authCache.forget()
	return nil
}

func (s *Server) revokeTokenForm(c echo.Context) error {
	if err := s.revokeToken(c); err != nil {
		return err
	}
	back := "/tokens"
	if strings.HasPrefix(c.Path(), "/admin/") {
		back = "/admin/tokens"
	}
	return s.redirectWithFlash(c, back, true, "Token revoked. Anything still using it now gets 401.")
}

// parseExpiresIn reads a token lifetime; empty means it never expires.
func parseExpiresIn(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, apperr.Field("expires_in", "must be a duration such as 720h")
	}
	return d, nil
}

func (s *Server) apiCreateToken(c echo.Context) error {
	p := principalOf(c)
	var in createTokenRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	nt := access.NewToken{Name: in.Name, Scopes: in.Scopes, By: p.Token}
	var err error
	if nt.ExpiresIn, err = parseExpiresIn(in.ExpiresIn); err != nil {
		return err
	}
	secret, t, err := access.CreateToken(c.Request().Context(), s.DB.Bun, p.User, nt, p.Actor())
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	out := createdTokenJSON{Token: TokenJSONOf(t), Secret: secret}
	out.Token.User = nil // the caller: no need to repeat them
	return c.JSON(http.StatusCreated, out)
}

func (s *Server) apiListTokens(c echo.Context) error {
	tokens, err := models.ListTokens(c.Request().Context(), s.DB.Bun, principalOf(c).User.ID)
	if err != nil {
		return err
	}
	out := make([]TokenJSON, len(tokens))
	for i := range tokens {
		out[i] = TokenJSONOf(&tokens[i])
		out[i].User = nil // the caller's own: no need to repeat them
	}
	return c.JSON(http.StatusOK, map[string]any{"tokens": out})
}

func (s *Server) apiRevokeToken(c echo.Context) error {
	if err := s.revokeToken(c); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) apiMe(c echo.Context) error {
	p := principalOf(c)
	out := meJSON{User: UserJSONOf(p.User)}
	if p.Token != nil {
		out.Token = &meTokenJSON{ID: p.Token.ID, Name: p.Token.Name, Scopes: p.Token.Scopes}
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) apiNotFound(c echo.Context) error {
	return apperr.New(apperr.NotFound, "There is no API endpoint %s %s; see docs/api.md.", c.Request().Method, c.Request().URL.Path)
}
