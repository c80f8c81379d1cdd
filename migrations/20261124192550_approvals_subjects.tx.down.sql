DROP INDEX approvals_waiting_idx;
CREATE INDEX approvals_pending_idx ON approvals USING gin (voters) WHERE state = 'pending';
ALTER TABLE approvals DROP COLUMN closed_at, DROP COLUMN kind;
