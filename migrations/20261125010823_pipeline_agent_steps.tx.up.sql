-- A pipeline host step that runs on its host's agent (runs_on: agent): one
-- row per attempt, written by the step's do job, taken by the first agent
-- of that host to poll, and ended by its report (or by its silence).
CREATE TABLE pipeline_agent_steps (
    id           uuid PRIMARY KEY,
    revision_id  bigint NOT NULL REFERENCES pipeline_revisions (id),
    event        text NOT NULL,
    target       text NOT NULL,
    attempt      integer NOT NULL,
    -- The pipeline's host name: the agent registered with attribute host=<host> runs it.
    host         text NOT NULL,
    argv         jsonb NOT NULL,
    env          jsonb NOT NULL,
    timeout_ms   bigint NOT NULL,
    state        text NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'dispatched', 'ended')),
    instance_id  text,
    exit_code    integer,
    reason       text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    dispatched_at timestamptz,
    ended_at      timestamptz,
    UNIQUE (revision_id, event, target, attempt)
);
CREATE INDEX pipeline_agent_steps_open_idx ON pipeline_agent_steps (host) WHERE state <> 'ended';
