// Package daemons renders the daemons area: every environment with its
// health line, one environment's picture of instances × task state, its
// versions, deployments with their progress, the diff before a deployment
// and its log slice, and one deployment. The web package builds the view
// models below; the templates only loop and branch.
package daemons

import (
	"github.com/gantryhq/gantry/views/pages/log"
)

// Row is one environment on the index.
type Row struct {
	Name, URL           string
	State, StateTone    string // active, inactive
	Health, HealthTone  string
	HealthLine          string // "2 active, 3 launching, 1 unhealthy"
	Version             string // deployed version ("v3"), "—" before any
	Cluster, Attributes string
	Deployment          string // the active deployment in words, "" when none
	Source              string // "API" or "gantry.yaml"
}

// IndexView is /daemons.
type IndexView struct {
	Rows     []Row
	Clusters []Cluster
}

// Cluster is one cluster's view and how stale it is.
type Cluster struct {
	Name, Backend, Refreshed string
	Instances                int
	Stale                    bool
}

// Cell is one instance in the grid: its task's state for the environment.
type Cell struct {
	Instance, Hostname string
	State              string // the CSS class: running, launching, stopping, failed, none, backoff
	Label              string // "v3 running", "no task", "failed: exit status 1"
	Version            string
	Title              string // the tooltip: task id, since when
}

// Grid is the instances × task state picture.
type Grid struct {
	Cells      []Cell
	Legend     []LegendItem
	RefreshURL string
}

// LegendItem counts one state.
type LegendItem struct {
	State, Label string
	Count        int
}

// Version is one row of the version history.
type Version struct {
	Number, ID, Task, Command, Group, MinHealthy, By, At string
	Deployed                                             bool
}

// Deployment is one row of the deployments list (and the deployment page's
// header).
type Deployment struct {
	ID, URL, Type, State, StateTone, Version, Reason string
	Created, Started, Ended                          string
	Batches                                          string // "1 batch", "3 batches"
	Progress                                         string // "1 of 3 tasks running"
	Percent                                          string // the bar's width, "0"–"100"
}

// DiffView is what a deployment of a version would do.
type DiffView struct {
	Version, VersionID string
	Matching           string // "over 2 matching instances"
	FirstBatch         int
	Start, Unchanged   []string
	Replace            []DiffLine
	Stop               []DiffLine
	StartURL           string
}

// DiffLine is one replaced or stopped task.
type DiffLine struct{ Instance, Task, Note string }

// Option is one version in the diff's select.
type Option struct {
	Value, Label string
	Selected     bool
}

// EnvironmentView is /daemons/{name}.
type EnvironmentView struct {
	Name                 string
	State, StateTone     string
	Health, HealthTone   string
	HealthLine           string
	Source               string // "API", or "gantry.yaml" (then the API may not change its definition)
	FromFile             bool
	Cluster, Attributes  string
	ClusterRefreshed     string // how long ago the cluster's view was refreshed in full
	ClusterStale         bool
	Matching             string // "2 matching instances"
	Grid                 Grid
	Versions             []Version
	Options              []Option
	Diff                 *DiffView
	Deployments          []Deployment
	Active               *Deployment
	StopURL, RollbackURL string
	CanOperate           bool
	Log                  []log.Row
	LogURL               string
}

// DeploymentView is /daemons/{name}/deployments/{id}.
type DeploymentView struct {
	Environment, EnvironmentURL string
	Deployment                  Deployment
	Tasks                       []Task
	Log                         []log.Row
	LogURL                      string // the deployment's entries on /log
}

// Task is one task of a deployment.
type Task struct {
	ID, Instance, State, StateTone, Created, Running, Ended, Reason string
}
