-- Daemons (seed 002): environments with immutable versions, deployments,
-- Gantry's cached view of each cluster (instances, tasks), crash-loop
-- records. docs/areas/daemons.md.

CREATE TABLE daemon_environments (
    id          bigserial PRIMARY KEY,
    name        text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    type        text NOT NULL DEFAULT 'daemon' CHECK (type IN ('daemon')),
    -- active: monitors act (new instances get tasks, dead tasks restart);
    -- inactive until the first deployment starts and after a stop.
    active      boolean NOT NULL DEFAULT false,
    -- where the environment is declared: the API or gantry.yaml.
    source      text NOT NULL DEFAULT 'api' CHECK (source IN ('api', 'file')),
    -- the version the monitors keep running: that of the last deployment
    -- that went in progress.
    deployed_version_id uuid,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz
);
CREATE UNIQUE INDEX daemon_environments_name ON daemon_environments (name) WHERE deleted_at IS NULL;

CREATE TABLE daemon_versions (
    id                  uuid PRIMARY KEY,
    environment_id      bigint NOT NULL REFERENCES daemon_environments (id),
    number              int NOT NULL,
    task_definition     text NOT NULL,
    command             text[] NOT NULL,
    task_env            jsonb NOT NULL DEFAULT '{}',
    cluster             text NOT NULL,
    attributes          text[] NOT NULL DEFAULT '{}',
    role                text NOT NULL DEFAULT '',
    min_healthy_percent int NOT NULL CHECK (min_healthy_percent BETWEEN 0 AND 100),
    timeout_seconds     int NOT NULL CHECK (timeout_seconds > 0),
    created_by          text NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (environment_id, number)
);
ALTER TABLE daemon_environments
    ADD FOREIGN KEY (deployed_version_id) REFERENCES daemon_versions (id);

CREATE TABLE daemon_deployments (
    id             uuid PRIMARY KEY,
    environment_id bigint NOT NULL REFERENCES daemon_environments (id),
    version_id     uuid NOT NULL REFERENCES daemon_versions (id),
    type           text NOT NULL CHECK (type IN ('user-created', 'new-instance', 'health-repair')),
    state          text NOT NULL CHECK (state IN ('pending', 'in-progress', 'complete', 'unhealthy', 'timed-out', 'stopped', 'canceled')),
    reason         text NOT NULL DEFAULT '',
    batches        int NOT NULL DEFAULT 0,
    created_by     text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    started_at     timestamptz,
    ended_at       timestamptz,
    deadline_at    timestamptz,
    -- the last time a step worked on it; the stale-lock sweep re-enqueues
    -- a step for an in-progress deployment nobody has touched for long.
    stepped_at     timestamptz
);
-- One in-progress deployment per environment, whoever races.
CREATE UNIQUE INDEX daemon_deployments_one_in_progress ON daemon_deployments (environment_id) WHERE state = 'in-progress';
-- One pending user-created deployment per environment (a newer one cancels it).
CREATE UNIQUE INDEX daemon_deployments_one_pending ON daemon_deployments (environment_id) WHERE state = 'pending' AND type = 'user-created';
CREATE INDEX daemon_deployments_by_environment ON daemon_deployments (environment_id, created_at DESC);
CREATE INDEX daemon_deployments_open ON daemon_deployments (state) WHERE state IN ('pending', 'in-progress');

CREATE TABLE daemon_instances (
    id            text PRIMARY KEY,
    cluster       text NOT NULL,
    backend       text NOT NULL DEFAULT 'local',
    hostname      text NOT NULL DEFAULT '',
    attributes    jsonb NOT NULL DEFAULT '{}',
    status        text NOT NULL CHECK (status IN ('active', 'draining', 'gone')),
    registered_at timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now(),
    left_at       timestamptz
);
CREATE INDEX daemon_instances_cluster ON daemon_instances (cluster, status);

CREATE TABLE daemon_tasks (
    id             uuid PRIMARY KEY,
    environment_id bigint NOT NULL REFERENCES daemon_environments (id),
    instance_id    text NOT NULL REFERENCES daemon_instances (id),
    version_id     uuid NOT NULL REFERENCES daemon_versions (id),
    deployment_id  uuid NOT NULL REFERENCES daemon_deployments (id),
    state          text NOT NULL CHECK (state IN ('launching', 'running', 'stopping', 'stopped', 'failed')),
    -- the task this one was started to replace after it died, for the
    -- death-to-running metric.
    replaces       uuid,
    exit_code      int,
    reason         text NOT NULL DEFAULT '',
    pid            int,
    created_at     timestamptz NOT NULL DEFAULT now(),
    running_at     timestamptz,
    stopping_at    timestamptz,
    ended_at       timestamptz
);
-- One task per (environment, instance) that runs or is about to: a replaced
-- task may still be stopping beside its successor.
CREATE UNIQUE INDEX daemon_tasks_one_per_instance ON daemon_tasks (environment_id, instance_id) WHERE state IN ('launching', 'running');
CREATE INDEX daemon_tasks_live ON daemon_tasks (environment_id, state) WHERE state IN ('launching', 'running', 'stopping');
CREATE INDEX daemon_tasks_instance ON daemon_tasks (instance_id) WHERE state IN ('launching', 'running', 'stopping');
CREATE INDEX daemon_tasks_deployment ON daemon_tasks (deployment_id);
-- Each instance's newest task of an environment (the grid, the planner's
-- snapshot).
CREATE INDEX daemon_tasks_newest ON daemon_tasks (environment_id, instance_id, created_at DESC, id);

CREATE TABLE daemon_crash_loops (
    environment_id bigint NOT NULL REFERENCES daemon_environments (id),
    instance_id    text NOT NULL REFERENCES daemon_instances (id),
    failures       int NOT NULL,
    last_exit_at   timestamptz NOT NULL,
    PRIMARY KEY (environment_id, instance_id)
);

-- When each cluster's view was last refreshed in full, for the staleness
-- shown on pages and in metrics.
CREATE TABLE daemon_clusters (
    name         text PRIMARY KEY,
    backend      text NOT NULL DEFAULT 'local',
    refreshed_at timestamptz NOT NULL DEFAULT now()
);
