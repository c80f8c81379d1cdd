package models

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// LogEntry is one line of the deployment log (seed 004): for deployment
// DeploymentID, Event happened to TargetID at revision Revision, by Actor.
// Entries are never changed or removed; the database refuses it.
type LogEntry struct {
	bun.BaseModel `bun:"table:deployment_log,alias:e"`

	ID           int64          `bun:",pk,autoincrement"`
	DeploymentID string         `bun:",notnull"`
	TargetID     string         `bun:",notnull"`
	Revision     string         `bun:",notnull"`
	Event        string         `bun:",notnull"`
	Actor        string         `bun:",notnull"`
	Detail       map[string]any `bun:",type:jsonb,notnull"`
	CreatedAt    time.Time      `bun:",nullzero,notnull,default:current_timestamp"`
}

// AppendLog writes e inside the caller's transaction (or on its own when db
// is the database), filling in its id and time.
func AppendLog(ctx context.Context, db bun.IDB, e *LogEntry) error {
	if e.TargetID == "" || e.Event == "" || e.Actor == "" {
		return fmt.Errorf("log entry needs a target, an event and an actor (got %q, %q, %q)", e.TargetID, e.Event, e.Actor)
	}
	if e.Detail == nil {
		e.Detail = map[string]any{}
	}
	if _, err := db.NewInsert().Model(e).Returning("id, created_at").Exec(ctx); err != nil {
		return fmt.Errorf("appending %s to the deployment log: %w", e.Event, err)
	}
	return nil
}

// Granularity names the events that open and close a unit of work at one
// level (pipeline, stage, host group, host, execution, …). The queries below
// work at any level because each only looks for its own markers.
type Granularity struct {
	Started   string
	Succeeded string
	Failed    string
}

// LatestRevision is the revision that most recently reached event for target.
// "Latest" is by when the event was logged: revisions are opaque strings
// (git SHAs, build numbers) with no order of their own.
func LatestRevision(ctx context.Context, db bun.IDB, target, event string) (*LogEntry, error) {
	e := new(LogEntry)
	err := db.NewSelect().Model(e).
		Where("target_id = ?", target).Where("event = ?", event).
		OrderExpr("id DESC").Limit(1).Scan(ctx)
	if err != nil {
		return nil, notFound(err)
	}
	return e, nil
}

// LatestSucceeded is the latest revision that finished successfully at g's level.
func LatestSucceeded(ctx context.Context, db bun.IDB, target string, g Granularity) (*LogEntry, error) {
	return LatestRevision(ctx, db, target, g.Succeeded)
}

// LatestFailed is the latest revision that failed at g's level.
func LatestFailed(ctx context.Context, db bun.IDB, target string, g Granularity) (*LogEntry, error) {
	return LatestRevision(ctx, db, target, g.Failed)
}

// InProgress lists the start entries of revisions of target that started at
// g's level and have neither succeeded nor failed since, oldest first.
func InProgress(ctx context.Context, db bun.IDB, target string, g Granularity) ([]LogEntry, error) {
	var entries []LogEntry
	finished := db.NewSelect().Model((*LogEntry)(nil)).ModelTableExpr("deployment_log AS f").
		ColumnExpr("1").
		Where("f.target_id = e.target_id").
		Where("f.revision = e.revision").
		Where("f.event IN (?, ?)", g.Succeeded, g.Failed).
		Where("f.id > e.id")
	err := db.NewSelect().Model(&entries).
		DistinctOn("e.revision").
		Where("e.target_id = ?", target).Where("e.event = ?", g.Started).
		Where("NOT EXISTS (?)", finished).
		OrderExpr("e.revision, e.id DESC").Scan(ctx)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b LogEntry) int { return cmp.Compare(a.ID, b.ID) })
	return entries, nil
}

// LogFilter selects a slice of the timeline. Zero fields do not filter;
// Target, Revision and Deployment match exactly.
type LogFilter struct {
	Target     string
	Event      string // any part of the event name: "execution" finds execution-started, …
	Revision   string
	Actor      string // see actorMatches
	Deployment string
	Since      time.Time
	Until      time.Time
	BeforeID   int64 // page backwards: entries older than this id
	AfterID    int64 // tail forwards: entries newer than this id
	Limit      int
}

// MaxLogPage bounds one page of the timeline.
const MaxLogPage = 500

