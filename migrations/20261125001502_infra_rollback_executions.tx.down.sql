DROP TABLE execution_rollbacks;
DELETE FROM executions WHERE rollback_of IS NOT NULL;
DROP INDEX executions_rollback_of_key;
DROP INDEX executions_run_cfg_path_key;
ALTER TABLE executions ADD CONSTRAINT executions_run_id_cfg_path_key UNIQUE (run_id, cfg_path);
ALTER TABLE executions DROP COLUMN rollback_of;
