package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/app"
	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/servertest"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/views/layouts"
	"github.com/gantryhq/gantry/web"
)

// A test-only area, "widgets", registered through the same list as the real
// ones: it proves that an area's gantry.yaml section, job, navigation entry,
// home card, page and API all work in the harness every test uses, with no
// change to any shared file.

type widget struct {
	Name string `yaml:"name"`
	Size int    `yaml:"size"`
}

var widgetSection = gantryfile.Section{Key: "widgets", Read: func(r *gantryfile.SectionReader) any {
	var ws []widget
	if !r.Decode(&ws) {
		return nil
	}
	for i, w := range ws {
		if w.Size <= 0 {
			r.Problem(fmt.Sprintf("widgets[%d].size", i), "must be a positive number (got %d)", w.Size)
		}
	}
	return ws
}}

type polishArgs struct {
	Name string `json:"name"`
}

func (polishArgs) Kind() string                 { return "polish_widget" }
func (polishArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: "widgets"} }

// polishWorker is idempotent: the log entry it writes is all it does, and a
// second one says the same.
type polishWorker struct {
	river.WorkerDefaults[polishArgs]
	db *models.DB
}

func (w *polishWorker) Work(ctx context.Context, job *river.Job[polishArgs]) error {
	return models.AppendLog(ctx, w.db.Bun, &models.LogEntry{TargetID: "widget/" + job.Args.Name, Event: "widget-polished", Actor: "widgets"})
}

var widgetsArea = app.Area{Name: "widgets", Section: &widgetSection, Build: func(_ context.Context, d *app.Deps) (*app.Parts, error) {
	return &app.Parts{
		Config: &app.ConfigSection{Sync: func(ctx context.Context, f *gantryfile.File, actor string) ([]string, error) {
			var changes []string
			for _, w := range gantryfile.SectionOf[[]widget](f, "widgets") {
				if err := models.AppendLog(ctx, d.DB.Bun, &models.LogEntry{TargetID: "widget/" + w.Name, Event: "widget-registered", Actor: actor}); err != nil {
					return changes, err
				}
				changes = append(changes, "registered    widget "+w.Name)
			}
			return changes, nil
		}},
		Jobs: &jobs.Area{
			Queue:      jobs.QueueConfig{Name: "widgets"},
			AddWorkers: func(w *river.Workers) { river.AddWorker(w, &polishWorker{db: d.DB}) },
		},
		Web: web.Area{
			Name: "widgets", Title: "Widgets", Path: "/widgets", Blurb: "Widgets, polished on request.",
			Summary: func(context.Context) (string, error) { return "3 widgets shine", nil },
			Routes: func(r *web.Router) {
				r.Page(http.MethodGet, "/widgets", func(c echo.Context) error {
					body := templ.Raw(`<p data-testid="widgets-page">All widgets</p>`)
					page := templ.ComponentFunc(func(ctx context.Context, w io.Writer) error {
						return layouts.Base("Widgets").Render(templ.WithChildren(ctx, body), w)
					})
					return r.Render(c, http.StatusOK, page)
				}, models.RoleViewer)
				r.API(http.MethodPost, "/widgets/:name/polish", func(c echo.Context) error {
					err := d.Queue.InTx(c.Request().Context(), func(ctx context.Context, tx jobs.Tx) error {
						return tx.Enqueue(ctx, polishArgs{Name: c.Param("name")}, nil)
					})
					if err != nil {
						return err
					}
					return c.JSON(http.StatusAccepted, map[string]string{"polishing": c.Param("name")})
				}, models.RoleOperator, auth.ScopeWrite)
			},
		},
	}, nil
}}

