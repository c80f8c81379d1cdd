package web

import (
	"time"

	"github.com/gantryhq/gantry/models"
)

// The deployment log's JSON (/api/v1/log and its questions), declared for
// the API and mapped from the rows.

// logEntryJSON is one entry of the log.
type logEntryJSON struct {
	ID           int64          `json:"id"`
	DeploymentID string         `json:"deployment_id"`
	TargetID     string         `json:"target_id"`
	Revision     string         `json:"revision"`
	Event        string         `json:"event"`
	Actor        string         `json:"actor"`
	Detail       map[string]any `json:"detail"`
	CreatedAt    time.Time      `json:"created_at"`
}

func logEntryJSONOf(e *models.LogEntry) logEntryJSON {
	return logEntryJSON{ID: e.ID, DeploymentID: e.DeploymentID, TargetID: e.TargetID, Revision: e.Revision, Event: e.Event,
		Actor: e.Actor, Detail: e.Detail, CreatedAt: e.CreatedAt}
}

// logEntriesJSONOf maps a list; an empty one is [] rather than null.
func logEntriesJSONOf(entries []models.LogEntry) []logEntryJSON {
	out := make([]logEntryJSON, len(entries))
	for i := range entries {
		out[i] = logEntryJSONOf(&entries[i])
	}
	return out
}

// logPageJSON is one page of the API timeline.
type logPageJSON struct {
	Entries []logEntryJSON `json:"entries"`
	Next    string         `json:"next,omitempty"` // URL of the next (older) page
}

// newLogEntryRequest is what a CI job sends to record something that
// happened outside Gantry (a build registered, a test suite passed).
type newLogEntryRequest struct {
	DeploymentID string         `json:"deployment_id"`
	TargetID     string         `json:"target_id"`
	Revision     string         `json:"revision"`
	Event        string         `json:"event"`
	Detail       map[string]any `json:"detail"`
}
