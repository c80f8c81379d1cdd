DROP TABLE deployment_log;
DROP FUNCTION deployment_log_notify();
DROP FUNCTION deployment_log_refuse_change();
DROP TABLE api_tokens;
DROP TABLE sessions;
DROP TABLE users;