func TestAnAreaAddedToTheListWorksEverywhere(t *testing.T) {
	t.Parallel()
	s := servertest.NewWith(t, servertest.Options{Areas: append(app.Areas(), widgetsArea)})
	s.StartWorkers(t)
	ctx := t.Context()

	t.Run("its gantry.yaml section is checked with the file's line", func(t *testing.T) {
		_, err := s.App.ParseConfig("gantry.yaml", []byte("pools: []\nwidgets:\n  - {name: cog, size: 0}\n"), nil)
		require.ErrorContains(t, err, "gantry.yaml:3: widgets[0].size: must be a positive number (got 0)")
		_, err = s.App.ParseConfig("gantry.yaml", []byte("widgets:\n  - {name: cog, colour: red}\n"), nil)
		require.ErrorContains(t, err, "gantry.yaml:2")
		require.ErrorContains(t, err, "colour")
		_, err = s.App.ParseConfig("gantry.yaml", []byte("gadgets: []\n"), nil)
		require.ErrorContains(t, err, "gadgets", "a key no area reads is still an error")
	})

	t.Run("its section is synced with the others", func(t *testing.T) {
		f, err := s.App.ParseConfig("gantry.yaml", []byte("widgets:\n  - {name: cog, size: 3}\n"), nil)
		require.NoError(t, err)
		changes, err := s.App.SyncConfig(ctx, f, "test")
		require.NoError(t, err)
		require.Contains(t, changes, "registered    widget cog")
		entries, err := models.ListLog(ctx, s.DB.Bun, models.LogFilter{Target: "widget/cog"})
		require.NoError(t, err)
		require.Len(t, entries, 1)
		require.Equal(t, "widget-registered", entries[0].Event)
	})

	admin, err := access.CreateUser(ctx, s.DB.Bun, access.NewUser{Email: "op@example.com", Role: "operator", Password: "a-long-password-1"}, "test")
	require.NoError(t, err)

	t.Run("its API is guarded and its job runs on its own queue", func(t *testing.T) {
		readOnly, _, err := access.CreateToken(ctx, s.DB.Bun, admin, access.NewToken{Name: "ro", Scopes: []string{"read"}}, "test")
		require.NoError(t, err)
		require.Equal(t, http.StatusForbidden, post(t, s.URL+"/api/v1/widgets/cog/polish", readOnly))
		require.Equal(t, http.StatusUnauthorized, post(t, s.URL+"/api/v1/widgets/cog/polish", ""))

		writer, _, err := access.CreateToken(ctx, s.DB.Bun, admin, access.NewToken{Name: "rw", Scopes: []string{"write"}}, "test")
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, post(t, s.URL+"/api/v1/widgets/cog/polish", writer))
		servertest.WaitFor(t, func() (bool, string) {
			entries, err := models.ListLog(ctx, s.DB.Bun, models.LogFilter{Target: "widget/cog", Event: "widget-polished"})
			require.NoError(t, err)
			return len(entries) == 1, "the polish job has not run"
		})
	})

	t.Run("its navigation entry, home card and page", func(t *testing.T) {
		c := login(t, s.URL, "op@example.com", "a-long-password-1")
		home := get(t, c, s.URL+"/")
		require.Contains(t, home, `href="/widgets"`)
		require.Contains(t, home, "Widgets, polished on request.")
		require.Contains(t, home, "3 widgets shine")
		page := get(t, c, s.URL+"/widgets")
		require.Contains(t, page, `data-testid="widgets-page"`)
		require.Contains(t, page, `aria-current="page">Widgets</a>`, "the navigation marks the area's page")
	})
}

func post(t *testing.T, u, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	return res.StatusCode
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

func login(t *testing.T, base, email, password string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar}
	m := csrfField.FindStringSubmatch(get(t, c, base+"/login"))
	require.NotNil(t, m, "no CSRF token on the sign-in page")
	res, err := c.PostForm(base+"/login", url.Values{"_csrf": {m[1]}, "email": {email}, "password": {password}})
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "/", res.Request.URL.Path, "signed in and sent home")
	return c
}

func get(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	res, err := c.Get(u)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, strings.TrimSpace(string(body))[:min(200, len(body))])
	return string(body)
}
