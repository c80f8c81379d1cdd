package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/gantryhq/gantry/internal/approval"
	"github.com/gantryhq/gantry/internal/approvals"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/internal/pipelines"
	"github.com/gantryhq/gantry/models"
	"github.com/gantryhq/gantry/views/components"
	approvalsview "github.com/gantryhq/gantry/views/pages/approvals"
	pipelinesview "github.com/gantryhq/gantry/views/pages/pipelines"
)

// The pages of the pipelines area (seed 004): the list of pipelines, a
// pipeline's picture (live), a revision's steps with why each is where it
// is, and the operators' retry and skip. The JSON API is in pipelines.go.

// pipelineExample is the gantry.yaml an empty /pipelines shows.
const pipelineExample = `pipelines:
  - name: web
    stages:
      - name: build
        artifacts: [x86]
      - name: beta
        after: [build]
        host_groups:
          - {name: east, hosts: [beta-1, beta-2]}
          - {name: west, hosts: [beta-3]}
        steps:
          - {name: deployed, run: [/opt/deploy/deploy.sh, "{host}", "{artifact}"]}
          - {name: tested, run: [/opt/deploy/smoke.sh, "{host}"], timeout: 2m}
      - name: approval
        after: [beta]
        approval: {voters: [ada@example.com, bob@example.com]}
      - name: prod
        after: [approval]
        batch: [deployed, tested]
        host_groups: [{name: all, hosts: [prod-1, prod-2]}]
        steps:
          - {name: deployed, run: [/opt/deploy/deploy.sh, "{host}", "{artifact}"]}
          - {name: tested, run: [/opt/deploy/smoke.sh, "{host}"]}`

// pipelineChipStates are the legend of the picture, in its order.
var pipelineChipStates = []struct{ State, Label string }{
	{"running", "running"}, {"doable", "starting"}, {"waiting", "waiting for an artifact"}, {"approval", "waiting for votes"},
	{"not-ready", "waiting for parallel work"}, {"locked", "waiting for a batch"}, {"failed", "failed"}, {"blocked", "blocked"},
}

func (s *pipelinesHandlers) pipelinesPage(c echo.Context) error {
	list, err := s.Pipelines.List(c.Request().Context())
	if err != nil {
		return err
	}
	v := pipelinesview.IndexView{Example: pipelineExample}
	for _, p := range list {
		row := pipelinesview.Row{Name: p.Name, URL: pageurl.Pipeline(p.Name), Stages: strconv.Itoa(p.Stages),
			Hosts: strconv.Itoa(p.Hosts), InFlight: strconv.Itoa(p.InFlight), LatestFinished: p.LatestDone}
		if p.Failed > 0 {
			row.Blocked = fmt.Sprintf("%d blocked", p.Failed)
		}
		v.Pipelines = append(v.Pipelines, row)
	}
	return s.render(c, http.StatusOK, pipelinesview.Index(v))
}

func (s *pipelinesHandlers) pipelinePage(c echo.Context) error {
	pic, err := s.Pipelines.Picture(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, pipelinesview.Pipeline(pipelinesview.PipelineView{
		Name: pic.Name, PictureURL: pageurl.Pipeline(pic.Name) + "/picture", LogURL: "/log?target=" + pic.Name,
		Picture: pipelinePictureView(pic),
	}))
}

