DROP TABLE job_heartbeats;
