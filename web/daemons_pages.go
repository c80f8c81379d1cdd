package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/daemons"
	"github.com/gantryhq/gantry/models"
	daemonview "github.com/gantryhq/gantry/views/pages/daemons"
)

// daemonPages registers the area's pages and forms.
func (s *daemonsHandlers) daemonPages(r *Router) {
	viewer, operator := models.RoleViewer, models.RoleOperator
	r.Page(http.MethodGet, "/daemons", s.daemonsPage, viewer)
	r.Page(http.MethodGet, "/daemons/:name", s.daemonEnvironmentPage, viewer)
	r.Page(http.MethodGet, "/daemons/:name/grid", s.daemonGrid, viewer)
	r.Page(http.MethodGet, "/daemons/:name/deployments/:id", s.daemonDeploymentPage, viewer)
	r.Page(http.MethodPost, "/daemons/:name/deployments", s.daemonStartForm, operator)
	r.Page(http.MethodPost, "/daemons/:name/stop", s.daemonStopForm, operator)
	r.Page(http.MethodPost, "/daemons/:name/rollback", s.daemonRollbackForm, operator)
}

// daemonStaleAfter is when a cluster's view counts as stale: several
// sweeps (every 15 s) have not refreshed it.
const daemonStaleAfter = 5 * time.Minute

func daemonEnvURL(name string) string { return "/daemons/" + url.PathEscape(name) }

func daemonStateTone(state string) string {
	switch state {
	case "active", "healthy", models.DaemonComplete, "running":
		return "ok"
	case models.DaemonUnhealthy, models.DaemonTimedOut, "failed":
		return "bad"
	case "inactive", models.DaemonStopped, models.DaemonCanceled:
		return "muted"
	}
	return ""
}

func daemonSource(source string) string {
	if source == "file" {
		return "gantry.yaml"
	}
	return "API"
}

func daemonGroup(v *models.DaemonVersion) string {
	if len(v.Attributes) == 0 {
		return "(every instance)"
	}
	return strings.Join(v.Attributes, " ")
}

func (s *daemonsHandlers) daemonsPage(c echo.Context) error {
	ctx := c.Request().Context()
	envs, err := s.Daemons.ListEnvironments(ctx, "")
	if err != nil {
		return err
	}
	v := daemonview.IndexView{}
	for _, e := range envs {
		j := daemonEnvironmentJSONOf(e)
		row := daemonview.Row{Name: e.Name, URL: daemonEnvURL(e.Name), State: j.State, StateTone: daemonStateTone(j.State),
			Health: j.Health, HealthTone: daemonStateTone(j.Health), HealthLine: j.HealthLine, Version: "—", Deployment: "—",
			Cluster: e.Latest.Cluster, Attributes: daemonGroup(e.Latest), Source: daemonSource(e.Source)}
		if e.Deployed != nil {
			row.Version = fmt.Sprintf("v%d", e.Deployed.Number)
		}
		if e.Active != nil {
			row.Deployment = e.Active.State + " (" + e.Active.Type + ")"
		}
		v.Rows = append(v.Rows, row)
	}
	clusters, err := models.DaemonClusters(ctx, s.DB.Bun)
	if err != nil {
		return err
	}
	for _, cl := range clusters {
		ins, err := models.DaemonClusterInstances(ctx, s.DB.Bun, cl.Name)
		if err != nil {
			return err
		}
		age := time.Since(cl.RefreshedAt)
		v.Clusters = append(v.Clusters, daemonview.Cluster{Name: cl.Name, Backend: cl.Backend, Instances: len(ins),
			Refreshed: shortDuration(age) + " ago", Stale: age > daemonStaleAfter})
	}
	return s.render(c, http.StatusOK, daemonview.Index(v))
}

