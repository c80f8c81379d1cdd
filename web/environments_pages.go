package web

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/models"
	envview "github.com/gantryhq/gantry/views/pages/environments"
)

// The pages of the environment pools area (seed 001): every pool's capacity
// and utilisation with the dirty queue, one environment, and the allocation
// history that answers "who held environment E" and "what did requester T
// hold". The JSON API of the same area is in environments.go.

const (
	environmentsPageSize      = 50 // environments per pool table
	allocationHistoryPageSize = 50 // allocations per history page
	environmentHistorySize    = 20 // allocations on an environment's page
	environmentLogSize        = 20 // log entries on an environment's page
	maxCleanupOutputShown     = 64 << 10
	dirtyTailLines            = 4
)

// environmentStates are the states the pools' capacity bars count, in
// their order (see models.EnvDeregistering).
var environmentStates = []struct{ State, Label string }{
	{models.EnvAvailable, "available"},
	{models.EnvInUse, "in use"},
	{models.EnvCleaning, "cleaning"},
	{models.EnvDirty, "dirty"},
	{models.EnvDeregistering, "deregistering"},
}

// dirtyReasonEvents are the log events that say why an environment is dirty.
var dirtyReasonEvents = []string{pools.EventCleanupFailed, pools.EventCleanupTimedOut}

func environmentStatusLabel(status string) string {
	if status == models.EnvInUse {
		return "in use"
	}
	return status
}

func environmentStatusTone(status string) string {
	switch status {
	case models.EnvAvailable:
		return "ok"
	case models.EnvCleaning:
		return "warn"
	case models.EnvDirty:
		return "bad"
	case models.EnvDeregistered:
		return "muted"
	}
	return ""
}

// allocationHistoryWindows are the time windows the history filters offer.
var allocationHistoryWindows = []struct {
	Value string
	Label string
	Span  time.Duration
}{
	{"24h", "in the last 24 hours", 24 * time.Hour},
	{"7d", "in the last 7 days", 7 * 24 * time.Hour},
	{"30d", "in the last 30 days", 30 * 24 * time.Hour},
	{"90d", "in the last 3 months", 90 * 24 * time.Hour},
	{"180d", "in the last 6 months", 180 * 24 * time.Hour},
}

// allocationHistorySince reads a history window: one of allocationHistoryWindows, or a time.
func allocationHistorySince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, w := range allocationHistoryWindows {
		if w.Value == v {
			return now.Add(-w.Span), nil
		}
	}
	t, err := parseTime(v)
	if err != nil {
		return time.Time{}, errors.New("must be 24h, 7d, 30d, 90d, 180d or a time such as 2026-01-31T14:00:00Z")
	}
	return t, nil
}

func allocationWindowOptions(selected string) []envview.Option {
	opts := []envview.Option{{Value: "", Label: "any time (all kept history)", Selected: selected == ""}}
	known := selected == ""
	for _, w := range allocationHistoryWindows {
		opts = append(opts, envview.Option{Value: w.Value, Label: w.Label, Selected: w.Value == selected})
		known = known || w.Value == selected
	}
	if !known {
		opts = append(opts, envview.Option{Value: selected, Label: "since " + selected, Selected: true})
	}
	return opts
}

func allocationWindowLabel(v string) string {
	for _, w := range allocationHistoryWindows {
		if w.Value == v {
			return w.Label
		}
	}
	if v == "" {
		return ""
	}
	return "since " + v
}

// allocationPageCursor is where the next page of history starts, as a URL value.
func allocationPageCursor(a *models.Allocation) string {
	return a.StartedAt.UTC().Format(time.RFC3339Nano) + "_" + a.ID.String()
}

func parseAllocationPageCursor(v string) (*models.AllocationCursor, error) {
	if v == "" {
		return nil, nil
	}
	at, id, ok := strings.Cut(v, "_")
	t, terr := time.Parse(time.RFC3339Nano, at)
	u, uerr := uuid.Parse(id)
	if !ok || terr != nil || uerr != nil {
		return nil, apperr.Field("before", "is not a position this page produced")
	}
	return &models.AllocationCursor{StartedAt: t, ID: u}, nil
}

