package web

import (
	"time"

	"github.com/gantryhq/gantry/internal/pipelines"
	"github.com/gantryhq/gantry/models"
)

// The JSON of the pipelines area, in one place: what its API answers and
// accepts (docs/api.md documents them; cmd/gantry/pipelines.go reads them).

type registerRevisionRequest struct {
	Revision string `json:"revision"`
}

type registerArtifactRequest struct {
	Arch     string `json:"arch"`
	Location string `json:"location"`
}

// stepRequest names a step of a revision: its event on its target.
type stepRequest struct {
	Event  string `json:"event"`
	Target string `json:"target"`
}

// pipelineJSON is a pipeline of GET /api/v1/pipelines.
type pipelineJSON struct {
	Name           string `json:"name"`
	Stages         int    `json:"stages"`
	Hosts          int    `json:"hosts"`
	InFlight       int    `json:"in_flight"`
	Blocked        int    `json:"blocked"`
	LatestFinished string `json:"latest_finished,omitempty"`
}

func pipelineJSONOf(p pipelines.Overview) pipelineJSON {
	return pipelineJSON{Name: p.Name, Stages: p.Stages, Hosts: p.Hosts, InFlight: p.InFlight, Blocked: p.Failed, LatestFinished: p.LatestDone}
}

// pipelineRevisionJSON is a revision.
type pipelineRevisionJSON struct {
	Pipeline     string     `json:"pipeline"`
	Revision     string     `json:"revision"`
	Status       string     `json:"status"`
	RegisteredBy string     `json:"registered_by"`
	CreatedAt    time.Time  `json:"created_at"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
}

func pipelineRevisionJSONOf(r *models.PipelineRevision) pipelineRevisionJSON {
	return pipelineRevisionJSON{Pipeline: r.Pipeline, Revision: r.Revision, Status: r.Status, RegisteredBy: r.RegisteredBy,
		CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt}
}

// pipelineArtifactJSON is a revision's artifact for one architecture.
type pipelineArtifactJSON struct {
	Arch         string    `json:"arch"`
	Location     string    `json:"location"`
	RegisteredBy string    `json:"registered_by"`
	CreatedAt    time.Time `json:"created_at"`
}

// pipelineStageJSON is a stage of GET /api/v1/pipelines/:name, with the
// revisions in it and what each does there.
type pipelineStageJSON struct {
	Name       string                   `json:"name"`
	After      []string                 `json:"after"`
	Kind       string                   `json:"kind"`
	HostGroups []pipelineHostGroupJSON  `json:"host_groups"`
	Revisions  []pipelineRevisionAtJSON `json:"revisions"`
	Finished   []string                 `json:"finished"`
}

type pipelineHostGroupJSON struct {
	Name  string         `json:"name"`
	Hosts []string       `json:"hosts"`
	Done  map[string]int `json:"hosts_done"` // per revision in the stage
}

type pipelineRevisionAtJSON struct {
	Revision string `json:"revision"`
	State    string `json:"state"`
	Why      string `json:"why"`
}

type pipelinePictureJSON struct {
	Name     string                 `json:"name"`
	InFlight []pipelineRevisionJSON `json:"in_flight"`
	Stages   []pipelineStageJSON    `json:"stages"`
}

func pipelinePictureJSONOf(p *pipelines.Picture) pipelinePictureJSON {
	out := pipelinePictureJSON{Name: p.Name, InFlight: []pipelineRevisionJSON{}, Stages: []pipelineStageJSON{}}
	for i := range p.Revisions {
		out.InFlight = append(out.InFlight, pipelineRevisionJSONOf(&p.Revisions[i]))
	}
	for _, st := range p.Stages {
		sj := pipelineStageJSON{Name: st.Name, After: nonNilSlice(st.After), Kind: st.Kind, HostGroups: []pipelineHostGroupJSON{},
			Revisions: []pipelineRevisionAtJSON{}, Finished: nonNilSlice(st.Done)}
		for _, g := range st.Groups {
			sj.HostGroups = append(sj.HostGroups, pipelineHostGroupJSON{Name: g.Name, Hosts: nonNilSlice(g.Hosts), Done: g.Done})
		}
		for _, h := range st.Here {
			sj.Revisions = append(sj.Revisions, pipelineRevisionAtJSON{Revision: h.Revision, State: h.State, Why: h.Why})
		}
		out.Stages = append(out.Stages, sj)
	}
	return out
}

// granularityJSON is the seed's three questions about one level.
type granularityJSON struct {
	Target         string         `json:"target"`
	Level          string         `json:"level"`
	LatestFinished *logEntryJSON  `json:"latest_finished"`
	LatestFailed   *logEntryJSON  `json:"latest_failed"`
	InProgress     []logEntryJSON `json:"in_progress"`
}

func granularityJSONOf(g *pipelines.Granularity) granularityJSON {
	out := granularityJSON{Target: g.Target, Level: g.Level, InProgress: []logEntryJSON{}}
	if g.LatestFinished != nil {
		e := logEntryJSONOf(g.LatestFinished)
		out.LatestFinished = &e
	}
	if g.LatestFailed != nil {
		e := logEntryJSONOf(g.LatestFailed)
		out.LatestFailed = &e
	}
	for i := range g.InProgress {
		out.InProgress = append(out.InProgress, logEntryJSONOf(&g.InProgress[i]))
	}
	return out
}

// pipelineStepJSON is one step of a revision with where it stands and why.
type pipelineStepJSON struct {
	Event    string     `json:"event"`
	Target   string     `json:"target"`
	Kind     string     `json:"kind"`
	State    string     `json:"state"`
	Why      string     `json:"why"`
	Attempt  int        `json:"attempt,omitempty"`
	Reason   string     `json:"reason,omitempty"`
	Started  *time.Time `json:"started_at,omitempty"`
	Finished *time.Time `json:"finished_at,omitempty"`
}

type revisionDetailJSON struct {
	pipelineRevisionJSON
	Artifacts []pipelineArtifactJSON `json:"artifacts"`
	Steps     []pipelineStepJSON     `json:"steps"`
	Blocked   *pipelineStepJSON      `json:"blocked"`
}

func revisionDetailJSONOf(d *pipelines.RevisionDetail) revisionDetailJSON {
	out := revisionDetailJSON{pipelineRevisionJSON: pipelineRevisionJSONOf(&d.Revision), Artifacts: []pipelineArtifactJSON{}, Steps: []pipelineStepJSON{}}
	for _, a := range d.Artifacts {
		out.Artifacts = append(out.Artifacts, pipelineArtifactJSON{Arch: a.Arch, Location: a.Location, RegisteredBy: a.RegisteredBy, CreatedAt: a.CreatedAt})
	}
	for _, s := range d.Steps {
		out.Steps = append(out.Steps, pipelineStepJSONOf(s))
	}
	if d.Blocked != nil {
		b := pipelineStepJSONOf(*d.Blocked)
		out.Blocked = &b
	}
	return out
}

func pipelineStepJSONOf(s pipelines.StepDetail) pipelineStepJSON {
	j := pipelineStepJSON{Event: s.Step.Event, Target: s.Step.Target, Kind: s.Kind, State: s.State, Why: s.Why}
	if w := s.Work; w != nil {
		j.Attempt, j.Reason, j.Finished = w.Attempt, w.Reason, w.FinishedAt
		started := w.StartedAt
		j.Started = &started
	}
	return j
}