// daemonGridOf builds the instances × task state picture.
func (s *daemonsHandlers) daemonGridOf(c echo.Context, e *daemons.Environment) (daemonview.Grid, *daemons.Picture, error) {
	p, err := s.Daemons.PictureOf(c.Request().Context(), e)
	if err != nil {
		return daemonview.Grid{}, nil, err
	}
	numbers, err := s.daemonVersionNumbers(c, e.ID)
	if err != nil {
		return daemonview.Grid{}, nil, err
	}
	g := daemonview.Grid{RefreshURL: daemonEnvURL(e.Name) + "/grid"}
	counts := map[string]int{}
	for _, in := range p.Instances {
		cell := daemonview.Cell{Instance: in.ID, Hostname: in.Hostname, State: "none", Label: "no task", Title: in.Hostname}
		if t, ok := p.Tasks[in.ID]; ok {
			cell.Version = numbers[t.VersionID]
			cell.State, cell.Label = t.State, cell.Version+" "+t.State
			cell.Title = fmt.Sprintf("%s · task %s since %s", in.Hostname, t.ID, clock(t.CreatedAt))
			if t.State == "failed" {
				cell.Label = cell.Version + " failed: " + orNone(t.Reason, "exited")
			}
			if t.State == "running" && t.VersionID != p.Version.ID {
				cell.State = "outdated"
			}
		}
		if until, ok := p.Backoff[in.ID]; ok && cell.State != "running" && cell.State != "launching" {
			cell.State, cell.Label = "backoff", "crash loop: restart at "+until.UTC().Format("15:04:05")
		}
		counts[cell.State]++
		g.Cells = append(g.Cells, cell)
	}
	for _, st := range []struct{ state, label string }{{"running", "running"}, {"outdated", "running another version"},
		{"launching", "launching"}, {"stopping", "stopping"}, {"failed", "failed"}, {"backoff", "crash loop"}, {"none", "no task"}} {
		g.Legend = append(g.Legend, daemonview.LegendItem{State: st.state, Label: st.label, Count: counts[st.state]})
	}
	return g, p, nil
}

func (s *daemonsHandlers) daemonVersionNumbers(c echo.Context, envID int64) (map[uuid.UUID]string, error) {
	vs, err := models.DaemonVersions(c.Request().Context(), s.DB.Bun, envID)
	if err != nil {
		return nil, err
	}
	out := map[uuid.UUID]string{}
	for _, v := range vs {
		out[v.ID] = fmt.Sprintf("v%d", v.Number)
	}
	return out, nil
}

func (s *daemonsHandlers) daemonGrid(c echo.Context) error {
	e, err := s.Daemons.GetEnvironment(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	g, _, err := s.daemonGridOf(c, e)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, daemonview.GridView(g))
}

// daemonDeploymentRow is a deployment with its progress: tasks it started
// that run, of those it started.
func (s *daemonsHandlers) daemonDeploymentRow(c echo.Context, env string, d *models.DaemonDeployment, numbers map[uuid.UUID]string) (daemonview.Deployment, error) {
	tasks, err := models.DeploymentDaemonTasks(c.Request().Context(), s.DB.Bun, d.ID)
	if err != nil {
		return daemonview.Deployment{}, err
	}
	row := daemonview.Deployment{ID: d.ID.String(), URL: daemonEnvURL(env) + "/deployments/" + d.ID.String(), Type: d.Type, State: d.State,
		StateTone: daemonStateTone(d.State), Version: numbers[d.VersionID], Reason: d.Reason, Created: clock(d.CreatedAt),
		Batches: plural(d.Batches, "batch", "batches"), Percent: "0", Started: "—", Ended: "—"}
	if d.StartedAt != nil {
		row.Started = clock(*d.StartedAt)
	}
	if d.EndedAt != nil {
		row.Ended = clock(*d.EndedAt)
	}
	running := 0
	for _, t := range tasks {
		if t.RunningAt != nil {
			running++
		}
	}
	row.Progress = fmt.Sprintf("%d of %s running", running, plural(len(tasks), "task", "tasks"))
	if len(tasks) > 0 {
		row.Percent = fmt.Sprint(100 * running / len(tasks))
	} else if d.State == models.DaemonComplete {
		row.Percent = "100"
	}
	return row, nil
}