// pipelinePicturePart is the live part of the pipeline's page, which its
// script fetches again every few seconds.
func (s *pipelinesHandlers) pipelinePicturePart(c echo.Context) error {
	pic, err := s.Pipelines.Picture(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return s.render(c, http.StatusOK, pipelinesview.Picture(pipelinePictureView(pic)))
}

func pipelinePictureView(pic *pipelines.Picture) pipelinesview.PictureView {
	var v pipelinesview.PictureView
	for _, st := range pic.Stages {
		for len(v.Columns) <= st.Depth {
			v.Columns = append(v.Columns, pipelinesview.Column{})
		}
		card := pipelinesview.Stage{Name: st.Name, Kind: st.Kind}
		if len(st.After) > 0 {
			card.After = "after " + strings.Join(st.After, ", ")
		}
		for _, g := range st.Groups {
			gv := pipelinesview.Group{Name: g.Name, Hosts: strings.Join(g.Hosts, ", "), Count: plural(len(g.Hosts), "host", "hosts")}
			for _, h := range st.Here {
				done := g.Done[h.Revision]
				gv.Progress = append(gv.Progress, pipelinesview.Progress{Revision: h.Revision,
					Text: fmt.Sprintf("%d/%d", done, len(g.Hosts)), Done: strconv.Itoa(done), Max: strconv.Itoa(max(len(g.Hosts), 1))})
			}
			card.Groups = append(card.Groups, gv)
		}
		for _, h := range st.Here {
			card.Here = append(card.Here, pipelinesview.Chip{Revision: h.Revision, URL: pageurl.PipelineRevision(pic.Name, h.Revision),
				State: h.State, Title: h.Why})
		}
		for _, r := range st.Done {
			card.Done = append(card.Done, pipelinesview.Chip{Revision: r, URL: pageurl.PipelineRevision(pic.Name, r)})
		}
		v.Columns[st.Depth].Stages = append(v.Columns[st.Depth].Stages, card)
	}
	for _, l := range pipelineChipStates {
		v.Legend = append(v.Legend, pipelinesview.Chip{State: l.State, Title: l.Label})
	}
	for i := range pic.Revisions {
		r := &pic.Revisions[i]
		row := pipelinesview.RevisionRow{Revision: r.Revision, URL: pageurl.PipelineRevision(pic.Name, r.Revision),
			Status: "in flight", Tone: components.ToneInfo, Since: clock(r.CreatedAt)}
		if b, ok := pic.Blocked[r.Revision]; ok {
			row.Status, row.Tone = "blocked", components.ToneBad
			row.Note = fmt.Sprintf("%s on %s failed: %s", b.Step.Event, b.Step.Target, b.Reason)
		}
		v.InFlight = append(v.InFlight, row)
	}
	for i := range pic.Finished {
		r := &pic.Finished[i]
		row := pipelinesview.RevisionRow{Revision: r.Revision, URL: pageurl.PipelineRevision(pic.Name, r.Revision),
			Status: "finished", Tone: components.ToneOK, Since: clock(r.CreatedAt)}
		if r.FinishedAt != nil {
			row.Note = "through the pipeline at " + clock(*r.FinishedAt) + " UTC"
		}
		v.Finished = append(v.Finished, row)
	}
	return v
}

func (s *pipelinesHandlers) revisionPage(c echo.Context) error {
	ctx := c.Request().Context()
	d, err := s.Pipelines.Revision(ctx, c.Param("name"), c.Param("revision"))
	if err != nil {
		return err
	}
	user := principalOf(c).User
	base := pageurl.PipelineRevision(d.Pipeline, d.Revision.Revision)
	v := pipelinesview.RevisionView{
		Pipeline: d.Pipeline, PipelineURL: pageurl.Pipeline(d.Pipeline), Revision: d.Revision.Revision,
		Status: "in flight", Tone: components.ToneInfo, RegisteredBy: d.Revision.RegisteredBy, Registered: clock(d.Revision.CreatedAt),
		LogURL: "/log?deployment=" + url.QueryEscape(pipelines.DeploymentID(d.Pipeline, d.Revision.Revision)),
		CanAct: user.Role.Includes(models.RoleOperator), RetryURL: base + "/retry", SkipURL: base + "/skip",
	}
	if d.Revision.Status == models.RevisionFinished {
		v.Status, v.Tone = "finished", components.ToneOK
	}
	for _, a := range d.Artifacts {
		v.Artifacts = append(v.Artifacts, pipelinesview.Artifact{Arch: a.Arch, Location: a.Location, By: a.RegisteredBy})
	}
	for _, st := range d.Steps {
		v.Steps = append(v.Steps, pipelineStepRow(st, base+"/output"))
	}
	if d.Blocked != nil {
		row := pipelineStepRow(*d.Blocked, base+"/output")
		v.Blocked, v.Status, v.Tone = &row, "blocked", components.ToneBad
	}
	for _, g := range d.Gates {
		v.Gates = append(v.Gates, pipelineGateView(g, user.Email, base+"/vote"))
	}
	for i := range d.Log {
		e := &d.Log[i]
		v.Log = append(v.Log, pipelinesview.LogRow{At: clock(e.CreatedAt), Event: e.Event, Target: e.TargetID, Actor: e.Actor,
			Tone: components.Tone(eventTone(e.Event))})
	}
	return s.render(c, http.StatusOK, pipelinesview.Revision(v))
}

func pipelineStepRow(st pipelines.StepDetail, outputURL string) pipelinesview.StepRow {
	row := pipelinesview.StepRow{Event: st.Step.Event, Target: st.Step.Target, Depth: strconv.Itoa(min(st.Depth, 3)),
		State: st.State, Why: st.Why}
	if w := st.Work; w != nil {
		if w.Attempt > 1 {
			row.Attempt = fmt.Sprintf("attempt %d", w.Attempt)
		}
		row.Output, row.Reason = w.Output, w.Reason
		if st.Kind == "command" && w.Status == models.StepRunning && !st.OnAgent {
			row.TailURL = outputURL + "?" + url.Values{"event": {st.Step.Event}, "target": {st.Step.Target}}.Encode()
			row.TailOffset = strconv.Itoa(utf8.RuneCountInString(w.Output))
		}
	}
	return row
}

func pipelineGateView(g pipelines.GateDetail, voter, action string) pipelinesview.GateView {
	res := approvals.Tally(g.Approval, g.Votes)
	v := pipelinesview.GateView{Stage: g.Stage, Action: action, Rows: voteRows(g.Votes),
		Tally: fmt.Sprintf("%d of %d approvals · %d of %d rejections (voters: %s)", res.Approvals, g.Approval.MinApprovals,
			res.Rejections, g.Approval.MinRejections, strings.Join(g.Approval.Voters, ", "))}
	switch g.Approval.State {
	case models.ApprovalApproved:
		v.Outcome, v.Tone = "approved", components.ToneOK
	case models.ApprovalRejected:
		v.Outcome, v.Tone = "rejected", components.ToneBad
	}
	isVoter := (approval.Policy{Voters: g.Approval.Voters}).IsVoter(voter)
	switch {
	case g.Open && isVoter:
		v.Open, v.Note = true, yourVote(v.Rows, voter)
	case g.Open:
		v.Note = "Waiting for the voters; you are not one of them."
	}
	return v
}

// gateVoteForm is a signed-in voter's vote on a gate from the revision's
// page.
func (s *pipelinesHandlers) gateVoteForm(c echo.Context) error {
	user := principalOf(c).User
	name, rev := c.Param("name"), c.Param("revision")
	decision := c.FormValue("decision")
	out, sum, err := s.Pipelines.Vote(c.Request().Context(), name, rev, c.FormValue("stage"), approvals.VoteInput{
		Voter: user.Email, Decision: decision, Comment: strings.TrimSpace(c.FormValue("comment")), Via: approvals.ViaDashboard,
	})
	to := pageurl.PipelineRevision(name, rev)
	if msg, ok := conflictMessage(err); ok {
		return s.redirectWithFlash(c, to, false, msg)
	}
	if err != nil {
		return err
	}
	return s.redirectWithFlash(c, to, true, voteRecorded("your", decision, out, sum))
}

// stepActionForm is an operator's retry or skip from the revision's page.
func (s *pipelinesHandlers) stepActionForm(act stepAction, done string) echo.HandlerFunc {
	return func(c echo.Context) error {
		ref := pipelines.StepRef{Pipeline: c.Param("name"), Revision: c.Param("revision"), Event: c.FormValue("event"), Target: c.FormValue("target")}
		to := pageurl.PipelineRevision(ref.Pipeline, ref.Revision)
		err := act(c.Request().Context(), ref, principalOf(c).Actor())
		if msg, ok := conflictMessage(err); ok {
			return s.redirectWithFlash(c, to, false, msg)
		}
		if err != nil {
			return err
		}
		return s.redirectWithFlash(c, to, true, fmt.Sprintf("%s on %s %s; the revision moves on from here.", ref.Event, ref.Target, done))
	}
}

// pipelinesVoterHelp says, on an empty /approvals, which pipeline gates
// would wait for voter; nothing when no pipeline has a gate.
func (s *pipelinesHandlers) pipelinesVoterHelp(ctx context.Context, email string) (approvalsview.Empty, error) {
	gates, err := s.Pipelines.Gates(ctx)
	if err != nil || len(gates) == 0 {
		return approvalsview.Empty{}, err
	}
	var mine, others []string
	for _, g := range gates {
		a := g.Approval
		if (approval.Policy{Voters: a.Voters}).IsVoter(email) {
			mine = append(mine, fmt.Sprintf("You vote on the gate before %s of pipeline %s (%s).", g.Stage, g.Pipeline, thresholds(a.MinApprovals, a.MinRejections, len(a.Voters))))
		} else {
			others = append(others, fmt.Sprintf("Gate before %s of pipeline %s: voted on by %s.", g.Stage, g.Pipeline, strings.Join(a.Voters, ", ")))
		}
	}
	if len(mine) > 0 {
		return approvalsview.Empty{Body: "Each revision that reaches a pipeline gate you vote on waits here (and you get an email with a voting link) until enough voters approve or reject it.",
			Steps: mine}, nil
	}
	return approvalsview.Empty{Body: "You vote on no pipeline gate; a gate's voters are its approval's voters in gantry.yaml.", Steps: others}, nil
}

// stepOutputTail is the JSON tail of a step's output from offset on (the
// shape the infrastructure pages' output tails have).
func (s *pipelinesHandlers) stepOutputTail(c echo.Context) error {
	offset, err := infraOutputOffset(c)
	if err != nil {
		return err
	}
	ref := pipelines.StepRef{Pipeline: c.Param("name"), Revision: c.Param("revision"), Event: c.QueryParam("event"), Target: c.QueryParam("target")}
	text, next, running, err := s.Pipelines.StepOutput(c.Request().Context(), ref, offset)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"text": text, "next": next, "done": !running})
}
