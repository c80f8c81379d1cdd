package pipelines

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/progression"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// A step with runs_on: agent runs on its host's own gantry agent (the
// daemons area's agent registered with attribute host=<host>), not on a
// Gantry worker. Its do job writes the dispatch; the first agent of that
// host to poll takes it, runs the command and reports its end, which
// completes or fails the step in the transaction that ends the dispatch.
// Meanwhile the do job watches: it comes back every agentWatchEvery and
// fails the step when the agent that took it goes silent.

// DefaultAgentDeadAfter is the daemons area's heartbeat TTL.
const DefaultAgentDeadAfter = 20 * time.Second

// agentWatchEvery is how often a dispatched step's job looks at its agent.
const agentWatchEvery = 2 * time.Second

func (s *Service) agentDeadAfter() time.Duration {
	if s.AgentDeadAfter > 0 {
		return s.AgentDeadAfter
	}
	return DefaultAgentDeadAfter
}

// dispatchToAgent writes the step's dispatch for its host's agent (once
// per attempt), then watches it: nothing to do while it waits for an agent
// or runs on a live one (the job comes back later), the step fails when
// its agent stopped responding or never reported.
func (s *Service) dispatchToAgent(ctx context.Context, l *loaded, rev *models.PipelineRevision, row *models.PipelineStep, info progression.StepInfo, def gantryfile.PipelineStep, argv []string, artifact string) error {
	a := &models.PipelineAgentStep{RevisionID: rev.ID, Event: row.Event, Target: row.Target, Attempt: row.Attempt, Host: info.Host,
		Argv: argv, TimeoutMS: def.CommandTimeout.Milliseconds(), Env: map[string]string{
			"GANTRY_PIPELINE": l.row.Name, "GANTRY_REVISION": rev.Revision, "GANTRY_STAGE": info.Stage,
			"GANTRY_HOST_GROUP": info.HostGroup, "GANTRY_HOST": info.Host, "GANTRY_ARTIFACT": artifact,
		}}
	err := s.inTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		locked, err := models.LockStep(ctx, tx, rev.ID, row.Event, row.Target)
		if err != nil {
			return err
		}
		if locked.Status != models.StepRunning || locked.Attempt != row.Attempt {
			a = nil
			return nil
		}
		return models.InsertAgentStep(ctx, tx, a)
	})
	if err != nil || a == nil || a.State == models.AgentStepEnded {
		return err
	}
	if a.State == models.AgentStepWaiting || a.InstanceID == nil {
		return river.JobSnooze(agentWatchEvery)
	}
	why, err := s.agentLost(ctx, a)
	if err != nil {
		return err
	}
	if why == "" {
		return river.JobSnooze(agentWatchEvery)
	}
	return s.inTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		locked, err := models.LockAgentStep(ctx, tx, a.ID)
		if err != nil {
			return err
		}
		ended, err := models.EndAgentStep(ctx, tx, locked, nil, why, s.now())
		if err != nil || !ended {
			return err
		}
		return s.fail(ctx, tx, l, rev, row, info, why, "")
	})
}

// agentLost says why the agent that took a step will not report its end
// ("" when it may yet): it left, it stopped polling for longer than the
// heartbeat TTL, or the command outlived its timeout with no report.
func (s *Service) agentLost(ctx context.Context, a *models.PipelineAgentStep) (string, error) {
	in, err := models.DaemonInstanceByID(ctx, s.Queue.DB(), *a.InstanceID)
	if err != nil && !errors.Is(err, models.ErrNotFound) {
		return "", err
	}
	now := s.now()
	switch {
	case err != nil || in.Status == "gone":
		return fmt.Sprintf("host %s's agent (instance %s) left while running the step", a.Host, *a.InstanceID), nil
	case now.Sub(in.LastSeenAt) > s.agentDeadAfter():
		return fmt.Sprintf("host %s's agent (instance %s) stopped responding while running the step: no heartbeat for %s",
			a.Host, *a.InstanceID, now.Sub(in.LastSeenAt).Round(time.Second)), nil
	case a.DispatchedAt != nil && now.Sub(*a.DispatchedAt) > a.Timeout()+s.agentDeadAfter():
		return fmt.Sprintf("host %s's agent (instance %s) did not report the end of the step within its timeout (%s)",
			a.Host, *a.InstanceID, a.Timeout()), nil
	}
	return "", nil
}

// AgentStepReport is how a step's command ended on its agent.
type AgentStepReport struct {
	ExitCode *int
	Signal   string // the signal that ended it, if one did
	TimedOut bool   // the agent stopped it at the step's timeout
	Reason   string // why it could not start ("exec: …: not found")
	Output   string // its output (the agent sends the tail)
}

