package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Agent step states: written by the step's do job, taken by an agent of
// its host, ended by the agent's report or by the agent's silence.
const (
	AgentStepWaiting    = "waiting"
	AgentStepDispatched = "dispatched"
	AgentStepEnded      = "ended"
)

// AgentHostAttribute is the agent attribute naming the pipeline host it
// runs steps for (gantry agent --attr host=web-1).
const AgentHostAttribute = "host"

// PipelineAgentStep is one attempt of a pipeline host step that runs on
// its host's agent.
type PipelineAgentStep struct {
	bun.BaseModel `bun:"table:pipeline_agent_steps,alias:pas"`

	ID           uuid.UUID `bun:",pk"`
	RevisionID   int64
	Event        string
	Target       string
	Attempt      int
	Host         string
	Argv         []string          `bun:",type:jsonb"`
	Env          map[string]string `bun:",type:jsonb"`
	TimeoutMS    int64             `bun:"timeout_ms"`
	State        string
	InstanceID   *string
	ExitCode     *int
	Reason       string
	CreatedAt    time.Time `bun:",nullzero,notnull,default:current_timestamp"`
	DispatchedAt *time.Time
	EndedAt      *time.Time
}

// Timeout is how long the command may run.
func (a *PipelineAgentStep) Timeout() time.Duration {
	return time.Duration(a.TimeoutMS) * time.Millisecond
}

// InsertAgentStep writes a's dispatch unless that attempt has one already;
// a holds the row either way.
func InsertAgentStep(ctx context.Context, tx bun.IDB, a *PipelineAgentStep) error {
	if a.ID == uuid.Nil {
		a.ID = uuid.New()
	}
	a.State = AgentStepWaiting
	if _, err := tx.NewInsert().Model(a).On("CONFLICT (revision_id, event, target, attempt) DO NOTHING").Exec(ctx); err != nil {
		return fmt.Errorf("dispatching %s on %s: %w", a.Event, a.Target, err)
	}
	got, err := AgentStepOf(ctx, tx, a.RevisionID, a.Event, a.Target, a.Attempt)
	if err != nil {
		return err
	}
	*a = *got
	return nil
}

// AgentStepOf is the dispatch of one attempt of a step.
func AgentStepOf(ctx context.Context, db bun.IDB, revisionID int64, event, target string, attempt int) (*PipelineAgentStep, error) {
	a := new(PipelineAgentStep)
	err := db.NewSelect().Model(a).Where("revision_id = ? AND event = ? AND target = ? AND attempt = ?", revisionID, event, target, attempt).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return a, err
}

// AgentStepsOfRevision are every dispatch of a revision's steps.
func AgentStepsOfRevision(ctx context.Context, db bun.IDB, revisionID int64) ([]PipelineAgentStep, error) {
	var out []PipelineAgentStep
	err := db.NewSelect().Model(&out).Where("revision_id = ?", revisionID).OrderExpr("created_at").Scan(ctx)
	return out, err
}

// LockAgentStep reads a dispatch FOR UPDATE.
func LockAgentStep(ctx context.Context, tx bun.IDB, id uuid.UUID) (*PipelineAgentStep, error) {
	a := new(PipelineAgentStep)
	err := tx.NewSelect().Model(a).Where("id = ?", id).For("UPDATE").Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return a, err
}

// TakeAgentSteps gives the waiting steps of host to instance, and returns
// every step instance has and has not ended, oldest first, leaving out
// those whose attempt no longer runs. A step goes to one agent only: the
// first of its host to poll.
func TakeAgentSteps(ctx context.Context, db bun.IDB, instanceID, host string, now time.Time) ([]PipelineAgentStep, error) {
	if host != "" {
		if _, err := db.NewUpdate().Model((*PipelineAgentStep)(nil)).
			Set("state = ?, instance_id = ?, dispatched_at = ?", AgentStepDispatched, instanceID, now).
			Where("state = ? AND host = ?", AgentStepWaiting, host).Where(agentStepAttemptRunning).Exec(ctx); err != nil {
			return nil, fmt.Errorf("dispatching the steps of host %s: %w", host, err)
		}
	}
	var out []PipelineAgentStep
	err := db.NewSelect().Model(&out).Where("state = ? AND instance_id = ?", AgentStepDispatched, instanceID).Where(agentStepAttemptRunning).
		OrderExpr("created_at, id").Scan(ctx)
	return out, err
}

// agentStepAttemptRunning keeps the dispatches whose attempt of the step
// still runs: one skipped or retried since is nobody's to run.
const agentStepAttemptRunning = `EXISTS (SELECT 1 FROM pipeline_steps ps WHERE ps.revision_id = pas.revision_id
	AND ps.event = pas.event AND ps.target = pas.target AND ps.attempt = pas.attempt AND ps.status = 'running')`

// EndAgentStep ends a dispatch with what became of it; false when it had
// ended already.
func EndAgentStep(ctx context.Context, tx bun.IDB, a *PipelineAgentStep, exitCode *int, reason string, now time.Time) (bool, error) {
	res, err := tx.NewUpdate().Model((*PipelineAgentStep)(nil)).
		Set("state = ?, exit_code = ?, reason = ?, ended_at = ?", AgentStepEnded, exitCode, reason, now).
		Where("id = ? AND state <> ?", a.ID, AgentStepEnded).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("ending the dispatch of %s on %s: %w", a.Event, a.Target, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}
