package web

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/views/pages/home"
)

var homeCards = []home.Card{
	{Href: "/infra", Title: "Infrastructure", Body: "Terragrunt plans per pull request; dependency-ordered applies after merge, with votes."},
	{Href: "/environments", Title: "Environments", Body: "Lease test environments to CI with temporary credentials; cleaned after use."},
	{Href: "/daemons", Title: "Daemons", Body: "One task on every instance, rolled out safely and kept alive."},
	{Href: "/modules", Title: "Modules", Body: "Resource graphs planned before they are applied, through plugins."},
	{Href: "/pipelines", Title: "Pipelines", Body: "Releases moved stage by stage by reading the deployment log."},
	{Href: "/log", Title: "Deployment log", Body: "Every action of every area, append-only, filterable and live."},
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
	v := home.View{Greeting: "Hello, " + p.User.Name, Cards: homeCards, Recent: logRows(recent), Counts: counts}
	return s.render(c, http.StatusOK, home.Page(v))
}

// plural writes n with the singular or plural noun: "1 user", "3 users".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
