-- Rollback executions: when a run fails, each of its executions that
-- recorded resources of new providers (execution_new_resources) gets a
-- rollback execution in the same run, destroying exactly those addresses
-- through the same plan, vote and apply. A rollback shares its unit's
-- cfg_path with the execution it rolls back, so the one-execution-per-unit
-- rule holds for the run's other executions only.
ALTER TABLE executions ADD COLUMN rollback_of bigint REFERENCES executions (id);
ALTER TABLE executions DROP CONSTRAINT executions_run_id_cfg_path_key;
CREATE UNIQUE INDEX executions_run_cfg_path_key ON executions (run_id, cfg_path) WHERE rollback_of IS NULL;
-- An execution is rolled back at most once; a failed rollback is retried
-- in place.
CREATE UNIQUE INDEX executions_rollback_of_key ON executions (rollback_of) WHERE rollback_of IS NOT NULL;

-- What a rollback execution destroys and from which commit (the run's
-- merge commit, or the last commit where the unit existed when a later
-- merge deleted it), what a failed one left in the state, and the
-- operator who marked a failed one resolved.
CREATE TABLE execution_rollbacks (
    execution_id    bigint PRIMARY KEY REFERENCES executions (id),
    rollback_of     bigint NOT NULL UNIQUE REFERENCES executions (id),
    reason          text NOT NULL CHECK (reason IN ('run-failed', 'unit-deleted')),
    commit          text NOT NULL,
    addresses       text[] NOT NULL,
    -- After a failed rollback: the addresses still in the unit's state;
    -- NULL when they could not be read (remaining_error says why).
    remaining       text[],
    remaining_error text NOT NULL DEFAULT '',
    resolved_by     text NOT NULL DEFAULT '',
    resolved_reason text NOT NULL DEFAULT '',
    resolved_at     timestamptz
);