func (s *daemonsHandlers) daemonEnvironmentPage(c echo.Context) error {
	ctx := c.Request().Context()
	name := c.Param("name")
	e, err := s.Daemons.GetEnvironment(ctx, name)
	if err != nil {
		return err
	}
	grid, pic, err := s.daemonGridOf(c, e)
	if err != nil {
		return err
	}
	numbers, err := s.daemonVersionNumbers(c, e.ID)
	if err != nil {
		return err
	}
	j := daemonEnvironmentJSONOf(e)
	v := daemonview.EnvironmentView{Name: name, State: j.State, StateTone: daemonStateTone(j.State), Health: j.Health,
		HealthTone: daemonStateTone(j.Health), HealthLine: j.HealthLine, Source: daemonSource(e.Source), FromFile: e.Source == "file",
		Cluster: pic.Version.Cluster, Attributes: daemonGroup(pic.Version), Matching: plural(len(pic.Instances), "matching instance", "matching instances"), Grid: grid,
		StopURL: daemonEnvURL(name) + "/stop", RollbackURL: daemonEnvURL(name) + "/rollback",
		CanOperate: principalOf(c).User.Role.Includes(models.RoleOperator), LogURL: "/log?target=" + url.QueryEscape(models.DaemonEnvironmentTarget(name))}
	v.ClusterRefreshed = "never (no agent has registered)"
	if clusters, err := models.DaemonClusters(ctx, s.DB.Bun); err != nil {
		return err
	} else {
		for _, cl := range clusters {
			if cl.Name == pic.Version.Cluster {
				age := time.Since(cl.RefreshedAt)
				v.ClusterRefreshed, v.ClusterStale = shortDuration(age)+" ago", age > daemonStaleAfter
			}
		}
	}
	versions, err := models.DaemonVersions(ctx, s.DB.Bun, e.ID)
	if err != nil {
		return err
	}
	diffID := c.QueryParam("diff")
	for _, ver := range versions {
		v.Versions = append(v.Versions, daemonview.Version{Number: fmt.Sprintf("v%d", ver.Number), ID: ver.ID.String(), Task: ver.TaskDefinition,
			Command: argvText(ver.Command), Group: ver.Cluster + " " + daemonGroup(&ver), MinHealthy: fmt.Sprintf("%d %%", ver.MinHealthyPercent),
			By: ver.CreatedBy, At: clock(ver.CreatedAt), Deployed: e.Deployed != nil && e.Deployed.ID == ver.ID})
		label := fmt.Sprintf("v%d · %s", ver.Number, clock(ver.CreatedAt))
		v.Options = append(v.Options, daemonview.Option{Value: ver.ID.String(), Label: label, Selected: ver.ID.String() == diffID})
	}
	if diffID != "" {
		id, err := uuid.Parse(diffID)
		if err != nil {
			return apperr.Field("diff", "must be a version id")
		}
		d, err := s.Daemons.DiffDeployment(ctx, name, id)
		if err != nil {
			return err
		}
		dv := &daemonview.DiffView{Version: fmt.Sprintf("v%d", d.Version.Number), VersionID: d.Version.ID.String(), Matching: plural(d.Instances, "matching instance", "matching instances"),
			FirstBatch: d.FirstBatch, Start: d.Start, Unchanged: d.Unchanged, StartURL: daemonEnvURL(name) + "/deployments"}
		for _, r := range d.Replace {
			dv.Replace = append(dv.Replace, daemonview.DiffLine{Instance: r.InstanceID, Task: r.TaskID.String(), Note: "runs " + r.From})
		}
		for _, st := range d.Stop {
			dv.Stop = append(dv.Stop, daemonview.DiffLine{Instance: st.InstanceID, Task: st.TaskID.String(), Note: st.Reason})
		}
		v.Diff = dv
	}
	deployments, err := models.DaemonDeployments(ctx, s.DB.Bun, e.ID, 20)
	if err != nil {
		return err
	}
	for i := range deployments {
		row, err := s.daemonDeploymentRow(c, name, &deployments[i], numbers)
		if err != nil {
			return err
		}
		v.Deployments = append(v.Deployments, row)
		if deployments[i].State == models.DaemonInProgress {
			v.Active = &row
		}
	}
	entries, err := models.DaemonLog(ctx, s.DB.Bun, name, 30)
	if err != nil {
		return err
	}
	v.Log = logRows(entries)
	return s.render(c, http.StatusOK, daemonview.Environment(v))
}

