-- After each successful apply, the resources of the providers that apply
-- introduced to its unit, by full address (module path and count/for_each
-- key), read from terraform show -json: what a rollback of the run must
-- destroy so the unit can still be initialised once the provider block is
-- gone. error says why they could not be read; a rollback then has nothing
-- to go by, and an operator must look.
CREATE TABLE execution_new_resources (
    execution_id bigint PRIMARY KEY REFERENCES executions (id),
    providers    text[] NOT NULL DEFAULT '{}',
    addresses    text[] NOT NULL DEFAULT '{}',
    error        text NOT NULL DEFAULT '',
    recorded_at  timestamptz NOT NULL DEFAULT now()
);
