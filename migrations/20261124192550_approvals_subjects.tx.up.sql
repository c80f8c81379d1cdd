-- Approvals serve every area: a subject is "<kind>:<id>" (execution:…,
-- later gates), and the kind gets a column so that what waits for a voter
-- is filtered by kind in SQL. It is computed from subject, so a process of
-- the previous release, which writes only subject, keeps working while
-- processes roll.
ALTER TABLE approvals ADD COLUMN kind text GENERATED ALWAYS AS (split_part(subject, ':', 1)) STORED;

-- Votes closed without a decision: the subject ended some other way (an
-- aborted run, a failure). A pending approval without it waits for votes,
-- whatever its kind, so listings need no area's tables.
ALTER TABLE approvals ADD COLUMN closed_at timestamptz;

UPDATE approvals AS ap SET closed_at = coalesce(x.finished_at, now())
  FROM executions AS x
 WHERE x.approval_id = ap.id AND ap.state = 'pending'
   AND NOT (x.status = 'running' AND x.step = 'voting');

DROP INDEX approvals_pending_idx;
CREATE INDEX approvals_waiting_idx ON approvals USING gin (voters) WHERE state = 'pending' AND closed_at IS NULL;
