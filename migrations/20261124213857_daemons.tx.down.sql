DROP TABLE daemon_clusters;
DROP TABLE daemon_crash_loops;
DROP TABLE daemon_tasks;
DROP TABLE daemon_instances;
DROP TABLE daemon_deployments;
ALTER TABLE daemon_environments DROP COLUMN deployed_version_id;
DROP TABLE daemon_versions;
DROP TABLE daemon_environments;
