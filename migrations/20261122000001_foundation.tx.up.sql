-- People, their browser sessions and API tokens, and the deployment log.

CREATE TABLE users (
    id            bigserial PRIMARY KEY,
    email         text NOT NULL,
    name          text NOT NULL,
    role          text NOT NULL CHECK (role IN ('admin', 'operator', 'approver', 'viewer')),
    password_hash text NOT NULL,
    disabled_at   timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

-- A session row is the server half of the session cookie; the cookie holds a
-- random token and only its SHA-256 is stored, so a leaked table grants nothing.
CREATE TABLE sessions (
    token_hash   bytea PRIMARY KEY,
    user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    ip           text NOT NULL DEFAULT '',
    user_agent   text NOT NULL DEFAULT ''
);
CREATE INDEX sessions_user_id_idx ON sessions (user_id);
CREATE INDEX sessions_expires_at_idx ON sessions (expires_at);

CREATE TABLE api_tokens (
    id           bigserial PRIMARY KEY,
    user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         text NOT NULL,
    prefix       text NOT NULL,
    token_hash   bytea NOT NULL UNIQUE,
    scopes       text[] NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX api_tokens_user_id_idx ON api_tokens (user_id);

-- The deployment log (seed 004): an append-only record of everything that
-- happened to every target. The database refuses to change or remove entries.
CREATE TABLE deployment_log (
    id            bigserial PRIMARY KEY,
    deployment_id text NOT NULL,
    target_id     text NOT NULL,
    revision      text NOT NULL DEFAULT '',
    event         text NOT NULL,
    actor         text NOT NULL,
    detail        jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX deployment_log_target_event_idx ON deployment_log (target_id, event, id DESC);
CREATE INDEX deployment_log_target_revision_idx ON deployment_log (target_id, revision);
CREATE INDEX deployment_log_deployment_idx ON deployment_log (deployment_id, id);
CREATE INDEX deployment_log_event_idx ON deployment_log (event, id DESC);
CREATE INDEX deployment_log_actor_idx ON deployment_log (actor, id DESC);
CREATE INDEX deployment_log_created_at_idx ON deployment_log (created_at);

CREATE FUNCTION deployment_log_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'deployment_log is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER deployment_log_no_update_delete
    BEFORE UPDATE OR DELETE ON deployment_log
    FOR EACH ROW EXECUTE FUNCTION deployment_log_refuse_change();

CREATE TRIGGER deployment_log_no_truncate
    BEFORE TRUNCATE ON deployment_log
    FOR EACH STATEMENT EXECUTE FUNCTION deployment_log_refuse_change();

-- Live pages (the /log tail) wake on this instead of polling.
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
