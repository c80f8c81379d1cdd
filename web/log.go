package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/models"
	logview "github.com/gantryhq/gantry/views/pages/log"
)

// logFilter reads the timeline filters shared by the page, the stream and
// the API; a bad value is a 400 naming the parameter.
func logFilter(c echo.Context) (models.LogFilter, logview.Filter, error) {
	q := c.QueryParams()
	form := logview.Filter{
		Target: q.Get("target"), Event: q.Get("event"), Revision: q.Get("revision"),
		Actor: q.Get("actor"), Deployment: q.Get("deployment"), Since: q.Get("since"), Until: q.Get("until"),
	}
	f := models.LogFilter{Target: form.Target, Event: form.Event, Revision: form.Revision, Actor: form.Actor, Deployment: form.Deployment}
	bad := apperr.Fields{}
	var err error
	if f.Since, err = parseTime(form.Since); err != nil {
		bad.Add("since", err.Error())
	}
	if f.Until, err = parseTime(form.Until); err != nil {
		bad.Add("until", err.Error())
	}
	for name, dst := range map[string]*int64{"before": &f.BeforeID, "after": &f.AfterID} {
		if v := q.Get(name); v != "" {
			if *dst, err = strconv.ParseInt(v, 10, 64); err != nil || *dst <= 0 {
				bad.Add(name, "must be a positive entry id")
			}
		}
	}
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 || f.Limit > models.MaxLogPage {
			bad.Add("limit", fmt.Sprintf("must be a number from 1 to %d", models.MaxLogPage))
		}
	}
	return f, form, bad.Err()
}

// parseTime accepts RFC 3339 and the browser's datetime-local (taken as UTC).
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("must be a time such as 2026-01-31T14:00:00Z")
}

func (s *Server) logPage(c echo.Context) error {
	ctx := c.Request().Context()
	f, form, err := logFilter(c)
	if err != nil {
		return err
	}
	f.AfterID = 0 // the page pages backwards; only the stream tails forwards
	if f.Limit == 0 {
		f.Limit = 50
	}
	entries, err := models.ListLog(ctx, s.DB.Bun, f)
	if err != nil {
		return err
	}
	events, err := models.LogEvents(ctx, s.DB.Bun)
	if err != nil {
		return err
	}
	v := logview.View{Filter: form, Rows: logRows(entries), Events: events, Filtered: form != (logview.Filter{})}
	query := c.QueryParams()
	if len(entries) == f.Limit {
		v.OlderURL = "/log?" + withParam(query, "before", strconv.FormatInt(entries[len(entries)-1].ID, 10))
	}
	if f.BeforeID > 0 {
		v.NewerURL = "/log?" + withParam(query, "before", "")
	} else {
		// The newest page tails: the stream starts after the newest entry shown.
		last := int64(0)
		if len(entries) > 0 {
			last = entries[0].ID
		} else if last, err = models.LastLogID(ctx, s.DB.Bun); err != nil {
			return err
		}
		v.StreamURL = "/log/stream?" + withParam(query, "after", strconv.FormatInt(last, 10))
	}
	return s.render(c, http.StatusOK, logview.Page(v))
}