// environmentsPage is /environments: per pool its capacity, utilisation and
// a page of its environments, and the dirty queue across pools.
func (s *environmentsHandlers) environmentsPage(c echo.Context) error {
	ctx := c.Request().Context()
	q := c.QueryParams()
	filter := envview.IndexFilter{Pool: q.Get("pool"), Status: q.Get("status"), Query: strings.TrimSpace(q.Get("q"))}
	page, err := environmentsPageNumber(filter, q.Get("page"))
	if err != nil {
		return err
	}
	list := models.EnvironmentListFilter{Pool: filter.Pool, State: filter.Status, Query: filter.Query, Limit: environmentsPageSize}
	if filter.Pool != "" {
		list.Offset = (page - 1) * environmentsPageSize // one pool pages; all pools show their first page
	}
	now := time.Now()
	idx, err := models.EnvironmentsIndexPage(ctx, s.DB.Bun, models.EnvironmentsIndexQuery{List: list,
		UtilizationSince: now.Truncate(time.Hour).Add(-23 * time.Hour), DirtyReasons: dirtyReasonEvents})
	if err != nil {
		return err
	}
	if filter.Pool != "" && !slices.ContainsFunc(idx.Pools, func(p models.Pool) bool { return p.Name == filter.Pool }) {
		return apperr.Field("pool", fmt.Sprintf("no pool named %q is registered", filter.Pool))
	}
	return s.render(c, http.StatusOK, envview.Index(environmentsIndexView(idx, filter, page, q, now)))
}

// environmentsIndexView lays the index out: the dirty queue, and per pool
// shown its capacity, utilisation and page of environments with links to
// the other pages.
func environmentsIndexView(idx *models.EnvironmentsIndex, filter envview.IndexFilter, page int, q url.Values, now time.Time) envview.IndexView {
	v := envview.IndexView{Filter: filter, Statuses: environmentStatusOptions(filter.Status),
		Filtered: filter != (envview.IndexFilter{}), Example: envview.ExampleConfig}
	for _, p := range idx.Pools {
		v.PoolOptions = append(v.PoolOptions, envview.Option{Value: p.Name, Label: p.Name, Selected: p.Name == filter.Pool})
	}
	for i := range idx.Dirty {
		v.Dirty = append(v.Dirty, dirtyEnvironmentRow(&idx.Dirty[i]))
	}
	offset := 0
	if filter.Pool != "" {
		offset = (page - 1) * environmentsPageSize
	}
	for i := range idx.Pools {
		p := &idx.Pools[i]
		if filter.Pool != "" && p.Name != filter.Pool {
			continue
		}
		section := environmentPoolView(p, idx.States[p.Name], idx.Utilization[p.Name], filter, now)
		rows := idx.Environments[p.Name]
		for j := range rows {
			section.Environments = append(section.Environments, environmentRowView(&rows[j], now))
		}
		if len(rows) > 0 {
			section.Matching = rows[0].Matching
		}
		more := section.Matching > offset+len(rows)
		switch {
		case filter.Pool == "" && more:
			section.MoreURL = section.URL
		case filter.Pool != "":
			if page > 1 {
				prev := ""
				if page > 2 {
					prev = strconv.Itoa(page - 1)
				}
				section.NewerURL = "/environments?" + withParam(q, "page", prev)
			}
			if more {
				section.OlderURL = "/environments?" + withParam(q, "page", strconv.Itoa(page+1))
			}
		}
		v.Pools = append(v.Pools, section)
	}
	return v
}

// environmentsPageNumber checks the index filters and reads its page number.
func environmentsPageNumber(f envview.IndexFilter, page string) (int, error) {
	bad := apperr.Fields{}
	if f.Status != "" && f.Status != models.EnvDeregistered &&
		!slices.ContainsFunc(environmentStates, func(st struct{ State, Label string }) bool { return st.State == f.Status }) {
		bad.Add("status", "must be available, in_use, cleaning, dirty, deregistering or deregistered")
	}
	n := 1
	if page != "" {
		var err error
		if n, err = strconv.Atoi(page); err != nil || n < 1 {
			bad.Add("page", "must be a page number from 1")
		}
	}
	return n, bad.Err()
}

