package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/views/pages/admin"
)

func (s *Server) adminIndex(c echo.Context) error {
	return s.render(c, http.StatusOK, admin.Index())
}

func (s *Server) usersPage(c echo.Context) error {
	return s.renderUsers(c, http.StatusOK, admin.UsersView{Form: admin.NewUserForm{Role: string(models.RoleViewer)}})
}

func (s *Server) renderUsers(c echo.Context, status int, v admin.UsersView) error {
	users, err := models.ListUsers(c.Request().Context(), s.DB.Bun)
	if err != nil {
		return err
	}
	self := principalOf(c).User.ID
	for _, u := range users {
		v.Users = append(v.Users, admin.UserRow{ID: u.ID, Email: u.Email, Name: u.Name, Role: string(u.Role),
			Disabled: u.Disabled(), Created: day(u.CreatedAt), IsSelf: u.ID == self})
	}
	for _, r := range models.Roles {
		v.Roles = append(v.Roles, string(r))
	}
	return s.render(c, status, admin.Users(v))
}

func (s *Server) createUserForm(c echo.Context) error {
	in := access.NewUser{Email: c.FormValue("email"), Name: c.FormValue("name"), Role: c.FormValue("role"), Password: c.FormValue("password")}
	u, err := access.CreateUser(c.Request().Context(), s.DB.Bun, in, principalOf(c).Actor())
	var ae *apperr.Error
	if errors.As(err, &ae) && ae.Code == apperr.Invalid {
		return s.renderUsers(c, http.StatusBadRequest, admin.UsersView{Errors: ae.Fields, Form: admin.NewUserForm{Email: in.Email, Name: in.Name, Role: in.Role}})
	}
	if err != nil {
		return err
	}
	return s.redirectWithFlash(c, "/admin/users", true, fmt.Sprintf("Created %s as %s.", u.Email, u.Role))
}

func (s *Server) setRoleForm(c echo.Context) error {
	id, err := s.otherUserID(c)
	if err != nil {
		return err
	}
	if err := access.SetRole(c.Request().Context(), s.DB.Bun, id, c.FormValue("role"), principalOf(c).Actor()); err != nil {
		return err
	}
	s.authCache.forget()
	return s.redirectWithFlash(c, "/admin/users", true, "Role changed.")
}

func (s *Server) disableUserForm(c echo.Context) error { return s.setDisabledForm(c, true) }
func (s *Server) enableUserForm(c echo.Context) error  { return s.setDisabledForm(c, false) }

func (s *Server) setDisabledForm(c echo.Context, disabled bool) error {
	id, err := s.otherUserID(c)
	if err != nil {
		return err
	}
	if err := access.SetDisabled(c.Request().Context(), s.DB.Bun, id, disabled, principalOf(c).Actor()); err != nil {
		return err
	}
	s.authCache.forget()
	msg := "User enabled."
	if disabled {
		msg = "User disabled: their sessions ended and their tokens stopped working."
	}
	return s.redirectWithFlash(c, "/admin/users", true, msg)
}

// otherUserID reads the :id of a user an admin acts on; admins cannot demote
// or disable themselves, so there is always an admin left.
func (s *Server) otherUserID(c echo.Context) (int64, error) {
	id, err := pathID(c, "user")
	if err != nil {
		return 0, err
	}
	if id == principalOf(c).User.ID {
		return 0, apperr.New(apperr.Conflict, "You cannot change your own role or disable yourself; ask another admin.")
	}
	return id, nil
}

// jobStates are the tabs of the jobs page, in the order work moves.
var jobStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRunning, rivertype.JobStateRetryable,
	rivertype.JobStateDiscarded, rivertype.JobStateCancelled, rivertype.JobStateCompleted,
}

