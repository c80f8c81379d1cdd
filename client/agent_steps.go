package client

import (
	"context"
	"net/http"
	"net/url"
)

// AgentStep is a pipeline host step an agent runs once, to its end
// (runs_on: agent): Command with Env, stopped after TimeoutSeconds.
type AgentStep struct {
	ID             string            `json:"id"`
	Event          string            `json:"event"`
	Target         string            `json:"target"`
	Host           string            `json:"host"`
	Attempt        int               `json:"attempt"`
	Command        []string          `json:"command"`
	Env            map[string]string `json:"env"`
	TimeoutSeconds int               `json:"timeout_seconds"`
}

// AgentStepReport is how a step's command ended.
type AgentStepReport struct {
	ExitCode *int   `json:"exit_code,omitempty"`
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	Reason   string `json:"reason,omitempty"` // why it could not start
	Output   string `json:"output"`           // the tail of its output
}

// ReportStep tells the server how a step the instance ran ended; saying
// it twice is harmless, so it is retried.
func (c *Client) ReportStep(ctx context.Context, instanceID, stepID string, r AgentStepReport) error {
	path := "/daemons/agents/" + url.PathEscape(instanceID) + "/steps/" + url.PathEscape(stepID)
	return c.retryIdempotent(ctx, func() error { return c.call(ctx, http.MethodPost, path, r, nil) })
}