// environmentStatusOptions are the index's status filter choices.
func environmentStatusOptions(selected string) []envview.Option {
	opts := []envview.Option{{Value: "", Label: "registered", Selected: selected == ""}}
	for _, st := range append(environmentStates, struct{ State, Label string }{models.EnvDeregistered, "deregistered"}) {
		opts = append(opts, envview.Option{Value: st.State, Label: st.Label, Selected: st.State == selected})
	}
	return opts
}

func environmentPoolView(p *models.Pool, counts map[string]int, points []models.UtilizationPoint, f envview.IndexFilter, now time.Time) envview.Pool {
	clients := "any client on the allow list may lease"
	if len(p.Clients) > 0 {
		clients = "leased by " + strings.Join(p.Clients, ", ")
	}
	poolQuery := url.Values{"pool": {p.Name}}
	if f.Status != "" {
		poolQuery.Set("status", f.Status)
	}
	if f.Query != "" {
		poolQuery.Set("q", f.Query)
	}
	capacity := environmentCapacityView(counts)
	removed := ""
	if p.RemovedAt != nil {
		removed = fmt.Sprintf("Removed from gantry.yaml at %s UTC: its environments leave as their allocations end; none can be leased.", clock(*p.RemovedAt))
	}
	return envview.Pool{
		Removed: removed,
		Name:    p.Name, Kind: p.Kind, Clients: clients,
		Settings: fmt.Sprintf("session %s, at most %s · cleanup timeout %s",
			shortDuration(p.Session()), shortDuration(p.MaxSession()), shortDuration(p.CleanupTimeout())),
		URL:         "/environments?" + poolQuery.Encode(),
		HistoryURL:  "/environments/allocations?" + url.Values{"pool": {p.Name}}.Encode(),
		Capacity:    capacity,
		Utilization: poolUtilizationSparkline(points, capacity.Total, now),
	}
}

// environmentCapacityView lays a pool's counts of registered environments
// by state out as a bar 1000 units wide.
func environmentCapacityView(counts map[string]int) envview.Capacity {
	var c envview.Capacity
	for _, st := range environmentStates {
		c.Total += counts[st.State]
	}
	done := 0
	var parts []string
	for _, st := range environmentStates {
		seg := envview.Segment{State: st.State, Label: st.Label, Count: counts[st.State]}
		if c.Total > 0 && seg.Count > 0 {
			x := done * 1000 / c.Total
			done += seg.Count
			seg.X, seg.Width = strconv.Itoa(x), strconv.Itoa(done*1000/c.Total-x)
			c.Bars = append(c.Bars, seg)
			parts = append(parts, fmt.Sprintf("%d %s", seg.Count, st.Label))
		}
		c.Segments = append(c.Segments, seg)
	}
	switch c.Total {
	case 0:
		c.Summary = "no environments"
	case 1:
		c.Summary = "1 environment: " + strings.Join(parts, ", ")
	default:
		c.Summary = fmt.Sprintf("%d environments: %s", c.Total, strings.Join(parts, ", "))
	}
	return c
}

// poolUtilizationSparkline draws hourly utilisation as SVG points, scaled
// to the pool's size (or the busiest hour, when more allocations than
// environments came and went within one hour).
func poolUtilizationSparkline(points []models.UtilizationPoint, total int, now time.Time) envview.Sparkline {
	const w, h, pad = 240, 48, 4
	sp := envview.Sparkline{Width: w, Height: h, Until: "now"}
	peak := 0
	for _, p := range points {
		peak = max(peak, p.InUse)
	}
	scale := float64(max(total, peak, 1))
	n := len(points)
	var line []string
	for i, p := range points {
		x := float64(w) / 2
		if n > 1 {
			x = pad + float64(i)*float64(w-2*pad)/float64(n-1)
		}
		y := float64(h-pad) - float64(p.InUse)/scale*float64(h-2*pad)
		xs, ys := strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64), strconv.FormatFloat(math.Round(y*10)/10, 'f', -1, 64)
		line = append(line, xs+","+ys)
		hour := p.Bucket.UTC()
		sp.Points = append(sp.Points, envview.SparkPoint{X: xs, Y: ys,
			Title: fmt.Sprintf("%s–%s UTC: %d held", hour.Format("15:04"), hour.Add(time.Hour).Format("15:04"), p.InUse)})
	}
	if n > 0 {
		sp.From = points[0].Bucket.UTC().Format("15:04") + " UTC"
		first, last := strings.Split(line[0], ","), strings.Split(line[n-1], ",")
		sp.Line = strings.Join(line, " ")
		sp.Area = fmt.Sprintf("%s,%d %s %s,%d", first[0], h-1, sp.Line, last[0], h-1)
	}
	switch {
	case peak == 0:
		sp.Label = "Not leased in the last 24 hours"
	default:
		sp.Label = fmt.Sprintf("Last 24 hours: at most %d of %d held in one hour", peak, total)
	}
	return sp
}

