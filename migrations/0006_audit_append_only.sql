-- Audit tables are append-only like the trail: the frozen Merkle leaves and a
-- session's identity and frozen root can be neither changed nor removed through SQL.
-- (An attacker with write access to the file can drop these triggers; verification
-- then still recomputes every root from its leaves and from the records, see
-- docs/security.md, "Tamper evidence".) Never edit once shipped.

CREATE TRIGGER audit_merkle_leaves_no_update BEFORE UPDATE ON audit_merkle_leaves
BEGIN
    SELECT RAISE(ABORT, 'audit Merkle leaves are append-only: UPDATE refused');
END;
CREATE TRIGGER audit_merkle_leaves_no_delete BEFORE DELETE ON audit_merkle_leaves
BEGIN
    SELECT RAISE(ABORT, 'audit Merkle leaves are append-only: DELETE refused');
END;
-- INSERT OR REPLACE deletes without firing DELETE triggers: refuse an insert onto an
-- existing leaf, and any leaf for a session that already has all of its leaves.
CREATE TRIGGER audit_merkle_leaves_append_only BEFORE INSERT ON audit_merkle_leaves
WHEN EXISTS (SELECT 1 FROM audit_merkle_leaves
             WHERE session_id = NEW.session_id AND position = NEW.position)
  OR (SELECT count(*) FROM audit_merkle_leaves WHERE session_id = NEW.session_id)
     >= COALESCE((SELECT leaf_count FROM audit_sessions WHERE id = NEW.session_id), 0)
BEGIN
    SELECT RAISE(ABORT, 'audit Merkle leaves are append-only: INSERT refused');
END;

CREATE TRIGGER audit_sessions_no_delete BEFORE DELETE ON audit_sessions
BEGIN
    SELECT RAISE(ABORT, 'audit sessions are append-only: DELETE refused');
END;
CREATE TRIGGER audit_sessions_no_replace BEFORE INSERT ON audit_sessions
WHEN EXISTS (SELECT 1 FROM audit_sessions WHERE id = NEW.id)
BEGIN
    SELECT RAISE(ABORT, 'audit sessions are append-only: INSERT refused');
END;
-- What a session is never changes; only finalization fills in its root, once
-- (audit_sessions_frozen of 0005 refuses any UPDATE of a finalized session).
CREATE TRIGGER audit_sessions_identity_fixed
BEFORE UPDATE OF id, issue_id, auditor_id, reason, scope, started_at ON audit_sessions
WHEN NEW.id IS NOT OLD.id OR NEW.issue_id IS NOT OLD.issue_id
  OR NEW.auditor_id IS NOT OLD.auditor_id OR NEW.reason IS NOT OLD.reason
  OR NEW.scope IS NOT OLD.scope OR NEW.started_at IS NOT OLD.started_at
BEGIN
    SELECT RAISE(ABORT, 'an audit session''s identity is fixed: UPDATE refused');
END;

-- Thought records: INSERT OR REPLACE would replace a record without firing the DELETE
-- trigger of 0005; refuse an insert onto an existing record or chain position.
CREATE TRIGGER thought_records_append_only BEFORE INSERT ON thought_records
WHEN EXISTS (SELECT 1 FROM thought_records WHERE id = NEW.id)
  OR EXISTS (SELECT 1 FROM thought_records
             WHERE issue_id = NEW.issue_id AND chain_position = NEW.chain_position)
BEGIN
    SELECT RAISE(ABORT, 'thought records are append-only: INSERT refused');
END;