func (s *daemonsHandlers) daemonDeploymentPage(c echo.Context) error {
	ctx := c.Request().Context()
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return apperr.New(apperr.NotFound, "No deployment %s.", c.Param("id"))
	}
	d, err := s.Daemons.GetDeployment(ctx, c.Param("name"), id)
	if err != nil {
		return err
	}
	numbers, err := s.daemonVersionNumbers(c, d.EnvironmentID)
	if err != nil {
		return err
	}
	row, err := s.daemonDeploymentRow(c, d.Environment, &d.DaemonDeployment, numbers)
	if err != nil {
		return err
	}
	v := daemonview.DeploymentView{Environment: d.Environment, EnvironmentURL: daemonEnvURL(d.Environment), Deployment: row}
	for _, t := range d.Tasks {
		task := daemonview.Task{ID: t.ID.String(), Instance: t.InstanceID, State: t.State, StateTone: daemonStateTone(t.State),
			Created: clock(t.CreatedAt), Running: "—", Ended: "—", Reason: t.Reason}
		if t.RunningAt != nil {
			task.Running = clock(*t.RunningAt)
		}
		if t.EndedAt != nil {
			task.Ended = clock(*t.EndedAt)
		}
		v.Tasks = append(v.Tasks, task)
	}
	entries, err := models.ListLog(ctx, s.DB.Bun, models.LogFilter{Deployment: id.String(), Limit: 100})
	if err != nil {
		return err
	}
	v.Log, v.LogURL = logRows(entries), "/log?deployment="+url.QueryEscape(id.String())
	return s.render(c, http.StatusOK, daemonview.DeploymentPage(v))
}

// daemonFormResult redirects back to the environment with what happened.
func (s *daemonsHandlers) daemonFormResult(c echo.Context, d *models.DaemonDeployment, err error, done string) error {
	to := daemonEnvURL(c.Param("name"))
	if err != nil {
		if msg, ok := conflictMessage(err); ok {
			return s.redirectWithFlash(c, to, false, msg)
		}
		return err
	}
	return s.redirectWithFlash(c, to, true, fmt.Sprintf(done, d.ID))
}

func (s *daemonsHandlers) daemonStartForm(c echo.Context) error {
	id, err := daemonVersionParam(c.FormValue("version_id"))
	if err != nil {
		return err
	}
	d, err := s.Daemons.StartDeployment(c.Request().Context(), c.Param("name"), id, principalOf(c).Actor())
	return s.daemonFormResult(c, d, err, "Deployment %s is pending; it starts when no other deployment is in progress.")
}

func (s *daemonsHandlers) daemonStopForm(c echo.Context) error {
	d, err := s.Daemons.StopDeployment(c.Request().Context(), c.Param("name"), principalOf(c).Actor())
	return s.daemonFormResult(c, d, err, "Deployment %s is stopped; the environment is inactive until the next deployment.")
}

func (s *daemonsHandlers) daemonRollbackForm(c echo.Context) error {
	d, err := s.Daemons.RollbackDeployment(c.Request().Context(), c.Param("name"), nil, principalOf(c).Actor())
	return s.daemonFormResult(c, d, err, "Rollback deployment %s is pending.")
}
