-- PostgreSQL dialect of migrations/0006_audit_append_only.sql: audit tables are
-- append-only like the trail: the frozen Merkle leaves and a session's identity and
-- frozen root can be neither changed nor removed through SQL. (A role that owns the
-- tables can drop these triggers; verification then still recomputes every root from
-- its leaves and from the records, see docs/security.md, "Tamper evidence".)
-- Never edit once shipped; add a new numbered file in both dialects.

CREATE TRIGGER audit_merkle_leaves_no_update BEFORE UPDATE ON audit_merkle_leaves
    FOR EACH ROW EXECUTE FUNCTION cairn_refuse('audit Merkle leaves are append-only: UPDATE refused');
CREATE TRIGGER audit_merkle_leaves_no_delete BEFORE DELETE ON audit_merkle_leaves
    FOR EACH ROW EXECUTE FUNCTION cairn_refuse('audit Merkle leaves are append-only: DELETE refused');
CREATE TRIGGER audit_merkle_leaves_no_truncate BEFORE TRUNCATE ON audit_merkle_leaves
    FOR EACH STATEMENT EXECUTE FUNCTION cairn_refuse('audit Merkle leaves are append-only: TRUNCATE refused');

-- Refuse an insert onto an existing leaf, and any leaf for a session that already has
-- all of its leaves (as SQLite's audit_merkle_leaves_append_only).
CREATE FUNCTION audit_merkle_leaves_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM audit_merkle_leaves
               WHERE session_id = NEW.session_id AND position = NEW.position)
       OR (SELECT count(*) FROM audit_merkle_leaves WHERE session_id = NEW.session_id)
          >= COALESCE((SELECT leaf_count FROM audit_sessions WHERE id = NEW.session_id), 0)
    THEN
        RAISE EXCEPTION 'audit Merkle leaves are append-only: INSERT refused'
            USING ERRCODE = 'raise_exception';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER audit_merkle_leaves_append_only BEFORE INSERT ON audit_merkle_leaves
    FOR EACH ROW EXECUTE FUNCTION audit_merkle_leaves_append_only();

CREATE TRIGGER audit_sessions_no_delete BEFORE DELETE ON audit_sessions
    FOR EACH ROW EXECUTE FUNCTION cairn_refuse('audit sessions are append-only: DELETE refused');
CREATE TRIGGER audit_sessions_no_truncate BEFORE TRUNCATE ON audit_sessions
    FOR EACH STATEMENT EXECUTE FUNCTION cairn_refuse('audit sessions are append-only: TRUNCATE refused');

CREATE FUNCTION audit_sessions_no_replace() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM audit_sessions WHERE id = NEW.id) THEN
        RAISE EXCEPTION 'audit sessions are append-only: INSERT refused'
            USING ERRCODE = 'raise_exception';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER audit_sessions_no_replace BEFORE INSERT ON audit_sessions
    FOR EACH ROW EXECUTE FUNCTION audit_sessions_no_replace();

-- What a session is never changes; only finalization fills in its root, once
-- (audit_sessions_frozen of 0005 refuses any UPDATE of a finalized session).
-- Named audit_sessions_fixed_identity, not SQLite's audit_sessions_identity_fixed:
-- PostgreSQL fires the triggers of one event in the alphabetical order of their names
-- (SQLite: the newest first), and this one must fire before audit_sessions_frozen, so
-- that an identity change of a finalized session gets this message, as in SQLite.
CREATE TRIGGER audit_sessions_fixed_identity
BEFORE UPDATE OF id, issue_id, auditor_id, reason, scope, started_at ON audit_sessions
    FOR EACH ROW
    WHEN (NEW.id IS DISTINCT FROM OLD.id OR NEW.issue_id IS DISTINCT FROM OLD.issue_id
          OR NEW.auditor_id IS DISTINCT FROM OLD.auditor_id
          OR NEW.reason IS DISTINCT FROM OLD.reason
          OR NEW.scope IS DISTINCT FROM OLD.scope
          OR NEW.started_at IS DISTINCT FROM OLD.started_at)
    EXECUTE FUNCTION cairn_refuse('an audit session''s identity is fixed: UPDATE refused');

-- Thought records: refuse an insert onto an existing record or chain position (as
-- SQLite's thought_records_append_only; there it stops INSERT OR REPLACE, here
-- INSERT ... ON CONFLICT DO UPDATE, and it gives a duplicate its message).
CREATE FUNCTION thought_records_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM thought_records WHERE id = NEW.id)
       OR EXISTS (SELECT 1 FROM thought_records
                  WHERE issue_id = NEW.issue_id AND chain_position = NEW.chain_position)
    THEN
        RAISE EXCEPTION 'thought records are append-only: INSERT refused'
            USING ERRCODE = 'raise_exception';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER thought_records_append_only BEFORE INSERT ON thought_records
    FOR EACH ROW EXECUTE FUNCTION thought_records_append_only();
