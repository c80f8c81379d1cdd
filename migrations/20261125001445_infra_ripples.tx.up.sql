-- Outputs that ripple. After each successful apply, the names of the
-- unit's root outputs the apply changed (values compared, sensitive ones
-- too, but never stored), the units outside the run that read the unit
-- and were added to it because of that, why the outputs could not be
-- compared (compare_error: every reader is then added, as if they had
-- changed), and why the readers could not be worked out (error: the run
-- then fails when it ends).
CREATE TABLE execution_output_changes (
    execution_id bigint PRIMARY KEY REFERENCES executions (id) ON DELETE CASCADE,
    outputs      text[] NOT NULL DEFAULT '{}',
    readers      text[] NOT NULL DEFAULT '{}',
    compare_error text NOT NULL DEFAULT '',
    error        text NOT NULL DEFAULT '',
    recorded_at  timestamptz NOT NULL DEFAULT now()
);

-- An execution a run gained because a unit it depends on changed outputs
-- (source, an execution of the same run): "added because <unit>'s outputs
-- <names> changed"; no names when they could not be compared.
CREATE TABLE execution_ripples (
    execution_id bigint PRIMARY KEY REFERENCES executions (id) ON DELETE CASCADE,
    source_id    bigint NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    source_unit  text NOT NULL,
    outputs      text[] NOT NULL
);
CREATE INDEX execution_ripples_source ON execution_ripples (source_id);
