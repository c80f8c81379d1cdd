package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// The pipelines area's API: register the revisions CI builds and their
// artifacts, and read where revisions stand. Registering is idempotent on
// the server (the same revision or artifact again changes nothing), so it
// is retried like a read.

// PipelineSummary is a pipeline of the list.
type PipelineSummary struct {
	Name           string `json:"name"`
	Stages         int    `json:"stages"`
	Hosts          int    `json:"hosts"`
	InFlight       int    `json:"in_flight"`
	Blocked        int    `json:"blocked"`
	LatestFinished string `json:"latest_finished,omitempty"`
}

// PipelineRevision is a revision registered for a pipeline.
type PipelineRevision struct {
	Pipeline     string     `json:"pipeline"`
	Revision     string     `json:"revision"`
	Status       string     `json:"status"` // in_flight or finished
	RegisteredBy string     `json:"registered_by"`
	CreatedAt    time.Time  `json:"created_at"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
}

// PipelineArtifact is a revision's artifact for one architecture.
type PipelineArtifact struct {
	Arch         string    `json:"arch"`
	Location     string    `json:"location"`
	RegisteredBy string    `json:"registered_by"`
	CreatedAt    time.Time `json:"created_at"`
}

// PipelineStage is a stage with the revisions working in it.
type PipelineStage struct {
	Name       string   `json:"name"`
	After      []string `json:"after"`
	Kind       string   `json:"kind"`
	HostGroups []struct {
		Name  string         `json:"name"`
		Hosts []string       `json:"hosts"`
		Done  map[string]int `json:"hosts_done"`
	} `json:"host_groups"`
	Revisions []struct {
		Revision string `json:"revision"`
		State    string `json:"state"`
		Why      string `json:"why"`
	} `json:"revisions"`
	Finished []string `json:"finished"`
}

// Pipeline is a pipeline's picture.
type Pipeline struct {
	Name     string             `json:"name"`
	InFlight []PipelineRevision `json:"in_flight"`
	Stages   []PipelineStage    `json:"stages"`
}

// PipelineStep is one step of a revision with where it stands and why.
type PipelineStep struct {
	Event      string     `json:"event"`
	Target     string     `json:"target"`
	Kind       string     `json:"kind"`
	State      string     `json:"state"`
	Why        string     `json:"why"`
	Attempt    int        `json:"attempt,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// PipelineRevisionDetail is a revision with its artifacts and steps.
type PipelineRevisionDetail struct {
	PipelineRevision
	Artifacts []PipelineArtifact `json:"artifacts"`
	Steps     []PipelineStep     `json:"steps"`
	Blocked   *PipelineStep      `json:"blocked"`
}

// Pipelines lists the pipelines.
func (c *Client) Pipelines(ctx context.Context) ([]PipelineSummary, error) {
	var out struct {
		Pipelines []PipelineSummary `json:"pipelines"`
	}
	err := c.retryIdempotent(ctx, func() error { return c.call(ctx, http.MethodGet, "/pipelines", nil, &out) })
	if err != nil {
		return nil, fmt.Errorf("listing pipelines: %w", err)
	}
	return out.Pipelines, nil
}

// Pipeline is a pipeline's picture: its stages and where each revision in
// flight stands.
func (c *Client) Pipeline(ctx context.Context, name string) (*Pipeline, error) {
	var out Pipeline
	err := c.retryIdempotent(ctx, func() error { return c.call(ctx, http.MethodGet, "/pipelines/"+url.PathEscape(name), nil, &out) })
	if err != nil {
		return nil, fmt.Errorf("getting pipeline %s: %w", name, err)
	}
	return &out, nil
}

// RegisterRevision registers revision rev of pipeline; created is false
// when it was registered already.
func (c *Client) RegisterRevision(ctx context.Context, pipeline, rev string) (r *PipelineRevision, created bool, err error) {
	var out PipelineRevision
	err = c.retryIdempotent(ctx, func() error {
		created = false
		return c.callStatus(ctx, http.MethodPost, "/pipelines/"+url.PathEscape(pipeline)+"/revisions",
			map[string]string{"revision": rev}, &out, func(status int) { created = status == http.StatusCreated })
	})
	if err != nil {
		return nil, false, fmt.Errorf("registering revision %s of %s: %w", rev, pipeline, err)
	}
	return &out, created, nil
}

// RegisterArtifact registers revision rev's artifact for arch at location.
func (c *Client) RegisterArtifact(ctx context.Context, pipeline, rev, arch, location string) (a *PipelineArtifact, created bool, err error) {
	var out PipelineArtifact
	err = c.retryIdempotent(ctx, func() error {
		created = false
		return c.callStatus(ctx, http.MethodPost, "/pipelines/"+url.PathEscape(pipeline)+"/revisions/"+url.PathEscape(rev)+"/artifacts",
			map[string]string{"arch": arch, "location": location}, &out, func(status int) { created = status == http.StatusCreated })
	})
	if err != nil {
		return nil, false, fmt.Errorf("registering the %s artifact of %s %s: %w", arch, pipeline, rev, err)
	}
	return &out, created, nil
}

// PipelineRevision is one revision with its steps.
func (c *Client) PipelineRevision(ctx context.Context, pipeline, rev string) (*PipelineRevisionDetail, error) {
	var out PipelineRevisionDetail
	err := c.retryIdempotent(ctx, func() error {
		return c.call(ctx, http.MethodGet, "/pipelines/"+url.PathEscape(pipeline)+"/revisions/"+url.PathEscape(rev), nil, &out)
	})
	if err != nil {
		return nil, fmt.Errorf("getting revision %s of %s: %w", rev, pipeline, err)
	}
	return &out, nil
}
