package web

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/views/pages/home"
)

var logCard = home.Card{Href: "/log", Title: "Deployment log", Body: "Every action of every area, append-only, filterable and live."}

// homeCards are the areas' cards, with their live summaries, then the log's.
func (s *Server) homeCards(ctx context.Context) []home.Card {
	cards := make([]home.Card, 0, len(s.Areas)+1)
	for _, a := range s.Areas {
		c := home.Card{Href: a.Path, Title: a.Title, Body: a.Blurb}
		if a.Summary != nil {
			if line, err := a.Summary(ctx); err == nil {
				c.Summary = line
			} else {
				s.Logger.WarnContext(ctx, "home page: an area's summary failed", "area", a.Name, "error", err)
			}
		}
		cards = append(cards, c)
	}
	return append(cards, logCard)
}

func (s *Server) home(c echo.Context) error {
	ctx := c.Request().Context()
	p := principalOf(c)
	recent, err := models.ListLog(ctx, s.DB.Bun, models.LogFilter{Limit: 10})
	if err != nil {
		return err
	}
	users, err := models.CountUsers(ctx, s.DB.Bun)
	if err != nil {
		return err
	}
	tokens, err := models.ListTokens(ctx, s.DB.Bun, p.User.ID)
	if err != nil {
		return err
	}
	active := 0
	for _, t := range tokens {
		if t.Active(time.Now()) {
			active++
		}
	}
	counts := fmt.Sprintf("%s · %d of your API tokens active", plural(int(users), "user", "users"), active)
	v := home.View{Greeting: "Hello, " + p.User.Name, Cards: s.homeCards(ctx), Recent: logRows(recent), Counts: counts}
	return s.render(c, http.StatusOK, home.Page(v))
}