func (s *Server) jobsPage(c echo.Context) error {
	ctx := c.Request().Context()
	state, err := jobState(c.QueryParam("state"))
	if err != nil {
		return err
	}
	counts, err := models.CountJobs(ctx, s.DB.Bun)
	if err != nil {
		return err
	}
	perState := map[string]int{}
	for _, jc := range counts {
		perState[jc.State] += jc.Count
	}
	if c.QueryParam("state") == "" {
		state = defaultJobState(perState)
	}
	v := admin.JobsView{State: string(state)}
	for _, st := range jobStates {
		v.Tabs = append(v.Tabs, admin.StateTab{State: string(st), Count: perState[string(st)], Current: st == state, URL: "/admin/jobs?state=" + string(st)})
	}
	params := river.NewJobListParams().States(state).First(50)
	if cursor := c.QueryParam("cursor"); cursor != "" {
		var jc river.JobListCursor
		if err := jc.UnmarshalText([]byte(cursor)); err != nil {
			return apperr.Field("cursor", "is not a cursor this page produced")
		}
		params = params.After(&jc)
	}
	res, err := s.River.JobList(ctx, params)
	if err != nil {
		return fmt.Errorf("listing jobs: %w", err)
	}
	for _, j := range res.Jobs {
		v.Jobs = append(v.Jobs, jobRow(j))
	}
	if len(res.Jobs) == 50 && res.LastCursor != nil {
		if text, err := res.LastCursor.MarshalText(); err == nil {
			v.OlderURL = "/admin/jobs?state=" + string(state) + "&cursor=" + string(text)
		}
	}
	return s.render(c, http.StatusOK, admin.Jobs(v))
}

// defaultJobState is the tab the jobs page opens on: the first state, in
// the order work moves, that has jobs (available when none has).
func defaultJobState(perState map[string]int) rivertype.JobState {
	for _, st := range jobStates {
		if perState[string(st)] > 0 {
			return st
		}
	}
	return rivertype.JobStateAvailable
}

func jobState(s string) (rivertype.JobState, error) {
	if s == "" {
		return rivertype.JobStateAvailable, nil
	}
	for _, st := range jobStates {
		if string(st) == s {
			return st, nil
		}
	}
	return "", apperr.Field("state", "must be one of available, scheduled, running, retryable, discarded, cancelled, completed")
}

func jobRow(j *rivertype.JobRow) admin.JobRow {
	row := admin.JobRow{
		ID: j.ID, Kind: j.Kind, Queue: j.Queue, State: string(j.State),
		Attempt: strconv.Itoa(j.Attempt) + " of " + strconv.Itoa(j.MaxAttempts),
		When:    j.ScheduledAt.UTC().Format("2006-01-02 15:04:05"),
	}
	if j.FinalizedAt != nil {
		row.When = j.FinalizedAt.UTC().Format("2006-01-02 15:04:05")
	}
	if n := len(j.Errors); n > 0 {
		row.LastError = j.Errors[n-1].Error
	}
	switch j.State {
	case rivertype.JobStateDiscarded, rivertype.JobStateRetryable:
		row.Tone = "bad"
	case rivertype.JobStateCompleted:
		row.Tone = "ok"
	case rivertype.JobStateCancelled:
		row.Tone = "muted"
	}
	switch j.State {
	case rivertype.JobStateDiscarded, rivertype.JobStateCancelled, rivertype.JobStateRetryable, rivertype.JobStateScheduled:
		row.CanRetry = true
	}
	switch j.State {
	case rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRetryable, rivertype.JobStateRunning:
		row.CanCancel = true
	}
	return row
}

// retryJobForm runs a job again, unless its area says that would do
// nothing (what it was for has ended): then the admin is told why.
func (s *Server) retryJobForm(c echo.Context) error {
	if s.StaleJob != nil {
		id, err := pathID(c, "job")
		if err != nil {
			return err
		}
		ctx := c.Request().Context()
		j, err := s.River.JobGet(ctx, id)
		if errors.Is(err, rivertype.ErrNotFound) {
			return apperr.New(apperr.NotFound, "No job with id %d.", id)
		}
		if err != nil {
			return err
		}
		why, err := s.StaleJob(ctx, j.Kind, j.EncodedArgs)
		if err != nil {
			return err
		}
		if why != "" {
			return s.redirectWithFlash(c, jobsTab(c), false, "Not retried: "+why)
		}
	}
	return s.jobAction(c, "job-retried", "Job queued to run again.", s.River.JobRetry)
}

