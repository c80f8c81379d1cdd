-- Heartbeats of the running jobs that run commands (plans, applies,
-- cleanups): the worker inserts a row when an attempt starts, touches it
-- every GANTRY_HEARTBEAT_INTERVAL and deletes it when the attempt ends. The
-- areas' sweeps take an attempt whose row went quiet for its worker's death
-- (docs/operations.md "When a worker dies"). Keyed by River's job id, but
-- not a foreign key: River's own table is River's.
CREATE TABLE job_heartbeats (
    job_id     bigint PRIMARY KEY,
    kind       text NOT NULL,
    attempt    integer NOT NULL,
    worker     text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    beat_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX job_heartbeats_kind_beat_at ON job_heartbeats (kind, beat_at);
