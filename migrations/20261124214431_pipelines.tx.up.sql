-- Pipelines (seed 004): the definitions synced from gantry.yaml, the
-- revisions registered, their artifacts, when each kind of step was
-- introduced, and the state of each step's work. What a revision has
-- completed is in deployment_log (deployment_id 'pipeline:<name>@<revision>');
-- pipeline_steps is the work under way or failed beside it, and the guard
-- that a step's completion is written once.
CREATE TABLE pipelines (
    name        text PRIMARY KEY,
    definition  jsonb NOT NULL,
    -- The event names of its steps at the last sync: a name not here is a
    -- kind of step being introduced.
    events      text[] NOT NULL DEFAULT '{}',
    removed_at  timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- A row per append to a pipeline's log not yet read by a progression round
-- (inserted in the append's transaction, so appends never wait on each
-- other; a round takes the rows it will have read).
CREATE TABLE pipeline_wakeups (
    id        bigserial PRIMARY KEY,
    pipeline  text NOT NULL REFERENCES pipelines (name)
);
CREATE INDEX pipeline_wakeups_pipeline_idx ON pipeline_wakeups (pipeline);

-- The id orders revisions by registration: the engine's oldest first.
CREATE TABLE pipeline_revisions (
    id             bigserial PRIMARY KEY,
    pipeline       text NOT NULL REFERENCES pipelines (name),
    revision       text NOT NULL CHECK (revision <> ''),
    status         text NOT NULL DEFAULT 'in_flight' CHECK (status IN ('in_flight', 'finished')),
    registered_by  text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    UNIQUE (pipeline, revision)
);
CREATE INDEX pipeline_revisions_in_flight_idx ON pipeline_revisions (pipeline, id) WHERE status = 'in_flight';

CREATE TABLE pipeline_artifacts (
    revision_id    bigint NOT NULL REFERENCES pipeline_revisions (id),
    arch           text NOT NULL,
    location       text NOT NULL,
    registered_by  text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (revision_id, arch)
);

-- The seed's deployment_step_introduction: a kind of step (event name)
-- and the latest revision registered when it appeared (0: none yet).
CREATE TABLE pipeline_step_introductions (
    pipeline        text NOT NULL REFERENCES pipelines (name),
    event           text NOT NULL,
    revision_after  bigint NOT NULL,
    introduced_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (pipeline, event)
);

CREATE TABLE pipeline_steps (
    revision_id  bigint NOT NULL REFERENCES pipeline_revisions (id),
    event        text NOT NULL,
    target       text NOT NULL,
    status       text NOT NULL CHECK (status IN ('running', 'done', 'failed', 'skipped')),
    -- A retry starts a new attempt; a job of an older attempt does nothing.
    attempt      integer NOT NULL DEFAULT 1,
    reason       text NOT NULL DEFAULT '',
    output       text NOT NULL DEFAULT '',
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    PRIMARY KEY (revision_id, event, target)
);
CREATE INDEX pipeline_steps_open_idx ON pipeline_steps (revision_id) WHERE status IN ('running', 'failed');