func environmentRowView(e *models.EnvironmentListing, now time.Time) envview.EnvRow {
	row := envview.EnvRow{
		ID: e.ID, URL: environmentURL(e.ID), Name: e.Name(), Key: e.Key, Capabilities: environmentCapabilities(e.Capabilities),
		Status: environmentStatusLabel(e.Status), Tone: environmentStatusTone(e.Status), Deregistering: e.Deregistering(),
	}
	if e.LastReleasedAt != nil {
		row.LastReleased = clock(*e.LastReleasedAt)
	}
	if e.HeldUntil != nil {
		row.Requester, row.RequesterURL = e.HeldBy, allocationRequesterURL(e.HeldBy)
		row.Expires, row.ExpiresISO, row.ExpiresIn = clock(*e.HeldUntil), iso(*e.HeldUntil), untilText(*e.HeldUntil, now)
	}
	return row
}

func environmentCapabilities(m map[string]string) []envview.Capability {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]envview.Capability, len(keys))
	for i, k := range keys {
		out[i] = envview.Capability{Key: k, Value: m[k]}
	}
	return out
}

// dirtyEnvironmentRow describes a dirty environment with why it is dirty,
// from its log.
func dirtyEnvironmentRow(e *models.DirtyEnvironment) envview.DirtyRow {
	row := envview.DirtyRow{ID: e.ID, URL: environmentURL(e.ID), Name: e.Name(), Pool: e.Pool,
		OutputTail: lastLines(e.CleanupOutput, dirtyTailLines),
		RetryURL:   environmentURL(e.ID) + "/retry-cleanup", MarkCleanURL: environmentURL(e.ID) + "/mark-clean"}
	since := e.UpdatedAt
	if e.CleanupFinishedAt != nil {
		since = *e.CleanupFinishedAt
	}
	row.Since, row.SinceISO = clock(since), iso(since)
	switch {
	case e.ReasonEvent == pools.EventCleanupTimedOut:
		row.Reason = "cleanup did not finish within the pool's cleanup timeout"
	case e.ReasonEvent == pools.EventCleanupFailed && e.ReasonError != "":
		row.Reason = "cleanup failed: " + e.ReasonError
	default:
		row.Reason = "cleanup failed"
	}
	return row
}

