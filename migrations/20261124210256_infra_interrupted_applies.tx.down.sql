UPDATE executions SET step = 'applying' WHERE step = 'interrupted';
ALTER TABLE executions DROP CONSTRAINT executions_step_check;
ALTER TABLE executions ADD CONSTRAINT executions_step_check
    CHECK (step IN ('', 'planning', 'voting', 'applying'));
ALTER TABLE executions DROP COLUMN apply_started_at;
