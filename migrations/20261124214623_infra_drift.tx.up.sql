-- Drift detection: on a repository's schedule, a plan of every unit of the
-- trunk (never applied); a unit whose plan has changes has drifted, and an
-- operator may reconcile it through a run of the normal plan, vote, apply.
ALTER TABLE repositories ADD COLUMN drift_every_seconds integer NOT NULL DEFAULT 0; -- 0: off
ALTER TABLE repositories ADD COLUMN drift_notify text[] NOT NULL DEFAULT '{}';

-- The latest sweep of each repository: the trunk commit it planned and
-- its units, so units deleted since are no longer listed as drifted.
CREATE TABLE drift_sweeps (
    repository text PRIMARY KEY REFERENCES repositories (name),
    commit_sha text NOT NULL DEFAULT '',
    units      text[] NOT NULL DEFAULT '{}',
    error      text NOT NULL DEFAULT '', -- the trunk could not be scanned
    swept_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE drift_checks (
    id          bigserial PRIMARY KEY,
    repository  text NOT NULL REFERENCES repositories (name),
    path        text NOT NULL,
    commit_sha  text NOT NULL,
    status      text NOT NULL DEFAULT 'queued'
                CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
    has_changes boolean,
    exit_code   integer,
    output      text NOT NULL DEFAULT '',
    error       text NOT NULL DEFAULT '',
    notified    boolean NOT NULL DEFAULT false, -- the drift mail was queued
    created_at  timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,
    finished_at timestamptz
);
-- At most one check of a unit waits or runs: a slow plan is not stacked.
CREATE UNIQUE INDEX drift_checks_live_idx ON drift_checks (repository, path) WHERE status IN ('queued', 'running');
CREATE INDEX drift_checks_latest_idx ON drift_checks (repository, path, id DESC);

-- A run that reconciles a drifted unit (no pull request): the check it
-- reconciles. Its merge commit is the trunk's head when it takes the lock.
ALTER TABLE runs ADD COLUMN reconcile_check_id bigint REFERENCES drift_checks (id);
CREATE INDEX runs_reconcile_check_idx ON runs (reconcile_check_id) WHERE reconcile_check_id IS NOT NULL;
