package pipelines

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/progression"
	"github.com/gantryhq/gantry/models"
)

// Granularity is the seed's three questions about one level of a
// pipeline (the pipeline, a stage, a host group or a host), answered from
// the log.
type Granularity struct {
	Target string
	Level  string
	// LatestFinished is the entry of the latest revision that finished the
	// level successfully (nil: none yet); LatestFailed likewise.
	LatestFinished *models.LogEntry
	LatestFailed   *models.LogEntry
	// InProgress are the start entries of revisions that started the level
	// and have not finished it, oldest first (a failed one waits for an
	// operator, so it is still in progress).
	InProgress []models.LogEntry
}

// Ask answers the questions for pipeline's level at path: "" (the
// pipeline), "stage", "stage/group" or "stage/group/host".
func (s *Service) Ask(ctx context.Context, pipeline, path string) (*Granularity, error) {
	db := s.Queue.DB()
	l, err := s.load(ctx, db, pipeline)
	if err != nil {
		return nil, err
	}
	lvl, target, err := levelAt(l, path)
	if err != nil {
		return nil, err
	}
	g := &Granularity{Target: target, Level: lvl.name}
	if g.LatestFinished, err = models.LatestAt(ctx, db, target, lvl.finished); err != nil {
		return nil, err
	}
	if g.LatestFailed, err = models.LatestAt(ctx, db, target, lvl.failed); err != nil {
		return nil, err
	}
	g.InProgress, err = models.InProgressAt(ctx, db, target, lvl.started, lvl.finished)
	return g, err
}

// levelAt resolves a path inside the pipeline to its level and target.
func levelAt(l *loaded, path string) (level, string, error) {
	path = strings.Trim(path, "/")
	if path == "" {
		return levelPipeline, l.row.Name, nil
	}
	parts := strings.Split(path, "/")
	st := l.def.Stage(parts[0])
	if st == nil || len(parts) > 3 {
		return level{}, "", apperr.New(apperr.NotFound, "Pipeline %s has no %s.", l.row.Name, path)
	}
	if len(parts) == 1 {
		return levelStage, l.shape.StageTarget(st.Name), nil
	}
	for _, g := range st.HostGroups {
		if g.Name != parts[1] {
			continue
		}
		if len(parts) == 2 {
			return levelGroup, l.shape.GroupTarget(st.Name, g.Name), nil
		}
		for _, h := range g.Hosts {
			if h == parts[2] {
				return levelHost, l.shape.HostTarget(st.Name, g.Name, h), nil
			}
		}
	}
	return level{}, "", apperr.New(apperr.NotFound, "Pipeline %s has no %s.", l.row.Name, path)
}

// Overview is one pipeline in the list of pipelines.
type Overview struct {
	Name       string
	Stages     int
	Hosts      int
	InFlight   int
	Failed     int // revisions in flight blocked by a failed step
	LatestDone string
}