// logStream tails the log as server-sent events, each a rendered table row.
// It reads what the client missed (after=, Last-Event-ID) with a query of
// its own, once, then lives on the entries the process's logHub reads for
// every stream, filtering them in memory: an entry committed by any process
// anywhere shows up within about a second, and open streams add no queries.
func (s *Server) logStream(c echo.Context) error {
	f, _, err := logFilter(c)
	if err != nil {
		return err
	}
	if id, err := strconv.ParseInt(c.Request().Header.Get("Last-Event-ID"), 10, 64); err == nil && id > f.AfterID {
		f.AfterID = id // a reconnecting browser resumes where it was
	}
	ctx := c.Request().Context()
	batches, start, unsubscribe, err := s.hub.subscribe(ctx)
	if err != nil {
		return err
	}
	defer unsubscribe()
	if f.AfterID == 0 {
		f.AfterID = start // no position given: tail from now
	}
	f.Limit = 0 // the hub's entries are not paged per stream

	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 3000\n\n")
	w.Flush()

	send := func(e *models.LogEntry) bool {
		var buf bytes.Buffer
		if err := logview.RowView(logRow(*e)).Render(ctx, &buf); err != nil {
			return false
		}
		fmt.Fprintf(w, "id: %d\nevent: row\n", e.ID)
		for _, line := range sseLines(buf.String()) {
			fmt.Fprintf(w, "data: %s\n", line)
		}
		fmt.Fprint(w, "\n")
		f.AfterID = e.ID
		return true
	}

	// Catch up to where the hub's batches start, with this stream's filter.
	catchUp := f
	catchUp.Limit = 100
	if catchUp.BeforeID == 0 || catchUp.BeforeID > start+1 {
		catchUp.BeforeID = start + 1
	}
	for catchUp.AfterID < start {
		entries, err := models.ListLog(ctx, s.DB.Bun, catchUp)
		if err != nil {
			return nil // the client reconnects with Last-Event-ID
		}
		for i := range entries {
			if !send(&entries[i]) {
				return nil
			}
		}
		w.Flush()
		if len(entries) < catchUp.Limit {
			break
		}
		catchUp.AfterID = entries[len(entries)-1].ID
	}

	keepAlive := time.NewTicker(10 * time.Second)
	defer keepAlive.Stop()
	next := start // the hub's next batch starts after this id
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-keepAlive.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			w.Flush()
		case b, ok := <-batches:
			if !ok || b.from != next {
				// Closed: this stream fell logSubBuffer batches behind. It
				// ends; the browser reconnects with Last-Event-ID.
				return nil
			}
			next = b.to
			sent := false
			for i := range b.entries {
				if f.Matches(&b.entries[i]) { // also skips ids up to f.AfterID
					if !send(&b.entries[i]) {
						return nil
					}
					sent = true
				}
			}
			if sent {
				w.Flush()
			}
		}
	}
}

// sseLines cuts text into the lines of an event stream's data fields. The
// stream's parser ends a line at CR, LF or CRLF, so all three must cut
// here: a bare CR in a log field (a revision, a target) would otherwise
// start a field of the sender's choosing ("retry:", "id:").
func sseLines(text string) []string {
	return strings.Split(strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n"), "\n")
}

func logRows(entries []models.LogEntry) []logview.Row {
	rows := make([]logview.Row, len(entries))
	for i, e := range entries {
		rows[i] = logRow(e)
	}
	return rows
}

func logRow(e models.LogEntry) logview.Row {
	row := logview.Row{
		ID: e.ID, When: e.CreatedAt.UTC().Format("2006-01-02 15:04:05"), WhenISO: e.CreatedAt.UTC().Format(time.RFC3339),
		Deployment: e.DeploymentID, Target: e.TargetID, TargetURL: "/log?target=" + url.QueryEscape(e.TargetID),
		Revision: e.Revision, Event: e.Event, Tone: eventTone(e.Event), Actor: e.Actor,
	}
	if len(e.Detail) > 0 {
		b, _ := json.MarshalIndent(e.Detail, "", "  ")
		row.DetailJSON = string(b)
		row.DetailSummary = detailSummary(e.Detail)
	}
	return row
}

// Bounds of a detail's one-line summary: each value, and the whole line.
const (
	detailValueRunes   = 40
	detailSummaryRunes = 160
)

// detailSummary writes a detail as "key: value · key: value", keys in
// order, each value on one line and shortened, the whole line too: the
// table shows what kind of detail an entry has, the full JSON is a click away.
func detailSummary(detail map[string]any) string {
	keys := slices.Sorted(maps.Keys(detail))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+": "+shorten(detailValue(detail[k]), detailValueRunes))
	}
	return shorten(strings.Join(parts, " · "), detailSummaryRunes)
}