func (s *Server) cancelJobForm(c echo.Context) error {
	return s.jobAction(c, "job-cancelled", "Job cancelled. A running job stops at its next check.", s.River.JobCancel)
}

func (s *Server) jobAction(c echo.Context, event, done string, act func(ctx context.Context, id int64) (*rivertype.JobRow, error)) error {
	id, err := pathID(c, "job")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	j, err := act(ctx, id)
	if errors.Is(err, rivertype.ErrNotFound) {
		return apperr.New(apperr.NotFound, "No job with id %d.", id)
	}
	if err != nil {
		return err
	}
	if err := models.AppendLog(ctx, s.DB.Bun, &models.LogEntry{
		TargetID: "job:" + strconv.FormatInt(id, 10), Event: event, Actor: principalOf(c).Actor(),
		Detail: map[string]any{"kind": j.Kind, "queue": j.Queue},
	}); err != nil {
		return err
	}
	return s.redirectWithFlash(c, jobsTab(c), true, done)
}

// jobsTab is where a job action returns: the tab it was taken on (the
// form's address carries it), or the page's own choice of tab.
func jobsTab(c echo.Context) string {
	if st, err := jobState(c.QueryParam("state")); err == nil && c.QueryParam("state") != "" {
		return "/admin/jobs?state=" + string(st)
	}
	return "/admin/jobs"
}

func (s *Server) apiListJobs(c echo.Context) error {
	state, err := jobState(c.QueryParam("state"))
	if err != nil {
		return err
	}
	res, err := s.River.JobList(c.Request().Context(), river.NewJobListParams().States(state).First(100))
	if err != nil {
		return err
	}
	type job struct {
		ID          int64      `json:"id"`
		Kind        string     `json:"kind"`
		Queue       string     `json:"queue"`
		State       string     `json:"state"`
		Attempt     int        `json:"attempt"`
		MaxAttempts int        `json:"max_attempts"`
		ScheduledAt time.Time  `json:"scheduled_at"`
		FinalizedAt *time.Time `json:"finalized_at,omitempty"`
	}
	out := []job{}
	for _, j := range res.Jobs {
		out = append(out, job{j.ID, j.Kind, j.Queue, string(j.State), j.Attempt, j.MaxAttempts, j.ScheduledAt, j.FinalizedAt})
	}
	return c.JSON(http.StatusOK, map[string]any{"jobs": out})
}

func (s *Server) apiListUsers(c echo.Context) error {
	users, err := models.ListUsers(c.Request().Context(), s.DB.Bun)
	if err != nil {
		return err
	}
	out := make([]UserJSON, len(users))
	for i := range users {
		out[i] = UserJSONOf(&users[i])
	}
	return c.JSON(http.StatusOK, map[string]any{"users": out})
}

func (s *Server) apiCreateUser(c echo.Context) error {
	var in createUserRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	u, err := access.CreateUser(c.Request().Context(), s.DB.Bun, access.NewUser(in), principalOf(c).Actor())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, UserJSONOf(u))
}

func (s *Server) apiUpdateUser(c echo.Context) error {
	id, err := s.otherUserID(c)
	if err != nil {
		return err
	}
	var in updateUserRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	u, err := access.UpdateUser(c.Request().Context(), s.DB.Bun, id, access.UserChange{Role: in.Role, Disabled: in.Disabled}, principalOf(c).Actor())
	if err != nil {
		return err
	}
	s.authCache.forget()
	return c.JSON(http.StatusOK, UserJSONOf(u))
}