// List is every pipeline with its revisions in flight.
func (s *Service) List(ctx context.Context) ([]Overview, error) {
	db := s.Queue.DB()
	rows, err := models.ListPipelines(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make([]Overview, 0, len(rows))
	for i := range rows {
		l, err := loadRow(&rows[i])
		if err != nil {
			return nil, err
		}
		o := Overview{Name: l.row.Name, Stages: len(l.def.Stages), Hosts: hostCount(l.def)}
		revs, err := models.InFlightRevisions(ctx, db, l.row.Name)
		if err != nil {
			return nil, err
		}
		o.InFlight = len(revs)
		ids := make([]int64, len(revs))
		for i := range revs {
			ids[i] = revs[i].ID
		}
		open, err := models.OpenSteps(ctx, db, ids)
		if err != nil {
			return nil, err
		}
		failed := map[int64]bool{}
		for _, st := range open {
			if st.Status == models.StepFailed {
				failed[st.RevisionID] = true
			}
		}
		o.Failed = len(failed)
		latest, err := models.LatestAt(ctx, db, l.row.Name, progression.PipelineFinished)
		if err != nil {
			return nil, err
		}
		if latest != nil {
			o.LatestDone = latest.Revision
		}
		out = append(out, o)
	}
	return out, nil
}

func hostCount(def gantryfile.Pipeline) int {
	n := 0
	for _, st := range def.Stages {
		for _, g := range st.HostGroups {
			n += len(g.Hosts)
		}
	}
	return n
}

// Picture is a pipeline's stages and host groups with where each
// revision in flight stands: the pipeline's page.
type Picture struct {
	Name      string
	Def       gantryfile.Pipeline
	Revisions []models.PipelineRevision // in flight, oldest first
	// Stages, in the definition's order, each with its columns (the stages
	// it comes after) and each revision's place.
	Stages []StagePicture
	// Blocked are the revisions in flight blocked by a failed step, with it.
	Blocked map[string]BlockedStep
	// Finished are the latest revisions that went through the pipeline.
	Finished []models.PipelineRevision
}

// BlockedStep is the failed step that holds a revision.
type BlockedStep struct {
	Step   progression.Step
	Reason string
}

// StagePicture is one stage in the picture.
type StagePicture struct {
	Name   string
	After  []string
	Kind   string // build, gate, hosts or empty
	Depth  int    // its column: the longest chain of stages before it
	Groups []GroupPicture
	// Here are the revisions at this stage and what each is doing there.
	Here []RevisionAt
	// Done are the revisions in flight that finished this stage.
	Done []string
}

// GroupPicture is one host group of a stage.
type GroupPicture struct {
	Name  string
	Hosts []string
	// Done counts, per revision at the stage, the hosts that finished.
	Done map[string]int
}

// RevisionAt is a revision inside a stage.
type RevisionAt struct {
	Revision string
	State    string // running, waiting, failed, locked, approval
	Why      string
}

// Picture builds the pipeline's picture from the log and the work under
// way.
func (s *Service) Picture(ctx context.Context, pipeline string) (*Picture, error) {
	db := s.Queue.DB()
	l, err := s.load(ctx, db, pipeline)
	if err != nil {
		return nil, err
	}
	revs, err := models.InFlightRevisions(ctx, db, pipeline)
	if err != nil {
		return nil, err
	}
	st, err := s.state(ctx, db, l, revs)
	if err != nil {
		return nil, err
	}
	plan := progression.New(l.shape, st.revisions, st.intro)
	pic := &Picture{Name: pipeline, Def: l.def, Revisions: revs, Blocked: map[string]BlockedStep{}}
	finished, _, err := models.ListRevisions(ctx, db, models.RevisionFilter{Pipeline: pipeline, Status: models.RevisionFinished, Limit: 5})
	if err != nil {
		return nil, err
	}
	pic.Finished = finished
	depth := stageDepths(l.def)
	for _, stage := range l.def.Stages {
		sp := StagePicture{Name: stage.Name, After: stage.After, Depth: depth[stage.Name], Kind: stageKind(stage)}
		for _, g := range stage.HostGroups {
			sp.Groups = append(sp.Groups, GroupPicture{Name: g.Name, Hosts: g.Hosts, Done: map[string]int{}})
		}
		pic.Stages = append(pic.Stages, sp)
	}
	for i, rp := range plan.Revisions {
		r := st.revisions[i]
		for f, why := range r.Failed {
			pic.Blocked[rp.Name] = BlockedStep{Step: f, Reason: why}
		}
		for j := range pic.Stages {
			sp := &pic.Stages[j]
			target := l.shape.StageTarget(sp.Name)
			switch {
			case r.Done[progression.Step{Event: progression.StageFinished, Target: target}]:
				sp.Done = append(sp.Done, rp.Name)
			case r.Done[progression.Step{Event: progression.StageStarted, Target: target}] ||
				plan.Status(rp, progression.Step{Event: progression.StageStarted, Target: target}).State != progression.Pending:
				sp.Here = append(sp.Here, revisionAt(plan, rp, l, sp.Name))
				for k := range sp.Groups {
					g := &sp.Groups[k]
					for _, h := range g.Hosts {
						if r.Done[progression.Step{Event: progression.HostFinished, Target: l.shape.HostTarget(sp.Name, g.Name, h)}] {
							g.Done[rp.Name]++
						}
					}
				}
			}
		}
	}
	// A revision passed over a stage (not new for it) is neither here nor
	// done: leave it out of that stage.
	for j := range pic.Stages {
		sp := &pic.Stages[j]
		kept := sp.Here[:0]
		for _, h := range sp.Here {
			if h.State != "passed" {
				kept = append(kept, h)
			}
		}
		sp.Here = kept
	}
	return pic, nil
}

// revisionAt says what a revision does in a stage: the most telling state
// among the stage's frontier steps.
func revisionAt(plan *progression.Plan, rp *progression.RevisionPlan, l *loaded, stage string) RevisionAt {
	prefix := l.shape.StageTarget(stage)
	at := RevisionAt{Revision: rp.Name, State: "waiting"}
	rank := map[progression.State]int{progression.Failed: 6, progression.Blocked: 5, progression.Running: 4, progression.Locked: 3, progression.Doable: 2, progression.NotReady: 1}
	best := -1
	for _, f := range rp.Frontier {
		if f.Target != prefix && !strings.HasPrefix(f.Target, prefix+"/") {
			continue
		}
		st := plan.Status(rp, f)
		if r := rank[st.State]; r > best {
			best = r
			at.State, at.Why = st.State.String(), f.Event+" on "+f.Target+": "+st.Why()
			if f.Event == progression.StageApproved && st.State == progression.Running {
				at.State, at.Why = "approval", "waits for the voters"
			}
			if info, _ := l.shape.Info(f); info.Kind == progression.Artifact && st.State == progression.Running {
				at.State, at.Why = "waiting", "waits for the "+info.Name+" artifact"
			}
		}
	}
	if best < 0 {
		st := plan.Status(rp, progression.Step{Event: progression.StageStarted, Target: prefix})
		if st.State == progression.NotNew || st.State == progression.NotIntroduced {
			at.State = "passed"
		}
	}
	return at
}

func stageKind(st gantryfile.PipelineStage) string {
	switch {
	case len(st.Artifacts) > 0:
		return "build"
	case st.Approval != nil && len(st.HostGroups) == 0:
		return "gate"
	case len(st.HostGroups) > 0:
		return "hosts"
	}
	return "empty"
}

// stageDepths is each stage's column in the picture: the longest chain of
// stages before it.
func stageDepths(def gantryfile.Pipeline) map[string]int {
	depth := map[string]int{}
	var visit func(name string, seen int) int
	visit = func(name string, seen int) int {
		if d, ok := depth[name]; ok {
			return d
		}
		st := def.Stage(name)
		d := 0
		if st != nil && seen < len(def.Stages) {
			for _, a := range st.After {
				d = max(d, visit(a, seen+1)+1)
			}
		}
		depth[name] = d
		return d
	}
	for _, st := range def.Stages {
		visit(st.Name, 0)
	}
	return depth
}

// RevisionDetail is one revision's page: its record, artifacts, each
// step's work, every step of the pipeline with where it stands and why,
// and its log entries.
type RevisionDetail struct {
	Pipeline  string
	Revision  models.PipelineRevision
	Artifacts []models.PipelineArtifact
	Steps     []StepDetail
	Log       []models.LogEntry
	// Blocked is the failed step holding the revision, if any.
	Blocked *StepDetail
	// Gates are the revision's gates that opened a vote, in stage order.
	Gates []GateDetail
}

// GateDetail is one gate's vote for a revision.
type GateDetail struct {
	Stage    string
	Open     bool // the gate waits for votes now
	Approval *models.Approval
	Votes    []models.Vote
}

// StepDetail is one step of a revision.
type StepDetail struct {
	Step  progression.Step
	Kind  string
	Depth int // nesting: 0 pipeline, 1 stage, 2 host group, 3 host
	State string
	Why   string
	Work  *models.PipelineStep
	Gate  bool
	// OnAgent: the command runs on its host's agent, whose output comes
	// with its end (there is none to follow meanwhile).
	OnAgent bool
}

// Revision is the revision's page data.
func (s *Service) Revision(ctx context.Context, pipeline, revision string) (*RevisionDetail, error) {
	db := s.Queue.DB()
	l, err := s.load(ctx, db, pipeline)
	if err != nil {
		return nil, err
	}
	rev, err := models.RevisionByName(ctx, db, pipeline, revision)
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("revision %s in pipeline %s", revision, pipeline))
	}
	// Batches are held across revisions: plan it with the others in
	// flight (it may itself have finished since it was read).
	revs, err := models.InFlightRevisions(ctx, db, pipeline)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(revs, func(r models.PipelineRevision) bool { return r.ID == rev.ID }) {
		revs = append(revs, *rev)
	}
	all, err := s.state(ctx, db, l, revs)
	if err != nil {
		return nil, err
	}
	plan := progression.New(l.shape, all.revisions, all.intro)
	rp := plan.Revision(revision)
	d := &RevisionDetail{Pipeline: pipeline, Revision: *rev}
	if d.Artifacts, err = models.ArtifactsOf(ctx, db, rev.ID); err != nil {
		return nil, err
	}
	work, err := models.StepsOf(ctx, db, rev.ID)
	if err != nil {
		return nil, err
	}
	byStep := map[progression.Step]*models.PipelineStep{}
	for i := range work {
		byStep[progression.Step{Event: work[i].Event, Target: work[i].Target}] = &work[i]
	}
	dispatches, err := models.AgentStepsOfRevision(ctx, db, rev.ID)
	if err != nil {
		return nil, err
	}
	for _, ss := range plan.Statuses(rp) {
		info, _ := l.shape.Info(ss.Step)
		sd := StepDetail{Step: ss.Step, Kind: kindName(info.Kind), Depth: strings.Count(ss.Step.Target, "/"),
			State: ss.State.String(), Why: ss.Why(), Work: byStep[ss.Step], Gate: info.Kind == progression.Gate}
		if ss.State == progression.Running && info.Kind == progression.Gate {
			sd.State, sd.Why = "approval", "waits for the voters: vote in /approvals"
		}
		if ss.State == progression.Running && info.Kind == progression.Artifact {
			sd.State, sd.Why = "waiting", "waits for the "+info.Name+" artifact to be registered"
		}
		if ss.State == progression.Running && info.Kind == progression.Command {
			if state, why := agentWhy(l, info, byStep[ss.Step], dispatches); state != "" {
				sd.State, sd.Why, sd.OnAgent = state, why, true
			}
		}
		d.Steps = append(d.Steps, sd)
		if ss.State == progression.Failed {
			b := sd
			d.Blocked = &b
		}
	}
	for _, stage := range l.def.Stages {
		if stage.Approval == nil {
			continue
		}
		a, votes, err := s.Approvals.Approval(ctx, gateSubject(rev.ID, stage.Name))
		if err != nil {
			return nil, err
		}
		if a == nil {
			continue
		}
		w := byStep[progression.Step{Event: progression.StageApproved, Target: l.shape.StageTarget(stage.Name)}]
		open := a.State == models.ApprovalPending && a.ClosedAt == nil && w != nil && w.Status == models.StepRunning
		d.Gates = append(d.Gates, GateDetail{Stage: stage.Name, Open: open, Approval: a, Votes: votes})
	}
	// A gate's work runs from the moment it is reached; it waits for the
	// voters once its vote is open.
	for i := range d.Steps {
		st := &d.Steps[i]
		if st.Gate && st.State == "approval" && !slices.ContainsFunc(d.Gates, func(g GateDetail) bool { return g.Open && l.shape.StageTarget(g.Stage) == st.Step.Target }) {
			st.State, st.Why = "running", "opening the vote"
		}
	}
	d.Log, err = models.ListLog(ctx, db, models.LogFilter{Deployment: DeploymentID(pipeline, revision), Limit: models.MaxLogPage})
	return d, err
}

