-- An apply that began and recorded no outcome (its worker died) is never
-- run again on its own: apply_started_at marks that it began, and the
-- step 'interrupted' holds the execution until an operator chooses.
ALTER TABLE executions ADD COLUMN apply_started_at timestamptz;
ALTER TABLE executions DROP CONSTRAINT executions_step_check;
ALTER TABLE executions ADD CONSTRAINT executions_step_check
    CHECK (step IN ('', 'planning', 'voting', 'applying', 'interrupted'));
