CREATE FUNCTION deployment_log_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('gantry_deployment_log', NEW.id::text);
    RETURN NULL;
END;
$$;

CREATE TRIGGER deployment_log_notify_insert
    AFTER INSERT ON deployment_log
    FOR EACH ROW EXECUTE FUNCTION deployment_log_notify();