// ListLog returns entries matching f, newest first unless AfterID is set (a
// live tail reads oldest first so it can append in order).
func ListLog(ctx context.Context, db bun.IDB, f LogFilter) ([]LogEntry, error) {
	limit := f.Limit
	if limit <= 0 || limit > MaxLogPage {
		limit = 50
	}
	var entries []LogEntry
	q := db.NewSelect().Model(&entries).Limit(int64(limit))
	if f.Target != "" {
		q = q.Where("target_id = ?", f.Target)
	}
	if f.Event != "" {
		q = q.Where("strpos(lower(event), ?) > 0", strings.ToLower(strings.TrimSpace(f.Event)))
	}
	if f.Revision != "" {
		q = q.Where("revision = ?", f.Revision)
	}
	if f.Actor != "" {
		q = q.WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery { return actorMatches(q, f.Actor) })
	}
	if f.Deployment != "" {
		q = q.Where("deployment_id = ?", f.Deployment)
	}
	if !f.Since.IsZero() {
		q = q.Where("created_at >= ?", f.Since)
	}
	if !f.Until.IsZero() {
		q = q.Where("created_at < ?", f.Until)
	}
	if f.BeforeID > 0 {
		q = q.Where("id < ?", f.BeforeID)
	}
	if f.AfterID > 0 {
		q = q.Where("id > ?", f.AfterID).OrderExpr("id ASC")
	} else {
		q = q.OrderExpr("id DESC")
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("listing deployment log: %w", err)
	}
	return entries, nil
}

// actorMatches finds a person's entries whichever way they were written:
// signed in as user:<email>, voting as the bare <email>, through one of
// their tokens as token:<id>:<email>. So "ada@example.com" and
// "user:ada@example.com" find the same entries. Any other actor (gantry,
// cli:root, token:2:ci@example.com) matches exactly. actorMatchesEntry is
// the same test in memory.
func actorMatches(q *bun.SelectQuery, actor string) *bun.SelectQuery {
	actor = strings.TrimSpace(actor)
	email := strings.TrimPrefix(actor, "user:")
	if !strings.Contains(email, "@") || strings.Contains(email, ":") {
		return q.Where("actor = ?", actor)
	}
	return q.Where("actor = ?", email).WhereOr("actor = ?", "user:"+email).
		WhereOr("starts_with(actor, 'token:') AND split_part(actor, ':', 3) = ?", email)
}

// Matches reports whether ListLog with f would select e, leaving Limit
// aside: the same test in memory, for the live log, which reads new entries
// once per process and filters them for each open stream (web/loghub.go).
// Keep it next to ListLog and actorMatches and change them together;
// TestLogFilterMatchesAgreesWithListLog checks that they agree.
func (f LogFilter) Matches(e *LogEntry) bool {
	switch {
	case f.Target != "" && e.TargetID != f.Target,
		f.Revision != "" && e.Revision != f.Revision,
		f.Deployment != "" && e.DeploymentID != f.Deployment,
		f.Event != "" && !strings.Contains(strings.ToLower(e.Event), strings.ToLower(strings.TrimSpace(f.Event))),
		f.Actor != "" && !actorMatchesEntry(f.Actor, e.Actor),
		// PostgreSQL keeps microseconds; Bun writes the bound with at most that.
		!f.Since.IsZero() && e.CreatedAt.Before(f.Since.Truncate(time.Microsecond)),
		!f.Until.IsZero() && !e.CreatedAt.Before(f.Until.Truncate(time.Microsecond)),
		f.BeforeID > 0 && e.ID >= f.BeforeID,
		f.AfterID > 0 && e.ID <= f.AfterID:
		return false
	}
	return true
}

// actorMatchesEntry is actorMatches in memory.
func actorMatchesEntry(actor, entryActor string) bool {
	actor = strings.TrimSpace(actor)
	email := strings.TrimPrefix(actor, "user:")
	if !strings.Contains(email, "@") || strings.Contains(email, ":") {
		return entryActor == actor
	}
	if entryActor == email || entryActor == "user:"+email {
		return true
	}
	parts := strings.Split(entryActor, ":") // split_part(actor, ':', 3)
	return strings.HasPrefix(entryActor, "token:") && len(parts) >= 3 && parts[2] == email
}

// LastLogID is the newest entry's id, where a live tail starts.
func LastLogID(ctx context.Context, db bun.IDB) (int64, error) {
	var id int64
	err := db.NewSelect().Model((*LogEntry)(nil)).ColumnExpr("coalesce(max(id), 0)").Scan(ctx, &id)
	return id, err
}

// LogEvents lists the distinct event names, for the filter's suggestions.
func LogEvents(ctx context.Context, db bun.IDB) ([]string, error) {
	var events []string
	err := db.NewSelect().Model((*LogEntry)(nil)).DistinctOn("event").Column("event").
		OrderExpr("event").Limit(200).Scan(ctx, &events)
	return events, err
}