// environmentPage is one environment: what it is, who holds it, its cleanup
// output (refreshing while it cleans), its history and its log.
func (s *environmentsHandlers) environmentPage(c echo.Context) error {
	ctx := c.Request().Context()
	env, err := s.environmentParam(c)
	if err != nil {
		return err
	}
	now := time.Now()
	sinceText := c.QueryParam("since")
	since, err := allocationHistorySince(sinceText, now)
	if err != nil {
		return apperr.Field("since", err.Error())
	}
	cursor, err := parseAllocationPageCursor(c.QueryParam("before"))
	if err != nil {
		return err
	}
	var lease *models.Allocation
	if a, err := models.ActiveAllocationOf(ctx, s.DB.Bun, env.ID); err == nil {
		lease = a
	} else if !errors.Is(err, models.ErrNotFound) {
		return err
	}
	history, err := models.ListAllocationHistory(ctx, s.DB.Bun, models.AllocationFilter{EnvironmentID: env.ID, Since: since, Limit: environmentHistorySize + 1}, cursor)
	if err != nil {
		return err
	}
	entries, err := models.ListLog(ctx, s.DB.Bun, models.LogFilter{Target: pools.Target(env), Limit: environmentLogSize})
	if err != nil {
		return err
	}

	self := environmentURL(env.ID)
	v := envview.EnvironmentView{
		ID: env.ID, Name: env.Name(), Key: env.Key, Pool: env.Pool,
		PoolURL: "/environments?" + url.Values{"pool": {env.Pool}}.Encode(),
		Status:  environmentStatusLabel(env.Status), Tone: environmentStatusTone(env.Status),
		Fields: environmentFields(env), Capabilities: environmentCapabilities(env.Capabilities),
		Deregistering: env.Deregistering(), Dirty: env.Status == models.EnvDirty,
		RetryURL: self + "/retry-cleanup", MarkCleanURL: self + "/mark-clean",
		Cleanup:    environmentCleanupView(env, now),
		Windows:    allocationWindowOptions(sinceText),
		HistoryURL: "/environments/allocations?" + url.Values{"environment": {strconv.FormatInt(env.ID, 10)}}.Encode(),
		Log:        logRows(entries),
		LogURL:     "/log?" + url.Values{"target": {pools.Target(env)}}.Encode(),
	}
	if lease != nil {
		v.Lease = &envview.Lease{ID: lease.ID.String(), Requester: lease.Requester, RequesterURL: allocationRequesterURL(lease.Requester),
			Client: lease.Client, Started: clock(lease.StartedAt), Expires: clock(lease.ExpiresAt), ExpiresIn: untilText(lease.ExpiresAt, now)}
	}
	if len(history) > environmentHistorySize {
		history = history[:environmentHistorySize]
		v.OlderURL = self + "?" + withParam(c.QueryParams(), "before", allocationPageCursor(&history[len(history)-1]))
	}
	if cursor != nil {
		v.NewerURL = self + "?" + withParam(c.QueryParams(), "before", "")
	}
	v.History = allocationRows(history, now)
	return s.render(c, http.StatusOK, envview.Environment(v))
}

func environmentFields(env *models.Environment) []envview.Field {
	var out []envview.Field
	add := func(label, value string, mono bool, testID string) {
		if value != "" {
			out = append(out, envview.Field{Label: label, Value: value, Mono: mono, TestID: testID})
		}
	}
	add("Pool", env.Pool, false, "field-pool")
	add("Kind", env.Kind, false, "field-kind")
	add("Account", env.Account, true, "field-account")
	add("Region", env.Region, true, "field-region")
	add("Admin role", env.AdminRole, true, "field-admin-role")
	add("Database", env.Database, true, "field-database")
	add("Registered", clock(env.CreatedAt), false, "field-registered")
	if env.LastReleasedAt != nil {
		add("Last released", clock(*env.LastReleasedAt), false, "field-last-released")
	}
	if env.DeregisterRequestedAt != nil {
		note := clock(*env.DeregisterRequestedAt)
		if env.Deregistering() {
			note += " (removed from gantry.yaml; it leaves once its allocation ends and it is clean)"
		}
		add("Deregistration requested", note, false, "field-deregister-requested")
	}
	if env.DeregisteredAt != nil {
		add("Deregistration completed", clock(*env.DeregisteredAt), false, "field-deregistered")
	}
	return out
}

func environmentCleanupView(env *models.Environment, now time.Time) envview.Cleanup {
	c := envview.Cleanup{Output: env.CleanupOutput, Running: env.Status == models.EnvCleaning}
	if len(c.Output) > maxCleanupOutputShown {
		cut := c.Output[len(c.Output)-maxCleanupOutputShown:]
		if i := strings.IndexByte(cut, '\n'); i >= 0 {
			cut = cut[i+1:]
		}
		c.Output, c.Truncated = cut, true
	}
	if env.CleanupStartedAt != nil {
		c.Times = "Started " + clock(*env.CleanupStartedAt)
		switch {
		case env.CleanupFinishedAt != nil:
			c.Times += " · finished " + clock(*env.CleanupFinishedAt) + " after " + shortDuration(env.CleanupFinishedAt.Sub(*env.CleanupStartedAt))
		case c.Running:
			c.Times += " · running for " + shortDuration(now.Sub(*env.CleanupStartedAt))
		}
	}
	return c
}

