-- PostgreSQL dialect of migrations/0014_archive.sql: a person archives a learning (it
-- leaves every search, is never merged into, and can be restored); a token's
-- revocation records who revoked it.
-- Never edit once shipped; add a new numbered file.

ALTER TABLE learnings ADD COLUMN archived_at TEXT COLLATE "C";
ALTER TABLE session_tokens ADD COLUMN revoked_by TEXT COLLATE "C";

ALTER TABLE learning_history DROP CONSTRAINT learning_history_event_check;
ALTER TABLE learning_history ADD CONSTRAINT learning_history_event_check
    CHECK (event IN ('created','verified','rated','merged','supersedes','superseded',
                     'feedback','outcome','flagged','aged','archived','restored'));
