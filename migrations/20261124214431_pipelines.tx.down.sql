DROP TABLE pipeline_steps;
DROP TABLE pipeline_step_introductions;
DROP TABLE pipeline_artifacts;
DROP TABLE pipeline_revisions;
DROP TABLE pipeline_wakeups;
DROP TABLE pipelines;