// allocationHistoryPage is /environments/allocations: the history filtered
// by pool, environment, requester and time window.
func (s *environmentsHandlers) allocationHistoryPage(c echo.Context) error {
	ctx := c.Request().Context()
	q := c.QueryParams()
	now := time.Now()
	form := envview.HistoryFilter{Pool: q.Get("pool"), Requester: strings.TrimSpace(q.Get("requester")), Environment: q.Get("environment"), Since: q.Get("since")}
	f := models.AllocationFilter{Pool: form.Pool, Requester: form.Requester, Limit: allocationHistoryPageSize + 1}
	bad := apperr.Fields{}
	if form.Environment != "" {
		id, err := strconv.ParseInt(form.Environment, 10, 64)
		if err != nil || id <= 0 {
			bad.Add("environment", "must be an environment id")
		}
		f.EnvironmentID = id
	}
	var err error
	if f.Since, err = allocationHistorySince(form.Since, now); err != nil {
		bad.Add("since", err.Error())
	}
	cursor, err := parseAllocationPageCursor(q.Get("before"))
	if err != nil {
		return err
	}
	if err := bad.Err(); err != nil {
		return err
	}
	allocs, err := models.ListAllocationHistory(ctx, s.DB.Bun, f, cursor)
	if err != nil {
		return err
	}
	envs, err := models.ListEnvironmentChoices(ctx, s.DB.Bun)
	if err != nil {
		return err
	}
	poolNames, err := models.ListHistoryPools(ctx, s.DB.Bun)
	if err != nil {
		return err
	}
	requesters, err := models.RecentRequesters(ctx, s.DB.Bun, 200)
	if err != nil {
		return err
	}

	v := envview.HistoryView{Filter: form, Windows: allocationWindowOptions(form.Since), Requesters: requesters,
		Filtered: form != (envview.HistoryFilter{}), Retention: longDuration(s.Config.Retention)}
	var envName string
	for _, e := range envs {
		label := e.Name + " (" + e.Pool + ")"
		if e.Deregistered {
			label += ", deregistered"
		}
		id := strconv.FormatInt(e.ID, 10)
		v.Environments = append(v.Environments, envview.Option{Value: id, Label: label, Selected: id == form.Environment})
		if id == form.Environment {
			envName = e.Name
		}
	}
	for _, p := range poolNames {
		v.Pools = append(v.Pools, envview.Option{Value: p, Label: p, Selected: p == form.Pool})
	}
	if len(allocs) > allocationHistoryPageSize {
		allocs = allocs[:allocationHistoryPageSize]
		v.OlderURL = "/environments/allocations?" + withParam(q, "before", allocationPageCursor(&allocs[len(allocs)-1]))
	}
	if cursor != nil {
		v.NewerURL = "/environments/allocations?" + withParam(q, "before", "")
	}
	v.Rows = allocationRows(allocs, now)
	v.Summary = allocationHistorySummary(form, envName, len(v.Rows), cursor != nil || v.OlderURL != "")
	return s.render(c, http.StatusOK, envview.History(v))
}

// allocationHistorySummary says in words which question the rows answer.
func allocationHistorySummary(f envview.HistoryFilter, envName string, n int, paged bool) string {
	var what []string
	if f.Environment != "" {
		if envName == "" {
			envName = "environment " + f.Environment
		}
		what = append(what, "of "+envName)
	}
	if f.Requester != "" {
		what = append(what, "by requester "+f.Requester)
	}
	if f.Pool != "" {
		what = append(what, "in pool "+f.Pool)
	}
	if f.Since != "" {
		what = append(what, "started "+allocationWindowLabel(f.Since))
	}
	count := fmt.Sprintf("%d allocations", n)
	if n == 1 {
		count = "1 allocation"
	}
	if paged {
		count += " on this page"
	}
	if len(what) == 0 {
		return count + ", newest first."
	}
	return count + " " + strings.Join(what, ", ") + ", newest first."
}

