-- NOTIFY takes a database-wide lock at commit that is held through the WAL
-- flush, so a NOTIFY on every log entry made every change in Gantry commit
-- one at a time. Live pages poll for new entries instead.
DROP TRIGGER deployment_log_notify_insert ON deployment_log;
DROP FUNCTION deployment_log_notify();
