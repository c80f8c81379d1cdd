-- Infrastructure delivery (seed 000): repositories synced from gantry.yaml,
-- GitHub deliveries, pull request plans, merge locks, deployment runs and
-- their executions, and approvals (the one voting mechanism of the product).

CREATE TABLE repositories (
    name               text PRIMARY KEY,
    url                text NOT NULL,
    trunk              text NOT NULL,
    scan               text NOT NULL CHECK (scan IN ('graph', 'plan')),
    webhook_secret_env text NOT NULL,
    status_token_env   text NOT NULL DEFAULT '',
    init_command       text[] NOT NULL DEFAULT '{}',
    plan_command       text[] NOT NULL,
    apply_command      text[] NOT NULL,
    destroy_command    text[] NOT NULL DEFAULT '{}',
    plan_statuses      boolean NOT NULL DEFAULT true,
    merge_lock_statuses boolean NOT NULL DEFAULT true,
    plan_forks         boolean NOT NULL DEFAULT false, -- plan pull requests from forks (their code runs with the plan role)
    -- owner/name on GitHub, learned from the first verified delivery.
    github_full_name   text NOT NULL DEFAULT '',
    removed_at         timestamptz,
    updated_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE accounts (
    repository     text NOT NULL REFERENCES repositories (name) ON DELETE CASCADE,
    name           text NOT NULL,
    path           text NOT NULL,
    depends_on     text[] NOT NULL DEFAULT '{}',
    plan_role      text NOT NULL DEFAULT '',
    apply_role     text NOT NULL DEFAULT '',
    voters         text[] NOT NULL,
    min_approvals  integer NOT NULL CHECK (min_approvals >= 1),
    min_rejections integer NOT NULL CHECK (min_rejections >= 1),
    PRIMARY KEY (repository, name)
);

-- Every delivery Gantry accepted, by GitHub's delivery id: a redelivery
-- finds its row and does nothing twice.
CREATE TABLE webhook_deliveries (
    delivery_id text PRIMARY KEY CHECK (length(delivery_id) BETWEEN 1 AND 200),
    event       text NOT NULL,
    action      text NOT NULL DEFAULT '',
    repository  text NOT NULL REFERENCES repositories (name),
    payload     bytea NOT NULL, -- the body as GitHub signed it
    received_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE pull_requests (
    repository       text NOT NULL REFERENCES repositories (name),
    number           integer NOT NULL CHECK (number > 0),
    title            text NOT NULL DEFAULT '',
    author           text NOT NULL DEFAULT '',
    html_url         text NOT NULL DEFAULT '',
    base_ref         text NOT NULL,
    head_ref         text NOT NULL DEFAULT '',
    head_sha         text NOT NULL,
    state            text NOT NULL CHECK (state IN ('open', 'closed', 'merged')),
    merge_commit_sha text NOT NULL DEFAULT '',
    plan_error       text NOT NULL DEFAULT '', -- why the head could not be planned (a malformed terragrunt.hcl)
    -- The latest delivery applied: GitHub's updated_at of the pull request,
    -- then when Gantry received it. An older one handled later changes nothing.
    event_at         timestamptz NOT NULL DEFAULT '-infinity',
    delivery_at      timestamptz NOT NULL DEFAULT '-infinity',
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (repository, number)
);

-- One plan of one changed unit at one head commit of an open pull request.
CREATE TABLE pr_plans (
    id          bigserial PRIMARY KEY,
    repository  text NOT NULL,
    pr_number   integer NOT NULL,
    head_sha    text NOT NULL,
    path        text NOT NULL,
    status      text NOT NULL DEFAULT 'queued'
                CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'canceled')),
    exit_code   integer,
    has_changes boolean,
    output      text NOT NULL DEFAULT '',
    error       text NOT NULL DEFAULT '',
    job_id      bigint, -- the River job planning it, cancelled when a newer push supersedes it
    generation  integer NOT NULL DEFAULT 1, -- bumped when a cancelled plan is queued again; its job carries it
    created_at  timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,
    finished_at timestamptz,
    FOREIGN KEY (repository, pr_number) REFERENCES pull_requests (repository, number),
    UNIQUE (repository, pr_number, head_sha, path)
);