// detailValue is one detail value as plain text: strings without quotes,
// lists joined with commas, anything else as compact JSON.
func detailValue(v any) string {
	switch v := v.(type) {
	case string:
		return strings.Join(strings.Fields(v), " ")
	case []any:
		items := make([]string, len(v))
		for i, item := range v {
			items[i] = detailValue(item)
		}
		return strings.Join(items, ", ")
	case nil:
		return "null"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// shorten cuts s to at most n runes, ending with an ellipsis when cut.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:n-1]), " ·,") + "…"
}

// eventTone colours events by the words their names conventionally use.
func eventTone(event string) string {
	switch {
	case strings.Contains(event, "fail"), strings.Contains(event, "reject"), strings.Contains(event, "abort"), strings.Contains(event, "dirty"):
		return "bad"
	case strings.Contains(event, "success"), strings.Contains(event, "succeeded"), strings.Contains(event, "approved"), strings.HasSuffix(event, "-finished"), strings.Contains(event, "applied"):
		return "ok"
	case strings.Contains(event, "revoked"), strings.Contains(event, "disabled"), strings.Contains(event, "cancel"):
		return "warn"
	}
	return ""
}

func withParam(q url.Values, key, value string) string {
	out := url.Values{}
	for k, v := range q {
		if k != key && k != "after" && k != "before" {
			out[k] = v
		}
	}
	if value != "" {
		out.Set(key, value)
	}
	return out.Encode()
}

func (s *Server) apiListLog(c echo.Context) error {
	f, _, err := logFilter(c)
	if err != nil {
		return err
	}
	if f.Limit == 0 {
		f.Limit = 100
	}
	entries, err := models.ListLog(c.Request().Context(), s.DB.Bun, f)
	if err != nil {
		return err
	}
	page := logPageJSON{Entries: logEntriesJSONOf(entries)}
	if len(entries) == f.Limit && f.AfterID == 0 {
		page.Next = "/api/v1/log?" + withParam(c.QueryParams(), "before", strconv.FormatInt(entries[len(entries)-1].ID, 10))
	}
	return c.JSON(http.StatusOK, page)
}

const maxLogField = 512

func (s *Server) apiAppendLog(c echo.Context) error {
	var in newLogEntryRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	bad := apperr.Fields{}
	for name, v := range map[string]string{"deployment_id": in.DeploymentID, "target_id": in.TargetID, "revision": in.Revision, "event": in.Event} {
		if len(v) > maxLogField {
			bad.Add(name, fmt.Sprintf("must be at most %d characters", maxLogField))
		}
	}
	if strings.TrimSpace(in.TargetID) == "" {
		bad.Add("target_id", "is required")
	}
	if strings.TrimSpace(in.Event) == "" {
		bad.Add("event", "is required")
	}
	if err := bad.Err(); err != nil {
		return err
	}
	e := &models.LogEntry{DeploymentID: in.DeploymentID, TargetID: in.TargetID, Revision: in.Revision, Event: in.Event,
		Actor: principalOf(c).Actor(), Detail: in.Detail}
	if err := models.AppendLog(c.Request().Context(), s.DB.Bun, e); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, logEntryJSONOf(e))
}

// granularityParams reads target and the event names of one level.
func granularityParams(c echo.Context) (string, models.Granularity, error) {
	g := models.Granularity{Started: c.QueryParam("started"), Succeeded: c.QueryParam("succeeded"), Failed: c.QueryParam("failed")}
	target := c.QueryParam("target")
	bad := apperr.Fields{}
	if target == "" {
		bad.Add("target", "is required")
	}
	return target, g, bad.Err()
}

// apiLatestRevision answers "what is the latest revision that reached event
// on target?" (the seed's latest deployed or latest failed revision).
func (s *Server) apiLatestRevision(c echo.Context) error {
	target, event := c.QueryParam("target"), c.QueryParam("event")
	bad := apperr.Fields{}
	if target == "" {
		bad.Add("target", "is required")
	}
	if event == "" {
		bad.Add("event", "is required, e.g. pipeline-finished-successfully or pipeline-failed")
	}
	if err := bad.Err(); err != nil {
		return err
	}
	e, err := models.LatestRevision(c.Request().Context(), s.DB.Bun, target, event)
	if err != nil {
		if err == models.ErrNotFound {
			return apperr.New(apperr.NotFound, "No revision of %s has reached %s.", target, event)
		}
		return err
	}
	return c.JSON(http.StatusOK, logEntryJSONOf(e))
}

// apiInProgress lists revisions that started and have not finished at the
// level named by the started/succeeded/failed event names.
func (s *Server) apiInProgress(c echo.Context) error {
	target, g, err := granularityParams(c)
	if err != nil {
		return err
	}
	bad := apperr.Fields{}
	if g.Started == "" {
		bad.Add("started", "is required, e.g. pipeline-started")
	}
	if g.Succeeded == "" && g.Failed == "" {
		bad.Add("succeeded", "give the succeeded and/or failed event names")
	}
	if err := bad.Err(); err != nil {
		return err
	}
	entries, err := models.InProgress(c.Request().Context(), s.DB.Bun, target, g)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"target": target, "in_progress": logEntriesJSONOf(entries)})
}