func kindName(k progression.Kind) string {
	return [...]string{"marker", "command", "artifact", "gate"}[k]
}

// Revisions pages a pipeline's revisions, newest first.
func (s *Service) Revisions(ctx context.Context, f models.RevisionFilter) ([]models.PipelineRevision, int, error) {
	if _, err := s.load(ctx, s.Queue.DB(), f.Pipeline); err != nil {
		return nil, 0, err
	}
	return models.ListRevisions(ctx, s.Queue.DB(), f)
}

// Definition is a pipeline's definition as gantry.yaml has it.
func (s *Service) Definition(ctx context.Context, pipeline string) (gantryfile.Pipeline, error) {
	l, err := s.load(ctx, s.Queue.DB(), pipeline)
	if err != nil {
		return gantryfile.Pipeline{}, err
	}
	return l.def, nil
}

// Gate is an approval gate of a pipeline as gantry.yaml defines it.
type Gate struct {
	Pipeline string
	Stage    string
	Approval gantryfile.PipelineApproval
}

// Gates are every pipeline's gates, by pipeline and stage.
func (s *Service) Gates(ctx context.Context) ([]Gate, error) {
	rows, err := models.ListPipelines(ctx, s.Queue.DB())
	if err != nil {
		return nil, err
	}
	var out []Gate
	for i := range rows {
		l, err := loadRow(&rows[i])
		if err != nil {
			return nil, err
		}
		for _, st := range l.def.Stages {
			if st.Approval != nil {
				out = append(out, Gate{Pipeline: l.row.Name, Stage: st.Name, Approval: *st.Approval})
			}
		}
	}
	return out, nil
}

// StepOutput is the output of a revision's step from character offset on,
// the offset after it, and whether it may still grow (the step runs).
func (s *Service) StepOutput(ctx context.Context, ref StepRef, offset int) (text string, next int, running bool, err error) {
	db := s.Queue.DB()
	rev, err := models.RevisionByName(ctx, db, ref.Pipeline, ref.Revision)
	if err != nil {
		return "", 0, false, notFound(err, fmt.Sprintf("revision %s in pipeline %s", ref.Revision, ref.Pipeline))
	}
	text, next, status, err := models.StepOutputFrom(ctx, db, rev.ID, ref.Event, ref.Target, offset)
	if err != nil {
		return "", 0, false, notFound(err, fmt.Sprintf("work for %s on %s", ref.Event, ref.Target))
	}
	return text, next, status == models.StepRunning, nil
}
