ALTER TABLE runs DROP COLUMN reconcile_check_id;
DROP TABLE drift_checks;
DROP TABLE drift_sweeps;
ALTER TABLE repositories DROP COLUMN drift_notify;
ALTER TABLE repositories DROP COLUMN drift_every_seconds;
