-- Environment pools (seed 001): pools and environments registered from
-- gantry.yaml, and the allocations that lease them.

-- The allow list: who may lease environments, by Gantry user (API token)
-- or by AWS account (IAM authentication).
CREATE TABLE clients (
    name         text PRIMARY KEY,
    users        text[] NOT NULL DEFAULT '{}',
    aws_accounts text[] NOT NULL DEFAULT '{}',
    rate         double precision NOT NULL DEFAULT 0
);

CREATE TABLE pools (
    name                    text PRIMARY KEY,
    kind                    text NOT NULL CHECK (kind IN ('aws', 'postgres', 'slot')),
    session_seconds         integer NOT NULL CHECK (session_seconds > 0),
    max_session_seconds     integer NOT NULL CHECK (max_session_seconds >= session_seconds),
    cleanup_timeout_seconds integer NOT NULL CHECK (cleanup_timeout_seconds > 0),
    clients                 text[] NOT NULL DEFAULT '{}',
    cleanup_command         text[] NOT NULL DEFAULT '{}',
    postgres_admin_url_env  text NOT NULL DEFAULT '',
    postgres_template       text NOT NULL DEFAULT '',
    notify_emails           text[] NOT NULL DEFAULT '{}',
    notify_webhook          text NOT NULL DEFAULT '',
    removed_at              timestamptz,
    updated_at              timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE environments (
    id                     bigserial PRIMARY KEY,
    key                    text NOT NULL UNIQUE, -- aws:account/region, postgres:database or slot:name
    name                   text NOT NULL DEFAULT '', -- a slot's name
    pool                   text NOT NULL REFERENCES pools (name),
    kind                   text NOT NULL,
    account                text NOT NULL DEFAULT '',
    region                 text NOT NULL DEFAULT '',
    admin_role             text NOT NULL DEFAULT '',
    database               text NOT NULL DEFAULT '',
    capabilities           jsonb NOT NULL DEFAULT '{}'::jsonb,
    status                 text NOT NULL DEFAULT 'available'
                           CHECK (status IN ('available', 'in_use', 'cleaning', 'dirty', 'deregistered')),
    -- Removed from gantry.yaml while leased or cleaning: takes no new
    -- allocation and is deregistered once its allocation ends.
    deregister_requested_at timestamptz,
    deregistered_at        timestamptz,
    last_released_at       timestamptz,
    cleanup_id             uuid, -- the cleanup under way: the allocation that ended, or a retry
    cleanup_output         text NOT NULL DEFAULT '',
    cleanup_started_at     timestamptz,
    cleanup_finished_at    timestamptz,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX environments_pick_idx ON environments (pool, status, last_released_at NULLS FIRST, id);

CREATE TABLE allocations (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    request_id     uuid NOT NULL, -- the allocations of one all-or-nothing request
    environment_id bigint NOT NULL REFERENCES environments (id),
    pool           text NOT NULL,
    requester      text NOT NULL CHECK (length(requester) BETWEEN 1 AND 1024),
    client         text NOT NULL,
    credential_ref text NOT NULL DEFAULT '', -- what revocation needs: a role name, a session name
    capabilities   jsonb NOT NULL DEFAULT '{}'::jsonb, -- the environment's, kept for history and metrics
    started_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    ended_at       timestamptz,
    ended_by       text CHECK (ended_by IN ('client', 'timeout', 'operator')),
    outcome        text NOT NULL DEFAULT '' CHECK (length(outcome) <= 1024)
);
-- The database, not only the code, guarantees an environment is never
-- leased to two allocations at once.
CREATE UNIQUE INDEX allocations_one_active_per_environment ON allocations (environment_id) WHERE ended_at IS NULL;
CREATE INDEX allocations_environment_idx ON allocations (environment_id, started_at DESC);
CREATE INDEX allocations_requester_idx ON allocations (requester, started_at DESC);
CREATE INDEX allocations_pool_idx ON allocations (pool, started_at DESC);
CREATE INDEX allocations_started_at_idx ON allocations (started_at);