func allocationRows(allocs []models.Allocation, now time.Time) []envview.AllocRow {
	rows := make([]envview.AllocRow, len(allocs))
	for i := range allocs {
		a := &allocs[i]
		r := envview.AllocRow{
			ID: a.ID.String(), Pool: a.Pool, Requester: a.Requester, RequesterURL: allocationRequesterURL(a.Requester), Client: a.Client,
			Started: clock(a.StartedAt), StartedISO: a.StartedAt.UTC().Format(time.RFC3339), Active: a.Active(),
			EnvironmentURL: environmentURL(a.EnvironmentID), Environment: "environment " + strconv.FormatInt(a.EnvironmentID, 10),
		}
		if a.Environment != nil {
			r.Environment = a.Environment.Name()
		}
		end := now
		if a.EndedAt != nil {
			end = *a.EndedAt
			r.Ended, r.EndedISO = clock(*a.EndedAt), a.EndedAt.UTC().Format(time.RFC3339)
		}
		r.Duration = shortDuration(end.Sub(a.StartedAt))
		if a.EndedBy != nil {
			r.EndedBy = *a.EndedBy
		}
		r.Outcome, r.OutcomeTone = truncate(a.Outcome, 40), allocationOutcomeTone(a.Outcome, r.EndedBy)
		rows[i] = r
	}
	return rows
}

func allocationOutcomeTone(outcome, endedBy string) string {
	o := strings.ToLower(outcome)
	switch {
	case strings.Contains(o, "fail"), strings.Contains(o, "error"):
		return "bad"
	case endedBy == models.EndedByTimeout, strings.Contains(o, "timeout"), strings.Contains(o, "cancel"):
		return "warn"
	case strings.Contains(o, "success"), strings.Contains(o, "pass"), o == "ok":
		return "ok"
	}
	return "muted"
}

// retryCleanupForm is the operator's "clean this dirty environment again".
func (s *environmentsHandlers) retryCleanupForm(c echo.Context) error {
	env, err := s.environmentParam(c)
	if err != nil {
		return err
	}
	to := environmentActionReturn(c, env)
	err = s.Pools.RetryCleanup(c.Request().Context(), env.ID, principalOf(c).Actor())
	if msg, ok := conflictMessage(err); ok {
		return s.redirectWithFlash(c, to, false, msg)
	}
	if err != nil {
		return err
	}
	return s.redirectWithFlash(c, to, true, fmt.Sprintf("Cleaning %s again; its page shows the output as it runs.", env.Name()))
}

// markCleanForm is the operator's "this dirty environment is fine as it is".
func (s *environmentsHandlers) markCleanForm(c echo.Context) error {
	ctx := c.Request().Context()
	env, err := s.environmentParam(c)
	if err != nil {
		return err
	}
	to := environmentActionReturn(c, env)
	after, err := s.Pools.MarkClean(ctx, env.ID, principalOf(c).Actor())
	if msg, ok := conflictMessage(err); ok {
		return s.redirectWithFlash(c, to, false, msg)
	}
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("Marked %s clean: it can be leased again.", env.Name())
	if after.Status == models.EnvDeregistered {
		msg = fmt.Sprintf("Marked %s clean: it was removed from gantry.yaml, so it is now deregistered.", env.Name())
	}
	return s.redirectWithFlash(c, to, true, msg)
}

// environmentActionReturn is where an operator action goes back to: the index when it
// was done from the dirty queue there, the environment's page otherwise.
func environmentActionReturn(c echo.Context, env *models.Environment) string {
	if c.FormValue("next") == "/environments" {
		return "/environments"
	}
	return environmentURL(env.ID)
}

func (s *environmentsHandlers) environmentParam(c echo.Context) (*models.Environment, error) {
	id, err := pathID(c, "environment")
	if err != nil {
		return nil, err
	}
	env, err := models.EnvironmentByID(c.Request().Context(), s.DB.Bun, id)
	if errors.Is(err, models.ErrNotFound) {
		return nil, apperr.New(apperr.NotFound, "No environment with id %d.", id)
	}
	return env, err
}

func environmentURL(id int64) string { return "/environments/" + strconv.FormatInt(id, 10) }

func allocationRequesterURL(requester string) string {
	return "/environments/allocations?" + url.Values{"requester": {requester}}.Encode()
}