CREATE TABLE runs (
    id            bigserial PRIMARY KEY,
    repository    text NOT NULL REFERENCES repositories (name),
    pr_number     integer NOT NULL,
    pr_title      text NOT NULL DEFAULT '',
    base_ref      text NOT NULL,
    head_ref      text NOT NULL DEFAULT '',
    head_sha      text NOT NULL,
    merge_commit  text NOT NULL,
    base_commit   text NOT NULL DEFAULT '', -- what the merge is compared with, found by the scan
    scan          text NOT NULL,
    status        text NOT NULL DEFAULT 'queued'
                  CHECK (status IN ('queued', 'scanning', 'running', 'succeeded', 'failed')),
    error         text NOT NULL DEFAULT '',
    deleted_units text[] NOT NULL DEFAULT '{}',
    scan_job_id   bigint, -- the River job that took the merge lock and scans; another job for the run does nothing
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    finished_at   timestamptz
);
CREATE INDEX runs_repository_idx ON runs (repository, id DESC);
CREATE INDEX runs_queued_idx ON runs (repository, id) WHERE status = 'queued';

-- The merge lock: at most one row per repository, so two merges at the same
-- moment cannot both take it.
CREATE TABLE merge_locks (
    repository text PRIMARY KEY REFERENCES repositories (name),
    run_id     bigint NOT NULL UNIQUE REFERENCES runs (id),
    pr_number  integer NOT NULL,
    locked_at  timestamptz NOT NULL DEFAULT now()
);

-- Approvals: voters and thresholds frozen when the approval is created;
-- votes are kept (the latest per voter counts), the state is the tally's.
CREATE TABLE approvals (
    id             bigserial PRIMARY KEY,
    subject        text NOT NULL UNIQUE, -- execution:<execution_id>, later pipeline gates
    voters         text[] NOT NULL,
    min_approvals  integer NOT NULL CHECK (min_approvals >= 1),
    min_rejections integer NOT NULL CHECK (min_rejections >= 1),
    state          text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'approved', 'rejected')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    decided_at     timestamptz
);
CREATE INDEX approvals_pending_idx ON approvals USING gin (voters) WHERE state = 'pending';

CREATE TABLE votes (
    id          bigserial PRIMARY KEY,
    approval_id bigint NOT NULL REFERENCES approvals (id),
    voter       text NOT NULL,
    decision    text NOT NULL CHECK (decision IN ('approve', 'reject')),
    comment     text NOT NULL DEFAULT '' CHECK (length(comment) <= 4000),
    via         text NOT NULL CHECK (via IN ('link', 'dashboard', 'api')),
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX votes_approval_idx ON votes (approval_id, id);

-- One unit of a run, with the seed's record fields.
CREATE TABLE executions (
    id                  bigserial PRIMARY KEY,
    execution_id        text NOT NULL UNIQUE, -- run-{pr}-{commit[:4]}-{account}-{leaf}-{nnn}
    run_id              bigint NOT NULL REFERENCES runs (id),
    cfg_path            text NOT NULL,
    cfg_deps            text[] NOT NULL DEFAULT '{}',
    account_name        text NOT NULL,
    account_path        text NOT NULL DEFAULT '',
    account_deps        text[] NOT NULL DEFAULT '{}',
    init_command        text[] NOT NULL DEFAULT '{}',
    plan_command        text[] NOT NULL,
    apply_command       text[] NOT NULL,
    plan_role_arn       text NOT NULL DEFAULT '',
    apply_role_arn      text NOT NULL DEFAULT '',
    voters              text[] NOT NULL,
    min_approval_count  integer NOT NULL,
    min_rejection_count integer NOT NULL,
    status              text NOT NULL DEFAULT 'waiting'
                        CHECK (status IN ('waiting', 'running', 'succeeded', 'failed', 'aborted')),
    -- Where a running execution is: planning, voting or applying.
    step                text NOT NULL DEFAULT '' CHECK (step IN ('', 'planning', 'voting', 'applying')),
    plan_output         text NOT NULL DEFAULT '',
    plan_exit_code      integer,
    has_changes         boolean,
    plan_file           bytea, -- the saved plan the voters saw; apply uses exactly this
    apply_output        text NOT NULL DEFAULT '',
    apply_exit_code     integer,
    error               text NOT NULL DEFAULT '',
    approval_id         bigint REFERENCES approvals (id),
    ready_at            timestamptz, -- when its last dependency succeeded
    started_at          timestamptz,
    plan_started_at     timestamptz,
    finished_at         timestamptz,
    UNIQUE (run_id, cfg_path)
);
CREATE INDEX executions_run_idx ON executions (run_id, id);
