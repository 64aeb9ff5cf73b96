-- A person takes a learning out of circulation without a successor (the web page's
-- "Archive", `cairn learnings archive`): it leaves every search and is never merged
-- into, but stays readable by id with its history, and "Restore" brings it back. A
-- token's revocation records who revoked it. See docs/learnings.md, "Archive".
-- Never edit once shipped; add a new numbered file.

-- When it was archived (NULL: in circulation).
ALTER TABLE learnings ADD COLUMN archived_at TEXT;
-- Who revoked a session token (`cli`, `person:NAME`, `forwarder`).
ALTER TABLE session_tokens ADD COLUMN revoked_by TEXT;

-- The history takes `archived` and `restored`. SQLite cannot change a CHECK: the table
-- is rebuilt with its ids (the watermark other processes refresh by) and its guards.
CREATE TABLE learning_history_v3 (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    learning_id     TEXT NOT NULL REFERENCES learnings(id),
    event           TEXT NOT NULL CHECK (event IN ('created','verified','rated','merged',
                        'supersedes','superseded','feedback','outcome','flagged','aged',
                        'archived','restored')),
    quality_before  INTEGER,
    quality_after   INTEGER NOT NULL,
    verified_before INTEGER,
    verified_after  INTEGER NOT NULL,
    actor           TEXT NOT NULL,
    note            TEXT,
    at              TEXT NOT NULL,
    issue_id        TEXT REFERENCES issues(id),
    related_id      TEXT
);
INSERT INTO learning_history_v3 (id, learning_id, event, quality_before, quality_after,
    verified_before, verified_after, actor, note, at, issue_id, related_id)
SELECT id, learning_id, event, quality_before, quality_after, verified_before,
    verified_after, actor, note, at, issue_id, related_id
FROM learning_history;
DROP TABLE learning_history;
ALTER TABLE learning_history_v3 RENAME TO learning_history;
CREATE INDEX learning_history_learning ON learning_history(learning_id, id);

CREATE TRIGGER learning_history_no_update BEFORE UPDATE ON learning_history
BEGIN
    SELECT RAISE(ABORT, 'learning history is append-only: UPDATE refused');
END;
CREATE TRIGGER learning_history_no_delete BEFORE DELETE ON learning_history
BEGIN
    SELECT RAISE(ABORT, 'learning history is append-only: DELETE refused');
END;
CREATE TRIGGER learning_history_no_replace BEFORE INSERT ON learning_history
WHEN EXISTS (SELECT 1 FROM learning_history WHERE id = NEW.id)
BEGIN
    SELECT RAISE(ABORT, 'learning history is append-only: INSERT refused');
END;
