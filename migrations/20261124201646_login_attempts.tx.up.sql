-- Sign-in attempts, for throttling. An attempt is reserved (pending) before
-- its password is hashed, under advisory locks on its account and address,
-- so concurrent attempts and other processes see it at once; it becomes ok
-- or failed afterwards. A pending attempt whose process died is counted as a
-- failure until it expires. The deployment log keeps the audit trail; these
-- rows live only as long as the window they count in.
CREATE TABLE login_attempts (
    id         bigserial PRIMARY KEY,
    account    text NOT NULL,        -- the email as typed, normalised: unknown ones count too
    address    text NOT NULL,        -- the client's IP
    outcome    text NOT NULL DEFAULT 'pending' CHECK (outcome IN ('pending', 'ok', 'failed')),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL  -- created_at + the window: the periodic sweep deletes it after
);

CREATE INDEX login_attempts_account ON login_attempts (account, created_at) WHERE outcome <> 'ok';
CREATE INDEX login_attempts_address ON login_attempts (address, created_at) WHERE outcome <> 'ok';
CREATE INDEX login_attempts_expires ON login_attempts (expires_at);