// ReportAgentStep records the end of a step that instance's agent ran: the
// step completes or fails (blocking its revision), appended to the log in
// the transaction that ends the dispatch. A repeated report changes
// nothing; a step that is not this instance's is not found.
func (s *Service) ReportAgentStep(ctx context.Context, instanceID string, id uuid.UUID, r AgentStepReport) error {
	return s.inTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		a, err := models.LockAgentStep(ctx, tx, id)
		if errors.Is(err, models.ErrNotFound) || (err == nil && (a.InstanceID == nil || *a.InstanceID != instanceID)) {
			return apperr.New(apperr.NotFound, "No step %s on instance %s.", id, instanceID)
		}
		if err != nil {
			return err
		}
		reason := agentFailure(a, r)
		ended, err := models.EndAgentStep(ctx, tx, a, r.ExitCode, reason, s.now())
		if err != nil || !ended {
			return err // a repeated (or too late) report
		}
		rev, err := models.RevisionByID(ctx, tx, a.RevisionID)
		if err != nil {
			return err
		}
		l, err := s.load(ctx, tx, rev.Pipeline)
		if apperr.CodeOf(err) == apperr.NotFound {
			return nil // removed from gantry.yaml
		}
		if err != nil {
			return err
		}
		row, err := models.LockStep(ctx, tx, rev.ID, a.Event, a.Target)
		if errors.Is(err, models.ErrNotFound) {
			return nil
		}
		if err != nil || row.Status != models.StepRunning || row.Attempt != a.Attempt {
			return err // skipped, or retried under a newer attempt
		}
		info, ok := l.shape.Info(progression.Step{Event: a.Event, Target: a.Target})
		if !ok {
			return nil
		}
		if reason != "" {
			return s.fail(ctx, tx, l, rev, row, info, reason, r.Output)
		}
		detail := map[string]any{"attempt": row.Attempt, "agent": instanceID}
		if a.DispatchedAt != nil {
			detail["duration_ms"] = s.now().Sub(*a.DispatchedAt).Milliseconds()
		}
		return s.complete(ctx, tx, l, rev, row, Actor(l.row.Name), detail, r.Output)
	})
}

// agentFailure is why a reported step failed ("" when it succeeded), in
// the words a worker's run would use.
func agentFailure(a *models.PipelineAgentStep, r AgentStepReport) string {
	var reason string
	switch {
	case r.TimedOut:
		return fmt.Sprintf("timed out after %s (step %s's timeout, on host %s's agent)", a.Timeout(), strings.TrimPrefix(a.Event, progression.HostStepEvent("")), a.Host)
	case r.Reason != "" && r.ExitCode == nil && r.Signal == "":
		return trimReason(r.Reason)
	case r.Signal != "":
		reason = "ended by signal " + r.Signal
	case r.ExitCode == nil:
		reason = "the agent reported no exit status"
	case *r.ExitCode != 0:
		reason = fmt.Sprintf("exit status %d", *r.ExitCode)
	default:
		return ""
	}
	if last := lastLine(r.Output); last != "" {
		reason += ": " + last
	}
	return reason
}

// agentWhy is what a running step on an agent waits for, for the
// revision's page ("" when it is not such a step).
func agentWhy(l *loaded, info progression.StepInfo, work *models.PipelineStep, dispatches []models.PipelineAgentStep) (state, why string) {
	def := stepDef(l, info)
	if def == nil || !def.OnAgent() || work == nil {
		return "", ""
	}
	i := slices.IndexFunc(dispatches, func(a models.PipelineAgentStep) bool {
		return a.Event == work.Event && a.Target == work.Target && a.Attempt == work.Attempt
	})
	if i < 0 || dispatches[i].InstanceID == nil {
		return "waiting", fmt.Sprintf("waits for host %s's agent to connect (gantry agent --attr %s=%s)", info.Host, models.AgentHostAttribute, info.Host)
	}
	return "running", fmt.Sprintf("running on host %s's agent (instance %s)", info.Host, *dispatches[i].InstanceID)
}

// stepDef is a host step's definition, or nil.
func stepDef(l *loaded, info progression.StepInfo) *gantryfile.PipelineStep {
	stage := l.def.Stage(info.Stage)
	if stage == nil || info.Kind != progression.Command {
		return nil
	}
	i := slices.IndexFunc(stage.Steps, func(st gantryfile.PipelineStep) bool { return st.Name == info.Name })
	if i < 0 {
		return nil
	}
	return &stage.Steps[i]
}
